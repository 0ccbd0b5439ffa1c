"""Old path of `keras_boost.ops.fake_quant`: the code lives in `keras_boost.algorithms.quantization` now."""

from keras_boost.algorithms.quantization import abs_max_dequantized  # noqa: F401
from keras_boost.algorithms.quantization import fake_quantize  # noqa: F401

__all__ = ["abs_max_dequantized", "fake_quantize"]
