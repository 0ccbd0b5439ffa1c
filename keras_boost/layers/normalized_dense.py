"""Old path of `keras_boost.layers.normalized_dense`: the code lives in `keras_boost.algorithms.less_bn` now."""

from keras_boost.algorithms.less_bn import adacos_scale  # noqa: F401
from keras_boost.algorithms.less_bn import matched_scale  # noqa: F401
from keras_boost.algorithms.less_bn import NO_GC_ATTR  # noqa: F401
from keras_boost.algorithms.less_bn import NormalizedDense  # noqa: F401

__all__ = ["adacos_scale", "matched_scale", "NO_GC_ATTR", "NormalizedDense"]
