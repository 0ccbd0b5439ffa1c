"""Moved: AdaSum's math lives in `keras_boost.algorithms.adasum` now; this path keeps old imports working."""

from keras_boost.algorithms.adasum import adasum  # noqa: F401
from keras_boost.algorithms.adasum import adasum_reduce  # noqa: F401
from keras_boost.algorithms.adasum import adasum_tree  # noqa: F401
from keras_boost.algorithms.adasum import bit_reversed  # noqa: F401
from keras_boost.algorithms.adasum import group_mean  # noqa: F401
from keras_boost.algorithms.adasum import halving_doubling  # noqa: F401
from keras_boost.algorithms.adasum import halving_levels  # noqa: F401
from keras_boost.algorithms.adasum import run_collectives  # noqa: F401
from keras_boost.algorithms.adasum import simulate_halving_doubling  # noqa: F401

__all__ = [
    "adasum",
    "adasum_reduce",
    "adasum_tree",
    "bit_reversed",
    "group_mean",
    "halving_doubling",
    "halving_levels",
    "run_collectives",
    "simulate_halving_doubling",
]
