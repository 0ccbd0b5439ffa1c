"""Old path of `keras_boost.precision`: the code lives in `keras_boost.algorithms.precision` now."""

from keras_boost.algorithms.precision import choose_precision  # noqa: F401
from keras_boost.algorithms.precision import CONFIG_VALUES  # noqa: F401
from keras_boost.algorithms.precision import model_policies  # noqa: F401
from keras_boost.algorithms.precision import PrecisionChoice  # noqa: F401
from keras_boost.algorithms.precision import PRECISIONS  # noqa: F401
from keras_boost.algorithms.precision import resolve_precision  # noqa: F401
from keras_boost.algorithms.precision import signature  # noqa: F401
from keras_boost.algorithms.precision import time_training_steps  # noqa: F401
from keras_boost.algorithms.precision import with_precision  # noqa: F401

__all__ = [
    "choose_precision",
    "CONFIG_VALUES",
    "model_policies",
    "PrecisionChoice",
    "PRECISIONS",
    "resolve_precision",
    "signature",
    "time_training_steps",
    "with_precision",
]
