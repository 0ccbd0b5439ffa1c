"""Old path of `keras_boost.callbacks.batch_size`: the code lives in `keras_boost.algorithms.batch_size` now."""

from keras_boost.algorithms.batch_size import AdaptiveBatchSize  # noqa: F401
from keras_boost.algorithms.batch_size import lr_factor  # noqa: F401
from keras_boost.algorithms.batch_size import LR_RULES  # noqa: F401
from keras_boost.algorithms.batch_size import NoiseScale  # noqa: F401
from keras_boost.algorithms.batch_size import simple_noise_scale  # noqa: F401

__all__ = ["AdaptiveBatchSize", "lr_factor", "LR_RULES", "NoiseScale", "simple_noise_scale"]
