"""Moved: gradient freezing's groups lives in `keras_boost.algorithms.freezing` now; this path keeps old imports working."""

from keras_boost.algorithms.freezing import groups_from_blocks  # noqa: F401
from keras_boost.algorithms.freezing import model_blocks  # noqa: F401
from keras_boost.algorithms.freezing import variable_blocks  # noqa: F401

__all__ = ["groups_from_blocks", "model_blocks", "variable_blocks"]
