"""Moved: `WeightTrajectory` lives in `keras_boost.algorithms.dim_reduce` now; this path keeps old imports working."""

from keras_boost.algorithms.dim_reduce import WeightTrajectory  # noqa: F401
from keras_boost.algorithms.dim_reduce import load_trajectory  # noqa: F401
from keras_boost.algorithms.dim_reduce import variables_spec  # noqa: F401

__all__ = ["load_trajectory", "variables_spec", "WeightTrajectory"]
