"""Old path of `keras_boost.ops.centralize`: the code lives in `keras_boost.algorithms.centralization` now."""

from keras_boost.algorithms.centralization import centralize  # noqa: F401
from keras_boost.algorithms.centralization import gc_applies  # noqa: F401
from keras_boost.algorithms.centralization import GC_CHANNEL_MULTIPLE  # noqa: F401

__all__ = ["centralize", "gc_applies", "GC_CHANNEL_MULTIPLE"]
