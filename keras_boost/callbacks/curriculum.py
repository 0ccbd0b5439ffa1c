"""Old path of `keras_boost.callbacks.curriculum`: the code lives in `keras_boost.algorithms.curriculum` now."""

from keras_boost.algorithms.curriculum import CurriculumCallback  # noqa: F401
from keras_boost.algorithms.curriculum import CurriculumSampler  # noqa: F401
from keras_boost.algorithms.curriculum import per_example_loss  # noqa: F401

__all__ = ["CurriculumCallback", "CurriculumSampler", "per_example_loss"]
