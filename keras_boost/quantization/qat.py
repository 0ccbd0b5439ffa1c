"""Old path of `keras_boost.quantization.qat`: the code lives in `keras_boost.algorithms.quantization` now."""

from keras_boost.algorithms.quantization import QuantizationAwareTraining  # noqa: F401
from keras_boost.algorithms.quantization import quantize_aware  # noqa: F401
from keras_boost.algorithms.quantization import QuantizeAwareDense  # noqa: F401
from keras_boost.algorithms.quantization import set_active  # noqa: F401
from keras_boost.algorithms.quantization import strip  # noqa: F401

__all__ = ["QuantizationAwareTraining", "quantize_aware", "QuantizeAwareDense", "set_active", "strip"]
