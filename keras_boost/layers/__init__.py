"""Layers keras_boost adds to models (`NormalizedDense`: LessBN's head)."""

from keras_boost.layers.normalized_dense import NormalizedDense
