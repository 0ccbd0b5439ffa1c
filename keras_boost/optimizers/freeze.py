"""Moved: `FreezeOptimizer` lives in `keras_boost.algorithms.freezing` now; this path keeps old imports working."""

from keras_boost.algorithms.freezing import DEFAULT_TABLE_STEPS  # noqa: F401
from keras_boost.algorithms.freezing import FreezeOpt  # noqa: F401
from keras_boost.algorithms.freezing import FreezeOptimizer  # noqa: F401

__all__ = ["DEFAULT_TABLE_STEPS", "FreezeOpt", "FreezeOptimizer"]
