"""Fit procedures with the callbacks and input pipelines users add to `fit`.

Each runs `fit` and asserts that its callbacks did their job, so that a
boosted model which breaks a callback fails here, not silently.
"""

import keras
import numpy as np

from programs.base import predict


def _learning_rate(model):
    return float(keras.ops.convert_to_numpy(model.optimizer.learning_rate))


def fit_with_checkpoint_and_schedules(model, data, workdir):
    """ModelCheckpoint to a .keras file, EarlyStopping and ReduceLROnPlateau
    on `val_loss`, with `validation_split`."""
    checkpoint = str(workdir / "checkpoint.keras")
    learning_rate = _learning_rate(model)
    # A min_delta no val_loss can beat: every epoch after the first one is
    # "no improvement", so with patience 1 both callbacks act at the end of
    # epoch 2, whatever the losses are.
    plateau = dict(monitor="val_loss", patience=1, min_delta=1e9)
    history = model.fit(
        data.x, data.y, batch_size=8, epochs=4, validation_split=0.25, shuffle=False, verbose=0,
        callbacks=[
            keras.callbacks.ModelCheckpoint(checkpoint),
            keras.callbacks.EarlyStopping(**plateau),
            keras.callbacks.ReduceLROnPlateau(factor=0.5, **plateau),
        ],
    )
    assert history.epoch == [0, 1], f"EarlyStopping should stop after epoch 2: {history.epoch}"
    np.testing.assert_allclose(_learning_rate(model), 0.5 * learning_rate, rtol=1e-6)
    restored = keras.saving.load_model(checkpoint)
    x = data.head(8)
    np.testing.assert_allclose(predict(restored, x), predict(model, x), rtol=1e-6, atol=1e-6)
    return history.history


def _dataset(data, batch_size=8):
    import tensorflow as tf

    return tf.data.Dataset.from_tensor_slices((data.x, data.y)).batch(batch_size)


class Interrupted(Exception):
    pass


class _InterruptAt(keras.callbacks.Callback):
    """Raises after batch `batch` of epoch `epoch`; records finished epochs' logs."""

    def __init__(self, epoch, batch):
        super().__init__()
        self.at = (epoch, batch)
        self.epoch_logs = []

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_epoch_end(self, epoch, logs=None):
        self.epoch_logs.append(dict(logs))

    def on_train_batch_end(self, batch, logs=None):
        if (self.epoch, batch) == self.at:
            raise Interrupted(f"interrupted after batch {batch} of epoch {self.epoch + 1}")


def fit_interrupted_then_resumed(model, data, workdir, epochs=2):
    """tf.data input; a fit killed mid-way through epoch 2, then a new fit
    that BackupAndRestore resumes from the end of epoch 1."""
    dataset = _dataset(data)
    steps = int(dataset.cardinality())
    backup_dir = str(workdir / "backup")
    start = int(keras.ops.convert_to_numpy(model.optimizer.iterations))
    interrupt = _InterruptAt(epoch=1, batch=0)
    try:
        model.fit(dataset, epochs=epochs, verbose=0,
                  callbacks=[keras.callbacks.BackupAndRestore(backup_dir), interrupt])
    except Interrupted:
        pass
    else:
        raise AssertionError("the interrupting callback did not stop fit")
    assert len(interrupt.epoch_logs) == 1
    # The interrupted epoch ran one more step on the model; the backup of
    # epoch 1 (weights and optimizer state) must replace them.
    history = model.fit(dataset, epochs=epochs, verbose=0,
                        callbacks=[keras.callbacks.BackupAndRestore(backup_dir)])
    assert history.epoch == [1], f"the new fit should resume at epoch 2: {history.epoch}"
    iterations = int(keras.ops.convert_to_numpy(model.optimizer.iterations))
    assert iterations == start + epochs * steps, (iterations, start, epochs * steps)
    return {key: [interrupt.epoch_logs[0][key]] + values for key, values in history.history.items()}
