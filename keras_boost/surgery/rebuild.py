"""Old path of `keras_boost.surgery.rebuild`: the code lives in `keras_boost.graph` now."""

from keras_boost.graph import rebuild  # noqa: F401

__all__ = ["rebuild"]
