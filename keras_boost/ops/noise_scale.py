"""Old path of `keras_boost.ops.noise_scale`: the code lives in `keras_boost.algorithms.batch_size` now."""

from keras_boost.algorithms.batch_size import squared_global_norm  # noqa: F401
from keras_boost.algorithms.batch_size import window_gradient_norms  # noqa: F401

__all__ = ["squared_global_norm", "window_gradient_norms"]
