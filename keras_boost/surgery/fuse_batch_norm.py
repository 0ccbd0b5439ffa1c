"""Old path of `keras_boost.surgery.fuse_batch_norm`: the code lives in `keras_boost.algorithms.fused_batch_norm` now."""

from keras_boost.algorithms.fused_batch_norm import count_batch_norms  # noqa: F401
from keras_boost.algorithms.fused_batch_norm import fuse_batch_norm  # noqa: F401

__all__ = ["count_batch_norms", "fuse_batch_norm"]
