"""Optimizer wrappers (composition over a Keras optimizer)."""

from keras_boost.optimizers.base import OptimizerWrapper
from keras_boost.optimizers.boost_optimizer import BoostOptimizer
