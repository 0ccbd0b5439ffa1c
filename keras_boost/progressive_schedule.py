"""Old path of `keras_boost.progressive_schedule`: the code lives in
`keras_boost.algorithms.progressive_resizing` and `keras_boost.algorithms.curriculum` now."""

from keras_boost.algorithms.curriculum import anneal_weight  # noqa: F401
from keras_boost.algorithms.curriculum import curriculum_probabilities  # noqa: F401
from keras_boost.algorithms.curriculum import MODES  # noqa: F401
from keras_boost.algorithms.progressive_resizing import check_scale  # noqa: F401
from keras_boost.algorithms.progressive_resizing import resize_scale  # noqa: F401
from keras_boost.algorithms.progressive_resizing import scheduled_size  # noqa: F401

__all__ = [
    "anneal_weight",
    "check_scale",
    "curriculum_probabilities",
    "MODES",
    "resize_scale",
    "scheduled_size",
]
