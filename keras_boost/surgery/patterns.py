"""Old path of `keras_boost.surgery.patterns`: the code lives in `keras_boost.algorithms.less_bn.patterns` now."""

from keras_boost.algorithms.less_bn.patterns import KINDS  # noqa: F401
from keras_boost.algorithms.less_bn.patterns import Pattern  # noqa: F401
from keras_boost.algorithms.less_bn.patterns import PATTERNS  # noqa: F401
from keras_boost.algorithms.less_bn.patterns import REMOVED_BN  # noqa: F401
from keras_boost.algorithms.less_bn.patterns import ROOT_KINDS  # noqa: F401
from keras_boost.algorithms.less_bn.patterns import TRANSPARENT_CLASSES  # noqa: F401

__all__ = [
    "KINDS",
    "Pattern",
    "PATTERNS",
    "REMOVED_BN",
    "ROOT_KINDS",
    "TRANSPARENT_CLASSES",
]
