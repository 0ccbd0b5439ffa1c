"""Keras callbacks of keras_boost."""

from keras_boost.callbacks.weight_trajectory import WeightTrajectory
from keras_boost.callbacks.weight_trajectory import load_trajectory
