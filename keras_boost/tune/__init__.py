"""Tuning tools: the learning-rate range test."""

from keras_boost.tune.lr_finder import LRFinderResult
from keras_boost.tune.lr_finder import find_lr
