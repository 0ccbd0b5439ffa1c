"""One worker of a 2-worker MultiWorkerMirroredStrategy fit on loopback.

Run by ``tests/test_distribute_tf.py`` in a fresh process with ``TF_CONFIG``
set (cluster of 2 workers on 127.0.0.1, this process's index):
``python mwms_worker.py OUT_DIR``. Trains two BoostModels in the same
strategy, one with ``loss_scale="dynamic"`` and one without, 2 epochs each on
the same small deterministic dataset on both workers; then, as a reference,
the dynamic one again on this process's single device without a strategy.
Writes ``OUT_DIR/worker{index}.npz``: initial and final trainable weights,
the loss-scale state and the fit history of each run.
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

GLOBAL_BATCH = 16
N_SAMPLES = 64
EPOCHS = 2


def make_dataset():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(N_SAMPLES, 6)).astype("float32")
    w = rng.normal(size=(6, 3)).astype("float32")
    y = (x @ w + 0.1 * rng.normal(size=(N_SAMPLES, 3))).astype("float32")
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(GLOBAL_BATCH)
    return sharded_by_data(ds)


def main(out_dir):
    index, workers = cluster_role()
    strategy = ring_strategy(2)

    import keras

    import keras_boost

    def build(loss_scale):
        keras.utils.set_random_seed(0)
        inputs = keras.Input((6,))
        h = keras.layers.Dense(16, activation="relu")(inputs)
        outputs = keras.layers.Dense(3)(h)
        model = keras_boost.BoostModel(inputs, outputs, loss_scale=loss_scale)
        model.compile(
            optimizer=keras.optimizers.SGD(learning_rate=0.05, momentum=0.9), loss="mse"
        )
        return model

    def record(tag, model, init, history):
        for i, (a, b) in enumerate(zip(init, model.trainable_weights)):
            results[f"{tag}_init_{i}"] = a
            results[f"{tag}_final_{i}"] = keras.ops.convert_to_numpy(b)
        scaler = keras_boost.optimizers.find_in_chain(model.optimizer, keras_boost.optimizers.DynamicLossScaleOptimizer)
        for i, v in enumerate([] if scaler is None else [scaler.dynamic_scale, scaler.good_steps]):
            results[f"{tag}_scale_state_{i}"] = keras.ops.convert_to_numpy(v)
        for key, values in history.history.items():
            results[f"{tag}_history_{key}"] = np.asarray(values, dtype="float64")

    results = {}
    for tag, loss_scale in (("dynamic", "dynamic"), ("none", None)):
        with strategy.scope():
            model = build(loss_scale)
        init = [keras.ops.convert_to_numpy(v) for v in model.trainable_weights]
        record(tag, model, init, model.fit(make_dataset(), epochs=EPOCHS, verbose=0))
        if tag == "dynamic":
            dynamic_init = init

    # Reference: the same model and data on this process's one device, no
    # strategy (no collectives), from the distributed model's initial weights.
    single = build("dynamic")
    for v, w in zip(single.trainable_weights, dynamic_init):
        v.assign(w)
    record("single", single, dynamic_init, single.fit(make_dataset(), epochs=EPOCHS, verbose=0))
    np.savez(os.path.join(out_dir, f"worker{index}.npz"), **results)
    print(f"worker {index} done", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
