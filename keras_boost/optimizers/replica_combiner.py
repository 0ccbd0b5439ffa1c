"""Moved: `ReplicaCombiner` lives in `keras_boost.algorithms.adasum` now; this path keeps old imports working."""

from keras_boost.algorithms.adasum import ReplicaCombiner  # noqa: F401

__all__ = ["ReplicaCombiner"]
