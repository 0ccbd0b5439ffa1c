"""Old path of `keras_boost.surgery.less_bn`: the code lives in `keras_boost.algorithms.less_bn` now."""

from keras_boost.algorithms.less_bn import find_less_bn  # noqa: F401
from keras_boost.algorithms.less_bn import head_scale  # noqa: F401
from keras_boost.algorithms.less_bn import less_bn_for_config  # noqa: F401
from keras_boost.algorithms.less_bn import LessBN  # noqa: F401
from keras_boost.algorithms.less_bn import LessBNReport  # noqa: F401
from keras_boost.algorithms.less_bn import RemovedBN  # noqa: F401
from keras_boost.algorithms.less_bn import REPORT_ATTR  # noqa: F401

__all__ = [
    "find_less_bn",
    "head_scale",
    "less_bn_for_config",
    "LessBN",
    "LessBNReport",
    "RemovedBN",
    "REPORT_ATTR",
]
