"""One worker of a 2-worker MWMS run in which worker 1 is killed mid-epoch.

Run by ``tests/test_distribute_tf.py`` with ``TF_CONFIG`` set:
``python mwms_kill_worker.py OUT_DIR PHASE``, PHASE one of

- ``full``: 4 epochs uninterrupted (the reference);
- ``killed``: the same fit with ``keras.callbacks.BackupAndRestore``; worker 1
  SIGKILLs itself at batch 3 of epoch 3 (a lost machine, no clean-up); the
  harness then kills worker 0, which is blocked in the step's collective;
- ``resume``: the same command again: BackupAndRestore restores the state of
  the last epoch end and the fit reruns epochs 3 and 4.

The model carries keras_boost's stateful pieces: O2 (AdaSum) with explicit
freeze groups (MindSpore's meaning: every depth runs as scheduled, so the run
is deterministic), gradient accumulation over 2 micro-steps and dynamic loss
scaling with a 3-update growth window (the scale moves during the run).
Writes ``OUT_DIR/{PHASE}_worker{index}.npz``: final weights, every optimizer
variable (loss scale, accumulators, freeze step, AdaSum counters, slots) and
the epochs run.
"""

import os
import signal
import sys

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from mwms_common import cluster_role  # noqa: E402 (this directory is on sys.path)
from mwms_restore_worker import make_dataset  # noqa: E402 (this directory is on sys.path)

EPOCHS = 4
BATCHES = 6
KILL_AT = (2, 3)  # (epoch, batch), zero-based
CONFIG = {
    "boost": {"mode": "manual", "less_bn": False, "grad_freeze": True, "adasum": True,
              "grad_accumulation": True},
    "grad_accumulation": {"grad_accumulation_step": 2},
    "grad_freeze": {"param_groups": 2, "freeze_p": 0.5, "total_steps": 12, "seed": 1},
}


def main(out_dir, phase):
    index, workers = cluster_role()
    strategy = tf.distribute.MultiWorkerMirroredStrategy()

    import keras

    import keras_boost as boost

    class LostMachine(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            self.epoch = epoch

        def on_train_batch_begin(self, batch, logs=None):
            if (self.epoch, batch) == KILL_AT:
                os.kill(os.getpid(), signal.SIGKILL)

    with strategy.scope():
        keras.utils.set_random_seed(0)
        inputs = keras.Input((6,))
        h = keras.layers.Dense(16, activation="tanh")(inputs)
        h = keras.layers.Dense(8, activation="tanh")(h)
        model = boost.BoostModel(
            inputs, keras.layers.Dense(3)(h), boost_level="O2", boost_config_dict=CONFIG,
            loss_scale=boost.DynamicLossScale(initial_scale=16.0, scale_window=3),
        )
        model.compile(optimizer=keras.optimizers.SGD(0.05, momentum=0.9), loss="mse")
    backup = os.path.join(out_dir, f"{'full' if phase == 'full' else 'run'}_backup_w{index}")
    callbacks = [keras.callbacks.BackupAndRestore(backup)]
    if phase == "killed" and index == 1:
        callbacks.append(LostMachine())
    history = model.fit(make_dataset(workers, BATCHES), epochs=EPOCHS, verbose=0, callbacks=callbacks)
    results = {f"final_{i}": w for i, w in enumerate(model.get_weights())}
    for variable in model.optimizer.variables:
        results[f"opt_{variable.path}"] = np.asarray(keras.ops.convert_to_numpy(variable))
    results["epochs_run"] = np.asarray(history.epoch)
    np.savez(os.path.join(out_dir, f"{phase}_worker{index}.npz"), **results)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
