"""`python -m keras_boost.bench [bench [options]]`: the same as `keras-boost [bench [options]]`."""

from keras_boost.bench.cli import main

main()
