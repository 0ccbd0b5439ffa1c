"""`SeqLengthWarmupStep`: `BoostModel`'s train step on shorter sequences first.

Sequence-length warm-up (Li et al. 2022, "The Stability-Efficiency Dilemma";
Composer's `SeqLengthWarmup`) trains a sequence model on the first
`min_length` tokens of each sequence at the start, growing to the full
length over the first `duration` of training. A short step costs less
(attention and the feed-forward network scale with the tokens), and early
training on short contexts is reported to be more stable.

Design. Keras' `fit` owns the batches (tf.data, NumPy, DataLoader), so the
cut happens in the train step, on whatever `fit` hands it: this part's
`prepare_batch` slices the inputs, targets and sample weights to the
scheduled length (`truncation.truncate_batch`) before the forward pass.
The length is a Python int read when the step is traced: a compiled step
(TensorFlow, JAX) bakes it in, so the part's callback rebuilds the train
function when the schedule moves to the next length, one trace per length
(`scheduled_lengths`: 8 for 64 tokens in steps of 8). On torch (eager)
every step reads it anew. Evaluation, `predict` and `fit`'s validation
always see full sequences.

Progress is counted in train-function calls: over this `fit` call with
`total_steps="auto"`, else over `total_steps` counted from the optimizer's
`iterations` (a run split over several `fit` calls warms up once).

Example:

```python
model = boost.BoostModel.from_model(gpt, boost_config_dict={
    "boost": {"mode": "manual", "seq_length_warmup": True},
    "seq_length_warmup": {"min_length": 16, "step_size": 16, "duration": 0.3}})
model.compile(optimizer=keras.optimizers.AdamW(3e-3), loss=...)
model.fit(tokens, next_tokens, epochs=8)
model.boost_summary()  # ...; sequence-length warm-up 16 -> 64 tokens over the first 30% of training ...
```
"""

import keras

from keras_boost.algorithms.seq_length_warmup.schedule import scheduled_lengths
from keras_boost.algorithms.seq_length_warmup.schedule import sequence_length
from keras_boost.algorithms.seq_length_warmup.truncation import sequence_axis_length
from keras_boost.algorithms.seq_length_warmup.truncation import truncate_batch
from keras_boost.algorithms.step_part import StepPart

__all__ = ["SeqLengthWarmupStep"]


class SeqLengthWarmupStep(StepPart):
    """The step part of sequence-length warm-up (config section `seq_length_warmup`).

    Attributes (read them after `fit`): `full_length` (the data's sequence
    length; None before the first step, or when the batches hold no integer
    `(batch, length)` input), `lengths` (`(step, length)` each time a step
    ran at a new length), `traces` (train-function rebuilds it caused).
    """

    label = "sequence-length warm-up"
    # It only trades accuracy for time: a fit that computes a frozen prefix
    # once (prefix caching) trains on full sequences without it.
    optional = True

    def __init__(self, min_length=8, step_size=8, duration=0.3, total_steps="auto"):
        self.min_length, self.step_size, self.duration = min_length, step_size, duration
        self.total_steps = total_steps
        self.step = 0  # the step the next train-function call runs (host side)
        self.progress = 0.0  # its fraction of training
        self.full_length = None
        self.traced_length = None  # the length the current train function cuts to
        self.ran = False
        self.lengths, self.traces = [], 0

    def length_at(self, progress, full_length):
        return sequence_length(progress, full_length, self.min_length, self.step_size, self.duration)

    def prepare_batch(self, x, y, sample_weight):
        self.ran = True
        full = sequence_axis_length(x)
        self.full_length = full
        if full is None:
            return x, y, sample_weight
        length = self.length_at(self.progress, full)
        if length != self.traced_length:
            self.lengths.append((self.step, length))
        self.traced_length = length
        (x, y, sample_weight), _ = truncate_batch((x, y, sample_weight), length)
        return x, y, sample_weight

    def callbacks(self, model):
        return [_SeqLengthSchedule(self)]

    def summary(self, model):
        if not self.ran:
            return ""
        if self.full_length is None:
            return ("sequence-length warm-up found no integer (batch, length) input in the batches: "
                    "nothing truncated")
        lengths = scheduled_lengths(self.full_length, self.min_length, self.step_size, self.duration)
        if len(lengths) == 1:
            return (f"sequence-length warm-up: min_length {self.min_length} >= the data's "
                    f"{self.full_length} tokens, nothing truncated")
        return (f"sequence-length warm-up {lengths[0]} -> {self.full_length} tokens over the first "
                f"{self.duration:.0%} of training ({len(lengths)} lengths, {self.traces} train-function rebuilds)")


def _check_takes_shorter_sequences(model, min_length):
    """Raises before training when `model`'s token input has a fixed length
    above `min_length`: Keras would refuse the shorter batches."""
    for tensor in getattr(model, "inputs", None) or []:
        shape = tuple(tensor.shape)
        if len(shape) >= 2 and shape[1] is not None and min_length < shape[1] \
                and "int" in keras.backend.standardize_dtype(tensor.dtype):
            raise ValueError(
                f"Sequence-length warm-up cannot train model {model.name!r}: its input {tensor.name!r} has "
                f"the fixed shape {shape}, so batches cut to {min_length} tokens would be refused. Build "
                f"the model with a free length, keras.Input(shape=(None,), dtype=...{', ...' if len(shape) > 2 else ''}) "
                f"(keras-hub's backbones already are), or set seq_length_warmup.min_length >= {shape[1]} "
                "(nothing is then truncated)."
            )


class _SeqLengthSchedule(keras.callbacks.Callback):
    """Moves the part's progress each step; rebuilds the compiled train
    function when the scheduled length changes."""

    def __init__(self, part):
        super().__init__()
        self.part = part

    def on_train_begin(self, logs=None):
        part = self.part
        _check_takes_shorter_sequences(self.model, part.min_length)
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

    def on_train_end(self, logs=None):
        part = self.part
        if part.full_length is not None and part.traced_length != part.full_length:
            self.model.train_function = None  # traced at a shorter length
            part.traced_length = None

    def _move(self, progress):
        part = self.part
        part.progress, part.step = min(progress, 1.0), self._start + self._done
        if part.full_length is None or part.traced_length is None:
            return  # not traced yet: the first trace reads the progress
        if part.length_at(part.progress, part.full_length) != part.traced_length:
            self.model.make_train_function(force=True)
            part.traced_length = None
            part.traces += 1
