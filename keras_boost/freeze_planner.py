"""Moved: gradient freezing's depth planner lives in `keras_boost.algorithms.freezing` now; this path keeps old imports working."""

from keras_boost.algorithms.freezing import TIMED_CALLS  # noqa: F401
from keras_boost.algorithms.freezing import DepthPlanner  # noqa: F401
from keras_boost.algorithms.freezing import FreezeDecision  # noqa: F401
from keras_boost.algorithms.freezing import best_plan_saving  # noqa: F401

__all__ = ["best_plan_saving", "DepthPlanner", "FreezeDecision", "TIMED_CALLS"]
