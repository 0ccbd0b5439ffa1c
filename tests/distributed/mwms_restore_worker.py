"""One worker of a 2-worker MWMS O2 fit that is interrupted and resumed.

Run by ``tests/test_distribute_tf.py`` with ``TF_CONFIG`` set:
``python mwms_restore_worker.py OUT_DIR PHASE``, PHASE one of

- ``full``: 4 epochs uninterrupted (the reference);
- ``interrupted``: the same fit with ``keras.callbacks.BackupAndRestore``;
  every worker exits (code 17) right after the backup of epoch 2, as a
  preempted job does;
- ``resume``: the same command again: BackupAndRestore restores epoch 2 and
  the fit runs epochs 3 and 4.

Writes ``OUT_DIR/{PHASE}_worker{index}.npz`` (final weights, epochs run).
Each worker keeps its own backup directory (the workers' weights are
identical, so each restores the same state).
"""

import os
import sys

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from mwms_common import cluster_role  # noqa: E402 (this directory is on sys.path)
from mwms_common import sharded_by_data  # noqa: E402 (this directory is on sys.path)

EPOCHS = 4
INTERRUPT_AFTER = 2  # epochs
CONFIG = {"boost": {"mode": "manual", "less_bn": False, "grad_freeze": False, "adasum": True}}


def make_dataset(workers, batches=4):
    """`batches` global batches of 8 per worker, sharded by data (no shuffle)."""
    rng = np.random.default_rng(0)
    n = batches * 8 * workers
    x = rng.normal(size=(n, 6)).astype("float32")
    y = rng.normal(size=(n, 3)).astype("float32")
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(8 * workers)
    return sharded_by_data(ds)


def main(out_dir, phase):
    index, workers = cluster_role()
    strategy = tf.distribute.MultiWorkerMirroredStrategy()

    import keras

    import keras_boost

    class Preempted(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            if epoch + 1 == INTERRUPT_AFTER:
                os._exit(17)  # after BackupAndRestore (earlier in the list) saved

    with strategy.scope():
        keras.utils.set_random_seed(0)
        inputs = keras.Input((6,))
        h = keras.layers.Dense(16, activation="tanh")(inputs)
        model = keras_boost.BoostModel(
            inputs, keras.layers.Dense(3)(h), boost_level="O2", boost_config_dict=CONFIG
        )
        model.compile(optimizer=keras.optimizers.SGD(0.05, momentum=0.9), loss="mse")
    backup = os.path.join(out_dir, f"{'full' if phase == 'full' else 'run'}_backup_w{index}")
    callbacks = [keras.callbacks.BackupAndRestore(backup)]
    if phase == "interrupted":
        callbacks.append(Preempted())
    history = model.fit(make_dataset(workers), epochs=EPOCHS, verbose=0, callbacks=callbacks)
    results = {f"final_{i}": w for i, w in enumerate(model.get_weights())}
    results["epochs_run"] = np.asarray(history.epoch)
    np.savez(os.path.join(out_dir, f"{phase}_worker{index}.npz"), **results)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
