"""Old path of `keras_boost.distill`: the code lives in `keras_boost.algorithms.distillation` now."""

from keras_boost.algorithms.distillation import Distiller  # noqa: F401

__all__ = ["Distiller"]
