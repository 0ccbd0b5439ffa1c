"""A step part whose traced step follows a training schedule, and the callback that moves it.

Some step parts change what the train step computes as training goes on
(the sequence length of `seq_length_warmup`, whether `selective_backprop`
selects). They read their setting as a Python value when the step is
traced, so a compiled step (TensorFlow, JAX) bakes it in; `ScheduleCallback`
tells the part where training is before each step and, when the part says
its traced setting is stale, rebuilds the train function (one trace per
setting). On torch (eager) each step reads the setting anew.

Progress is the fraction of training done, counted in train-function
calls: over this `fit` call with `total_steps="auto"`, else over
`total_steps` counted from the optimizer's `iterations` (a run split over
several `fit` calls follows one schedule).

Example:

```python
class EveryOther(ScheduledStepPart):
    def setting_at(self, progress):
        return progress >= 0.5    # a Python value the step reads when traced
```
"""

import keras

from keras_boost.algorithms.step_part import StepPart

__all__ = ["ScheduleCallback", "ScheduledStepPart"]


class ScheduledStepPart(StepPart):
    """A step part with a setting that follows training progress.

    Subclasses define `setting_at(progress)` and read `self.setting` where
    the step is traced (`prepare_batch`), calling `self.traced()` there.
    """

    def __init__(self, total_steps="auto"):
        self.total_steps = total_steps
        self.step, self.progress = 0, 0.0  # of the next train-function call
        self.traced_setting = None  # what the current train function was traced with
        self.rebuilds = 0

    def setting_at(self, progress):
        raise NotImplementedError

    @property
    def setting(self):
        return self.setting_at(self.progress)

    def traced(self):
        """Records that the step is being traced (or run eagerly) with `setting`."""
        self.traced_setting = self.setting

    def check_model(self, model):
        """Raises before training when `model` cannot take this part's steps."""

    def callbacks(self, model):
        return [ScheduleCallback(self)]


class ScheduleCallback(keras.callbacks.Callback):
    """Moves a `ScheduledStepPart`'s progress before each step; rebuilds the
    compiled train function when the part's setting changes."""

    def __init__(self, part):
        super().__init__()
        self.part = part

    def on_train_begin(self, logs=None):
        part = self.part
        part.check_model(self.model)
        epochs, steps = int(self.params.get("epochs") or 1), self.params.get("steps")
        if part.total_steps == "auto":
            self._start, self._total = 0, epochs * steps if steps else None
        else:
            iterations = self.model.optimizer.iterations
            self._start, self._total = int(keras.ops.convert_to_numpy(iterations)), part.total_steps
        self._epochs, self._epochs_done, self._done = epochs, 0, 0
        self._move(0.0 if self._total is None else self._start / self._total)

    def on_epoch_begin(self, epoch, logs=None):
        if self._total is None:  # unknown steps per epoch: progress by epochs
            self._move(self._epochs_done / self._epochs)

    def on_epoch_end(self, epoch, logs=None):
        self._epochs_done += 1

    def on_train_batch_begin(self, batch, logs=None):
        if self._total is not None:
            self._move((self._start + self._done) / self._total)

    def on_train_batch_end(self, batch, logs=None):
        self._done += 1

    def _move(self, progress):
        part = self.part
        part.progress, part.step = min(progress, 1.0), self._start + self._done
        if part.traced_setting is not None and part.setting != part.traced_setting:
            self.model.make_train_function(force=True)
            part.traced_setting = None
            part.rebuilds += 1
