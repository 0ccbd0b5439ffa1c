"""Moved: DimReduce's PCA lives in `keras_boost.algorithms.dim_reduce` now; this path keeps old imports working."""

from keras_boost.algorithms.dim_reduce import trajectory_pca  # noqa: F401

__all__ = ["trajectory_pca"]
