"""Small datasets: real ones embedded in the package, and generated tasks (nothing downloads)."""

from keras_boost.datasets.mnist import load_mnist_sample
from keras_boost.datasets.tokens import token_task

__all__ = ["load_mnist_sample", "token_task"]
