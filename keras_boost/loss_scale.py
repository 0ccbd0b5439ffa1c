"""Moved: `DynamicLossScale` lives in `keras_boost.algorithms.loss_scaling` now; this path keeps old imports working."""

from keras_boost.algorithms.loss_scaling import DynamicLossScale  # noqa: F401
from keras_boost.algorithms.loss_scaling import resolve_loss_scale  # noqa: F401

__all__ = ["DynamicLossScale", "resolve_loss_scale"]
