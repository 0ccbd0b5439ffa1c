"""Moved: loss scaling's arithmetic lives in `keras_boost.algorithms.loss_scaling` now; this path keeps old imports working."""

from keras_boost.algorithms.loss_scaling import GROUP_GROWTH  # noqa: F401
from keras_boost.algorithms.loss_scaling import GROUP_SHRINK  # noqa: F401
from keras_boost.algorithms.loss_scaling import all_finite  # noqa: F401
from keras_boost.algorithms.loss_scaling import group_all_finite  # noqa: F401
from keras_boost.algorithms.loss_scaling import scale_gradient  # noqa: F401
from keras_boost.algorithms.loss_scaling import unscale  # noqa: F401
from keras_boost.algorithms.loss_scaling import unscale_by_group  # noqa: F401
from keras_boost.algorithms.loss_scaling import update_group_scales  # noqa: F401
from keras_boost.algorithms.loss_scaling import update_loss_scale  # noqa: F401

__all__ = [
    "all_finite",
    "group_all_finite",
    "GROUP_GROWTH",
    "GROUP_SHRINK",
    "scale_gradient",
    "unscale",
    "unscale_by_group",
    "update_group_scales",
    "update_loss_scale",
]
