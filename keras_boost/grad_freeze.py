"""Moved: `GradientFreeze` lives in `keras_boost.algorithms.freezing` now; this path keeps old imports working."""

from keras_boost.algorithms.freezing import GradientFreeze  # noqa: F401

__all__ = ["GradientFreeze"]
