"""Layers keras_boost adds to models (`NormalizedDense`: LessBN's head; `FusedBatchNormalization`; `GroupLossScaleManager`: per-group loss scales; `ProgressiveResize`)."""

from keras_boost.layers.fused_batch_norm import FusedBatchNormalization
from keras_boost.layers.group_loss_scale import GroupLossScaleManager
from keras_boost.layers.normalized_dense import NormalizedDense
from keras_boost.layers.progressive_resize import ProgressiveResize
