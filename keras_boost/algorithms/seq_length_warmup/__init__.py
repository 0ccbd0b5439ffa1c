"""Sequence-length warm-up (Li et al. 2022; Composer's SeqLengthWarmup) in `BoostModel`.

`BoostModel`'s train step cuts each batch of token sequences to a
scheduled length (`sequence_length`: `min_length` growing by `step_size`
to the full length over the first `duration` of training), before the
forward pass (`truncate_batch`: inputs, next-token targets, padding masks
and per-token weights alike). Switched on by the config flag
`boost.seq_length_warmup` (off at every level), tuned by the section
`seq_length_warmup` (`min_length`, `step_size`, `duration`, `total_steps`).

Example:

```python
model = boost.BoostModel.from_model(gpt, boost_config_dict={
    "boost": {"mode": "manual", "seq_length_warmup": True}})
```

The method card: `docs/methods/seq_length_warmup.md`.
"""

from keras_boost.algorithms.seq_length_warmup.schedule import scheduled_lengths
from keras_boost.algorithms.seq_length_warmup.schedule import sequence_length
from keras_boost.algorithms.seq_length_warmup.step import SeqLengthWarmupStep
from keras_boost.algorithms.seq_length_warmup.truncation import sequence_axis_length
from keras_boost.algorithms.seq_length_warmup.truncation import truncate_batch

__all__ = ["SeqLengthWarmupStep", "scheduled_lengths", "sequence_axis_length", "sequence_length",
           "truncate_batch"]
