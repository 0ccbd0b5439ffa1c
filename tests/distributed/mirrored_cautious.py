"""Cautious masking under MirroredStrategy (2 logical CPUs) vs one device.

Run in a fresh process: ``python mirrored_cautious.py OUT_DIR``; writes
``OUT_DIR/cautious.npz`` with, for each mode, the weights after training
distributed and on one device, the weights before the run, and the largest
difference between the replicas' copies. Modes: ``plain`` (keras.Model +
CautiousOptimizer(AdamW)) and ``boost`` (BoostModel with the cautious switch).
The mask must compare the step with the replicas' summed gradient (the one
that made it), not with each replica's own.
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

N_REPLICAS = 2
DEVICES = logical_cpus(N_REPLICAS)

import keras  # noqa: E402

import keras_boost as boost  # noqa: E402


def build(mode):
    keras.utils.set_random_seed(0)
    inputs = keras.Input((4,))
    h = keras.layers.Dense(8, activation="tanh", name="dense0")(inputs)
    outputs = keras.layers.Dense(2, name="head")(h)
    optimizer = keras.optimizers.AdamW(0.05, weight_decay=0.1)
    if mode == "plain":
        model = keras.Model(inputs, outputs)
        optimizer = boost.CautiousOptimizer(optimizer)
    else:
        model = boost.BoostModel(inputs, outputs, boost_level="O0",
                                 boost_config_dict={"boost": {"mode": "manual", "cautious": True}})
    model.compile(optimizer=optimizer, loss="mse")
    return model


def spread(model):
    worst = 0.0
    for v in model.trainable_variables:
        copies = [np.asarray(c) for c in tf.distribute.get_strategy().experimental_local_results(v.value)]
        worst = max([worst] + [float(np.abs(c - copies[0]).max()) for c in copies])
    return worst


def main(out_dir):
    data = regression_batches()
    strategy = tf.distribute.MirroredStrategy(DEVICES)
    arrays = {}
    for mode in ("plain", "boost"):
        distributed, weights = train_distributed_and_single(strategy, lambda: build(mode), data, epochs=2)
        arrays.update({f"{mode}_{key}": value for key, value in weights.items()})
        with strategy.scope():
            arrays[f"{mode}_spread"] = np.float64(spread(distributed))
        chain = boost.optimizers.optimizer_chain(distributed.optimizer)
        cautious = next(o for o in chain if isinstance(o, boost.CautiousOptimizer))
        arrays[f"{mode}_masked_fraction"] = np.float64(cautious.masked_fraction)
    np.savez(os.path.join(out_dir, "cautious.npz"), **arrays)


if __name__ == "__main__":
    main(sys.argv[1])
