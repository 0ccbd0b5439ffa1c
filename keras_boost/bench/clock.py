"""What a timed run measures: training time and test accuracy per epoch.

`AccuracyClock` records, at the end of every epoch, the training wall time
so far (evaluation excluded, compilation included) and the test accuracy;
`time_to_accuracy` reads the time to an accuracy off such a curve.

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

__all__ = ["AccuracyClock", "time_to_accuracy"]


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
    ```
    """

    def __init__(self, x_test, y_test, evaluated_model=None):
        super().__init__()
        self.x_test, self.y_test = x_test, y_test
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
        accuracy = float(np.mean(np.argmax(logits, -1) == self.y_test))
        self.eval_seconds += time.perf_counter() - end
        self.curve.append([trained_for, accuracy])


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
