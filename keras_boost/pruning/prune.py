"""Old path of `keras_boost.pruning.prune`: the code lives in `keras_boost.algorithms.pruning` now."""

from keras_boost.algorithms.pruning import apply_masks  # noqa: F401
from keras_boost.algorithms.pruning import kernel_variable  # noqa: F401
from keras_boost.algorithms.pruning import PolynomialDecay  # noqa: F401
from keras_boost.algorithms.pruning import prune_low_magnitude  # noqa: F401
from keras_boost.algorithms.pruning import PrunedModel  # noqa: F401
from keras_boost.algorithms.pruning import PruneLowMagnitude  # noqa: F401
from keras_boost.algorithms.pruning import sparsity_report  # noqa: F401
from keras_boost.algorithms.pruning import strip  # noqa: F401
from keras_boost.algorithms.pruning import UpdatePruningMasks  # noqa: F401

__all__ = [
    "apply_masks",
    "kernel_variable",
    "PolynomialDecay",
    "prune_low_magnitude",
    "PrunedModel",
    "PruneLowMagnitude",
    "sparsity_report",
    "strip",
    "UpdatePruningMasks",
]
