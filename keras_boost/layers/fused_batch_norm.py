"""Old path of `keras_boost.layers.fused_batch_norm`: the code lives in `keras_boost.algorithms.fused_batch_norm` now."""

from keras_boost.algorithms.fused_batch_norm import FusedBatchNormalization  # noqa: F401

__all__ = ["FusedBatchNormalization"]
