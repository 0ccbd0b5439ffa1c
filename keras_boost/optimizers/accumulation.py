"""Moved: `GradientAccumulation` lives in `keras_boost.algorithms.accumulation` now; this path keeps old imports working."""

from keras_boost.algorithms.accumulation import FlushGradientAccumulation  # noqa: F401
from keras_boost.algorithms.accumulation import GradientAccumulation  # noqa: F401
from keras_boost.algorithms.accumulation import find_gradient_accumulation  # noqa: F401

__all__ = ["find_gradient_accumulation", "FlushGradientAccumulation", "GradientAccumulation"]
