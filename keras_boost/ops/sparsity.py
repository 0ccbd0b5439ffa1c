"""Old path of `keras_boost.ops.sparsity`: the code lives in `keras_boost.algorithms.pruning.sparsity` now."""

from keras_boost.algorithms.pruning.sparsity import magnitude_mask  # noqa: F401
from keras_boost.algorithms.pruning.sparsity import polynomial_sparsity  # noqa: F401
from keras_boost.algorithms.pruning.sparsity import pruned_count  # noqa: F401
from keras_boost.algorithms.pruning.sparsity import real_sparsity  # noqa: F401

__all__ = [
    "magnitude_mask",
    "polynomial_sparsity",
    "pruned_count",
    "real_sparsity",
]
