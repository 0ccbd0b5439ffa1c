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

Progress is counted as `keras_boost.algorithms.scheduled_step` says: over
this `fit` call with `total_steps="auto"`, else over `total_steps` counted
from the optimizer's `iterations` (a run split over `fit` calls warms up once).

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

from keras_boost.algorithms.scheduled_step import ScheduledStepPart
from keras_boost.algorithms.seq_length_warmup.schedule import scheduled_lengths
from keras_boost.algorithms.seq_length_warmup.schedule import sequence_length
from keras_boost.algorithms.seq_length_warmup.truncation import is_integer_tensor
from keras_boost.algorithms.seq_length_warmup.truncation import sequence_axis_length
from keras_boost.algorithms.seq_length_warmup.truncation import truncate_batch

__all__ = ["SeqLengthWarmupStep"]


class SeqLengthWarmupStep(ScheduledStepPart):
    """The step part of sequence-length warm-up (config section `seq_length_warmup`).

    Attributes (read them after `fit`): `full_length` (the data's sequence
    length; None before the first step, or when the batches hold no integer
    `(batch, length)` input), `lengths` (`(step, length)` each time a step
    ran at a new length), `rebuilds` (train-function rebuilds it caused).
    """

    label = "sequence-length warm-up"
    # It only trades accuracy for time: a fit that computes a frozen prefix
    # once (prefix caching) trains on full sequences without it.
    optional = True

    def __init__(self, min_length=8, step_size=8, duration=0.3, total_steps="auto"):
        super().__init__(total_steps)
        self.min_length, self.step_size, self.duration = min_length, step_size, duration
        self.full_length = None
        self.ran = False
        self.lengths = []

    def setting_at(self, progress):
        if self.full_length is None:
            return None
        return sequence_length(progress, self.full_length, self.min_length, self.step_size, self.duration)

    def prepare_batch(self, x, y, sample_weight, predict):
        self.ran = True
        self.full_length = sequence_axis_length(x)
        length = self.setting
        if length is None:
            return x, y, sample_weight
        if not self.lengths or self.lengths[-1][1] != length:
            self.lengths.append((self.step, length))
        self.traced()
        (x, y, sample_weight), _ = truncate_batch((x, y, sample_weight), length)
        return x, y, sample_weight

    def check_model(self, model):
        """Raises before training when `model`'s token input has a fixed
        length above `min_length`: Keras would refuse the shorter batches."""
        for tensor in getattr(model, "inputs", None) or []:
            shape = tuple(tensor.shape)
            if len(shape) >= 2 and shape[1] is not None and self.min_length < shape[1] and is_integer_tensor(tensor):
                raise ValueError(
                    f"Sequence-length warm-up cannot train model {model.name!r}: its input {tensor.name!r} "
                    f"has the fixed shape {shape}, so batches cut to {self.min_length} tokens would be "
                    "refused. Build the model with a free length, keras.Input(shape=(None,), dtype=...) "
                    f"(keras-hub's backbones already are), or set seq_length_warmup.min_length >= {shape[1]} "
                    "(nothing is then truncated)."
                )

    def summary(self, model):
        if not self.ran:
            return ""
        if self.full_length is None:
            return ("sequence-length warm-up found no integer (batch, length) input with a length "
                    "known when traced: nothing truncated")
        lengths = scheduled_lengths(self.full_length, self.min_length, self.step_size, self.duration)
        if len(lengths) == 1:
            return (f"sequence-length warm-up: min_length {self.min_length} >= the data's "
                    f"{self.full_length} tokens, nothing truncated")
        return (f"sequence-length warm-up {lengths[0]} -> {self.full_length} tokens over the first "
                f"{self.duration:.0%} of training ({len(lengths)} lengths, {self.rebuilds} train-function rebuilds)")
