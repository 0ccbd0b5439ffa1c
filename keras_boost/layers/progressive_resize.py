"""Old path of `keras_boost.layers.progressive_resize`: the code lives in `keras_boost.algorithms.progressive_resizing` now."""

from keras_boost.algorithms.progressive_resizing import MODES  # noqa: F401
from keras_boost.algorithms.progressive_resizing import ProgressiveResize  # noqa: F401

__all__ = ["MODES", "ProgressiveResize"]
