"""Moved: `DimReduce` lives in `keras_boost.algorithms.dim_reduce` now; this path keeps old imports working."""

from keras_boost.algorithms.dim_reduce import DimReduce  # noqa: F401
from keras_boost.algorithms.dim_reduce import load_basis  # noqa: F401
from keras_boost.algorithms.dim_reduce import read_basis  # noqa: F401
from keras_boost.algorithms.dim_reduce import trajectory_pca  # noqa: F401
from keras_boost.algorithms.dim_reduce import wait_for_basis  # noqa: F401

__all__ = ["DimReduce", "load_basis", "read_basis", "trajectory_pca", "wait_for_basis"]
