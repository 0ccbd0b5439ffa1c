"""`SelectiveBackpropStep`: `BoostModel`'s step trains on the hardest examples of each batch.

Selective backprop (Jiang et al. 2019, "Accelerating Deep Learning by
Focusing on the Biggest Losers"; Composer's `SelectiveBackprop`) skips the
backward pass of the examples the model already gets right. In the window
`[start, end)` of training each step first runs the model in inference
mode on the whole batch (no gradient), ranks its examples by the compiled
loss, and takes the forward and backward pass on the `keep` fraction with
the highest loss; outside the window the step is unchanged. A step then
costs one inference pass plus `keep` of a training step, and each update
follows the examples that still teach something.

The window is a Python value read when the step is traced: the compiled
step is rebuilt at `start` and at `end` (two traces; see
`keras_boost.algorithms.scheduled_step`). The training metrics `fit` logs
in the window are the selected examples' (higher than the batch's).

Example:

```python
model = boost.BoostModel.from_model(model, boost_config_dict={
    "boost": {"mode": "manual", "selective_backprop": True},
    "selective_backprop": {"keep": 0.5, "start": 0.5, "end": 0.9}})
```
"""

import keras

from keras_boost.algorithms.scheduled_step import ScheduledStepPart
from keras_boost.algorithms.selective_backprop.selection import example_loss_function
from keras_boost.algorithms.selective_backprop.selection import hardest_examples
from keras_boost.algorithms.selective_backprop.selection import kept_count
from keras_boost.algorithms.selective_backprop.selection import per_example_loss
from keras_boost.algorithms.selective_backprop.selection import take_examples

__all__ = ["SelectiveBackpropStep"]


def _batch_size(x):
    """The batch size of `x`: a Python int when the trace knows it, else a
    tensor (a `tf.data` batch on TensorFlow)."""
    first = next(t for t in keras.tree.flatten(x) if t is not None)
    return first.shape[0] if first.shape[0] is not None else keras.ops.shape(first)[0]


class SelectiveBackpropStep(ScheduledStepPart):
    """The step part of selective backprop (config section `selective_backprop`).

    Attributes (read them after `fit`): `selected` (whether a step selected),
    `rebuilds` (train-function rebuilds at the window's edges).
    """

    label = "selective backprop"
    optional = True  # it trades accuracy for time; a step without it is the plain one

    def __init__(self, keep=0.5, start=0.5, end=0.9, total_steps="auto"):
        if not start < end:
            raise ValueError(f"selective_backprop.start must be below selective_backprop.end (the window "
                             f"[start, end) of training where it selects), got start={start!r}, end={end!r}.")
        super().__init__(total_steps)
        self.keep, self.start, self.end = keep, start, end
        self.loss_fn = None
        self.ran = self.selected = False

    def setting_at(self, progress):
        return self.start <= progress < self.end

    def check_model(self, model):
        self.loss_fn = example_loss_function(getattr(model, "loss", None))

    def prepare_batch(self, x, y, sample_weight, predict):
        self.ran = True
        self.traced()
        if not self.setting or y is None:
            return x, y, sample_weight
        self.selected = True
        losses = per_example_loss(self.loss_fn, y, predict(x))
        indices = hardest_examples(losses, kept_count(_batch_size(x), self.keep))
        return take_examples((x, y, sample_weight), indices)

    def summary(self, model):
        if not self.ran:
            return ""
        window = f"from {self.start:.0%} to {self.end:.0%} of training"
        if not self.selected:
            return f"selective backprop {window}: never selected (no step of this run fell in the window)"
        return f"selective backprop {window}: each step trained on the hardest {self.keep:.0%} of its batch"
