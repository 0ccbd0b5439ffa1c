"""One worker of a MultiWorkerMirroredStrategy AdaSum fit on loopback.

Run by ``tests/test_distribute_tf.py`` in a fresh process with ``TF_CONFIG``
set (2 or 4 workers on 127.0.0.1): ``python mwms_adasum_worker.py OUT_DIR``.
Three fits of the same small net at O2 (AdaSum only, no model surgery):

- ``same``: every sample is the same row, so every replica's local mean
  gradient is the same and AdaSum must give what Keras' mean all-reduce
  gives (``same_mean``; the mean run equals a single device, see
  ``mwms_worker.py``);
- ``adasum`` and ``mean`` (level O0: Keras' mean all-reduce) on random data,
  from the same initial weights: AdaSum must act (the weights differ).

Writes ``OUT_DIR/worker{index}.npz``; all workers must write the same arrays.
"""

import os
import sys

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from mwms_common import cluster_role  # noqa: E402 (this directory is on sys.path)
from mwms_common import ring_strategy  # noqa: E402 (this directory is on sys.path)
from mwms_common import sharded_by_data  # noqa: E402 (this directory is on sys.path)

PER_REPLICA = 8
STEPS = 4
ADASUM_ONLY = {"boost": {"mode": "manual", "less_bn": False, "grad_freeze": False, "adasum": True}}


def make_dataset(workers, identical):
    rng = np.random.default_rng(0)
    n = STEPS * PER_REPLICA * workers
    x = rng.normal(size=(n, 6)).astype("float32")
    y = rng.normal(size=(n, 3)).astype("float32")
    if identical:
        x, y = np.repeat(x[:1], n, 0), np.repeat(y[:1], n, 0)
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(PER_REPLICA * workers)
    return sharded_by_data(ds)


def main(out_dir):
    index, workers = cluster_role()
    strategy = ring_strategy(workers)

    import keras

    import keras_boost

    def build(level, config=None):
        keras.utils.set_random_seed(0)
        inputs = keras.Input((6,))
        h = keras.layers.Dense(16, activation="tanh")(inputs)
        model = keras_boost.BoostModel(
            inputs, keras.layers.Dense(3)(h), boost_level=level, boost_config_dict=config
        )
        model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.05), loss="mse")
        return model

    results = {}

    def record(tag, model, history):
        for i, w in enumerate(model.get_weights()):
            results[f"{tag}_final_{i}"] = w
        results[f"{tag}_loss"] = np.asarray(history.history["loss"], dtype="float64")

    for tag, level, config, identical in (
        ("same", "O2", ADASUM_ONLY, True),
        ("adasum", "O2", ADASUM_ONLY, False),
        ("mean", "O0", None, False),
        ("same_mean", "O0", None, True),
    ):
        with strategy.scope():
            model = build(level, config)
            if tag == "adasum":
                status = model.check_adasum_enable()
                results["adasum_status"] = int(bool(status))
        record(tag, model, model.fit(make_dataset(workers, identical), epochs=2, verbose=0))
        if tag == "adasum":
            results["adasum_exchange"] = keras_boost.optimizers.find_in_chain(
                model.optimizer, keras_boost.AdaSum).traced_exchange
    np.savez(os.path.join(out_dir, f"worker{index}.npz"), **results)
    print(f"worker {index} done", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
