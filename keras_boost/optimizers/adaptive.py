"""Old path of `keras_boost.optimizers.adaptive`: the code lives in `keras_boost.algorithms.adaptive_optimizers` now."""

from keras_boost.algorithms.adaptive_optimizers import AdaBelief  # noqa: F401
from keras_boost.algorithms.adaptive_optimizers import AdaBound  # noqa: F401
from keras_boost.algorithms.adaptive_optimizers import LARS  # noqa: F401

__all__ = ["AdaBelief", "AdaBound", "LARS"]
