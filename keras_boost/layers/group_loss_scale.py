"""Moved: `GroupLossScaleManager` lives in `keras_boost.algorithms.loss_scaling` now; this path keeps old imports working."""

from keras_boost.algorithms.loss_scaling import GroupLossScaleManager  # noqa: F401

__all__ = ["GroupLossScaleManager"]
