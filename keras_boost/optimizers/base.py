"""Moved: the optimizer-wrapper base lives in `keras_boost.algorithms.optimizer_wrapper` now; this path keeps old imports working."""

from keras_boost.algorithms.optimizer_wrapper import BASE_HYPERPARAMETERS  # noqa: F401
from keras_boost.algorithms.optimizer_wrapper import HYPERPARAMETERS  # noqa: F401
from keras_boost.algorithms.optimizer_wrapper import OptimizerWrapper  # noqa: F401
from keras_boost.algorithms.optimizer_wrapper import check_optimizer  # noqa: F401
from keras_boost.algorithms.optimizer_wrapper import find_in_chain  # noqa: F401
from keras_boost.algorithms.optimizer_wrapper import optimizer_chain  # noqa: F401

__all__ = [
    "BASE_HYPERPARAMETERS",
    "check_optimizer",
    "find_in_chain",
    "HYPERPARAMETERS",
    "optimizer_chain",
    "OptimizerWrapper",
]
