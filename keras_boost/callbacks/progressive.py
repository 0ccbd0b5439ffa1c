"""Old path of `keras_boost.callbacks.progressive`: the code lives in `keras_boost.algorithms.progressive_resizing` now."""

from keras_boost.algorithms.progressive_resizing import find_resize_layers  # noqa: F401
from keras_boost.algorithms.progressive_resizing import ProgressiveResizing  # noqa: F401

__all__ = ["find_resize_layers", "ProgressiveResizing"]
