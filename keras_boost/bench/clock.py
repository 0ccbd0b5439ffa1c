"""What a timed run measures: training time and test accuracy (or loss) per epoch.

`AccuracyClock` records, at the end of every epoch, the training wall time
so far (evaluation excluded, compilation included) and the test accuracy,
or with `metric="loss"` the test loss (`sparse_cross_entropy`);
`time_to_accuracy` reads the time to an accuracy off such a curve,
`time_to_target` the time to a target of either metric.

Example:

```python
from keras_boost.bench.clock import AccuracyClock, time_to_accuracy
clock = AccuracyClock(x_test, y_test)
model.fit(x, y, epochs=5, callbacks=[clock])
time_to_accuracy(clock.curve, 0.95)   # seconds, or None: never reached
```
"""

import time

import keras
import numpy as np

__all__ = ["AccuracyClock", "sparse_cross_entropy", "time_to_accuracy", "time_to_target"]


class AccuracyClock(keras.callbacks.Callback):
    """Training wall time (evaluation excluded) and test accuracy per epoch.

    The clock starts at the first `fit` it is passed to and keeps running
    through later ones (the phases of a fine-tuning run): the time between
    two fits (unfreezing, recompiling) counts as training, the curve holds
    one point per epoch of all of them.

    Example:

    ```python
    clock = AccuracyClock(x_test, y_test)
    model.fit(dataset, steps_per_epoch=steps, epochs=2, callbacks=[clock])
    model.fit(dataset, steps_per_epoch=steps, epochs=3, callbacks=[clock])
    len(clock.curve)   # 5: [[train_seconds, accuracy], ...]
    loss_clock = AccuracyClock(x_val, y_val, metric="loss")   # [[train_seconds, loss], ...]
    ```
    """

    def __init__(self, x_test, y_test, evaluated_model=None, metric="accuracy"):
        super().__init__()
        if metric not in ("accuracy", "loss"):
            raise ValueError(f"AccuracyClock metric must be 'accuracy' or 'loss', got {metric!r}.")
        self.x_test, self.y_test = x_test, y_test
        self.metric = metric
        # The model to evaluate, when the fit trains a part of it (the
        # suffix of `fit_with_cached_prefix`); default: the fit's model.
        self.evaluated_model = evaluated_model
        self.curve, self.epoch_seconds = [], []
        self.start, self.eval_seconds = None, 0.0

    def on_train_begin(self, logs=None):
        if self.start is None:
            self.start = time.perf_counter()

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch_start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        end = time.perf_counter()
        self.epoch_seconds.append(end - self.epoch_start)
        trained_for = end - self.start - self.eval_seconds
        logits = (self.evaluated_model or self.model).predict(self.x_test, batch_size=256, verbose=0)
        if self.metric == "loss":
            value = sparse_cross_entropy(logits, self.y_test)
        else:
            value = float(np.mean(np.argmax(logits, -1) == self.y_test))
        self.eval_seconds += time.perf_counter() - end
        self.curve.append([trained_for, value])


def sparse_cross_entropy(logits, labels):
    """The mean cross-entropy of integer `labels` under `logits`, in nats.

    The loss the bench trains with (`SparseCategoricalCrossentropy(from_logits=True)`),
    averaged over every label (every position of a sequence model), in
    float64 NumPy.

    Example:

    ```python
    sparse_cross_entropy(np.zeros((2, 4)), np.array([0, 3]))   # log(4) = 1.386...
    ```
    """
    logits = np.asarray(logits, np.float64)
    labels = np.asarray(labels).astype(np.int64)
    shifted = logits - logits.max(axis=-1, keepdims=True)
    log_normalizer = np.log(np.exp(shifted).sum(axis=-1))
    picked = np.take_along_axis(shifted, labels[..., None], axis=-1)[..., 0]
    return float(np.mean(log_normalizer - picked))


def time_to_accuracy(curve, accuracy):
    """Training time at the first evaluation whose accuracy is >= `accuracy`.

    Accuracy is measured at the end of each epoch only, so the time is that
    of the first epoch end at or above it (MLPerf's rule: the first
    evaluation that reaches the target); nothing is interpolated between
    evaluations. A tolerance of 1e-9 absorbs float rounding of the target.

    Args:
        curve: `[[train_seconds, accuracy], ...]`, one point per epoch.
        accuracy: the accuracy to reach.

    Returns:
        The seconds, or None when no evaluation reaches `accuracy`.

    Example:

    ```python
    time_to_accuracy([[10, 0.90], [20, 0.95], [30, 0.94]], 0.93)   # 20
    time_to_accuracy([[10, 0.90], [20, 0.95]], 0.96)               # None
    ```
    """
    return next((float(t) for t, a in curve if a >= accuracy - 1e-9), None)


def time_to_target(curve, target, lower_is_better=False):
    """Training time at the first evaluation that reaches `target`.

    `time_to_accuracy` for a metric where higher is better; where lower is
    better (a loss), the first evaluation at or below `target` (with the
    same 1e-9 tolerance).

    Example:

    ```python
    time_to_target([[10, 2.1], [20, 1.4], [30, 1.5]], 1.5, lower_is_better=True)   # 20
    time_to_target([[10, 0.90], [20, 0.95]], 0.93)                                 # 20
    ```
    """
    if not lower_is_better:
        return time_to_accuracy(curve, target)
    return next((float(t) for t, v in curve if v <= target + 1e-9), None)
