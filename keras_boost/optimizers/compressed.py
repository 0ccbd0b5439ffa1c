"""Moved: `CompressedAllReduce` lives in `keras_boost.algorithms.compressed_all_reduce` now; this path keeps old imports working."""

from keras_boost.algorithms.compressed_all_reduce import WIRE_DTYPES  # noqa: F401
from keras_boost.algorithms.compressed_all_reduce import CompressedAllReduce  # noqa: F401
from keras_boost.algorithms.compressed_all_reduce import wire_bytes  # noqa: F401

__all__ = ["CompressedAllReduce", "wire_bytes", "WIRE_DTYPES"]
