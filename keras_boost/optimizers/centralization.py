"""Old path of `keras_boost.optimizers.centralization`: the code lives in `keras_boost.algorithms.centralization` now."""

from keras_boost.algorithms.centralization import exclude_grouped_kernels  # noqa: F401
from keras_boost.algorithms.centralization import GradientCentralization  # noqa: F401
from keras_boost.algorithms.centralization import should_centralize  # noqa: F401

__all__ = ["exclude_grouped_kernels", "GradientCentralization", "should_centralize"]
