"""`python -m keras_boost.bench [options]`: the same as `keras-boost bench [options]`."""

from keras_boost.bench.cli import run

run()
