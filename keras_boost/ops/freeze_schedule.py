"""Moved: gradient freezing's schedule lives in `keras_boost.algorithms.freezing` now; this path keeps old imports working."""

from keras_boost.algorithms.freezing import CONTINUOUS  # noqa: F401
from keras_boost.algorithms.freezing import INTERVAL  # noqa: F401
from keras_boost.algorithms.freezing import depth_probabilities  # noqa: F401
from keras_boost.algorithms.freezing import generate_freeze_index_sequence  # noqa: F401
from keras_boost.algorithms.freezing import suffix_groups  # noqa: F401

__all__ = [
    "CONTINUOUS",
    "depth_probabilities",
    "generate_freeze_index_sequence",
    "INTERVAL",
    "suffix_groups",
]
