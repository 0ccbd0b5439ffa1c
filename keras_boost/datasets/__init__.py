"""Small real datasets embedded in the package (nothing downloads)."""

from keras_boost.datasets.mnist import load_mnist_sample

__all__ = ["load_mnist_sample"]
