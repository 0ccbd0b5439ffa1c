"""What the MirroredStrategy-vs-one-device scripts share.

Import it before Keras builds anything: `logical_cpus` must run before
TensorFlow initializes its devices.
"""

import numpy as np
import tensorflow as tf


def logical_cpus(count):
    """Splits the CPU into `count` logical devices; returns their names."""
    cpus = tf.config.list_physical_devices("CPU")
    tf.config.set_logical_device_configuration(cpus[0], [tf.config.LogicalDeviceConfiguration()] * count)
    return [f"/CPU:{i}" for i in range(count)]


def regression_batches(seed=0, samples=48, batch_size=8):
    """Batches of 4 normal features and 2 normal targets, in a fixed order."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(samples, 4)).astype("float32")
    y = rng.normal(size=(samples, 2)).astype("float32")
    return tf.data.Dataset.from_tensor_slices((x, y)).batch(batch_size)


def flat(model):
    """Every weight of `model`, raveled into one vector."""
    return np.concatenate([w.ravel() for w in model.get_weights()])


def train_distributed_and_single(strategy, build, data, epochs):
    """Builds a model in `strategy`'s scope and one outside it with the same
    initial weights, fits both on `data` without shuffling, and returns
    `(distributed, {"init", "distributed", "single"})`: the distributed
    model and the flattened weights before and after."""
    with strategy.scope():
        distributed = build()
    single = build()
    single.set_weights(distributed.get_weights())
    arrays = {"init": flat(distributed)}
    for model in (distributed, single):
        model.fit(data, epochs=epochs, shuffle=False, verbose=0)
    arrays.update(distributed=flat(distributed), single=flat(single))
    return distributed, arrays
