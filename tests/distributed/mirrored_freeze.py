"""Gradient freezing under MirroredStrategy (4 logical CPUs) vs one device.

Run in a fresh process: ``python mirrored_freeze.py OUT_DIR``; writes
``OUT_DIR/freeze.npz`` with, for each mode, the weights after training
distributed and on one device, and the weights before the run. Modes:

- ``boost``: BoostModel drives the schedule (one compiled step per depth,
  gradients of the trained group only);
- ``plain``: keras.Model + FreezeOptimizer, which selects the group in a
  cross-replica switch (legal under tf.distribute).
"""

import os
import sys

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from mirrored_common import logical_cpus  # noqa: E402
from mirrored_common import regression_batches  # noqa: E402
from mirrored_common import train_distributed_and_single  # noqa: E402

N_REPLICAS = 4
DEVICES = logical_cpus(N_REPLICAS)

import keras  # noqa: E402

import keras_boost as boost  # noqa: E402

SCHEDULE = [2, 0, 3, 1, 2, 0]


def build(model_cls):
    keras.utils.set_random_seed(0)
    inputs = keras.Input((4,))
    h = inputs
    for i in range(4):
        h = keras.layers.Dense(6, activation="tanh", name=f"dense{i}")(h)
    model = model_cls(inputs, keras.layers.Dense(2, name="head")(h))
    groups = boost.GradientFreeze().split_parameters_groups(model, 5)
    opt = boost.FreezeOptimizer(keras.optimizers.SGD(0.1, momentum=0.9), groups, SCHEDULE)
    model.compile(optimizer=opt, loss="mse")
    return model


def main(out_dir):
    data = regression_batches()
    strategy = tf.distribute.MirroredStrategy(DEVICES)
    arrays = {}
    for mode, model_cls in (("boost", boost.BoostModel), ("plain", keras.Model)):
        _, weights = train_distributed_and_single(strategy, lambda: build(model_cls), data, epochs=1)
        arrays.update({f"{mode}_{key}": value for key, value in weights.items()})
    np.savez(os.path.join(out_dir, "freeze.npz"), **arrays)


if __name__ == "__main__":
    main(sys.argv[1])
