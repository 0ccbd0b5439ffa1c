"""Moved: DimReduce's subspace math lives in `keras_boost.algorithms.dim_reduce` now; this path keeps old imports working."""

from keras_boost.algorithms.dim_reduce import armijo_accepts  # noqa: F401
from keras_boost.algorithms.dim_reduce import back_project  # noqa: F401
from keras_boost.algorithms.dim_reduce import bfgs_inverse_update  # noqa: F401
from keras_boost.algorithms.dim_reduce import flatten  # noqa: F401
from keras_boost.algorithms.dim_reduce import project  # noqa: F401
from keras_boost.algorithms.dim_reduce import subspace_step  # noqa: F401
from keras_boost.algorithms.dim_reduce import unflatten  # noqa: F401

__all__ = [
    "armijo_accepts",
    "back_project",
    "bfgs_inverse_update",
    "flatten",
    "project",
    "subspace_step",
    "unflatten",
]
