"""Tuning tools: the learning-rate range test, and `search` (KerasTuner, optional)."""

from keras_boost.tune.lr_finder import LRFinderResult
from keras_boost.tune.lr_finder import find_lr
from keras_boost.tune.search import SearchResult
from keras_boost.tune.search import boost_config_for
from keras_boost.tune.search import search

__all__ = ["LRFinderResult", "SearchResult", "boost_config_for", "find_lr", "search"]
