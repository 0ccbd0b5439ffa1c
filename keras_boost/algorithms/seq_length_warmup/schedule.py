"""Schedule math of sequence-length warm-up: pure Python, no Keras.

`sequence_length(fraction, full_length, ...)` answers "how many tokens per
sequence at fraction `fraction` of training?": `min_length` at the start,
growing by `step_size` tokens in equal slices of the warm-up (the first
`duration` of training), the full length from then on. Lengths are
multiples of `step_size` (plus the full length), so a run sees only a few
of them, one trace of the train function each.

Example:

```python
from keras_boost.algorithms.seq_length_warmup import sequence_length

sequence_length(0.0, 64, min_length=16, step_size=16, duration=0.3)   # 16
sequence_length(0.15, 64, min_length=16, step_size=16, duration=0.3)  # 32
sequence_length(0.3, 64, min_length=16, step_size=16, duration=0.3)   # 64
```
"""

import math

__all__ = ["scheduled_lengths", "sequence_length"]


def sequence_length(fraction, full_length, min_length=8, step_size=8, duration=0.3):
    """The sequence length at `fraction` of training.

    With `k = ceil((full_length - min_length) / step_size)` increments, the
    warm-up `[0, duration)` is cut into `k` equal slices; slice `i` trains
    at `min_length + i * step_size` tokens (capped at `full_length`), and
    from `duration` on every step sees `full_length` (Composer's
    SeqLengthWarmup schedule, Li et al. 2022).

    Args:
        fraction: progress through training, clipped to [0, 1].
        full_length: the data's sequence length (an int >= 1).
        min_length: the first length (>= 1); at or above `full_length`,
            nothing is ever truncated.
        step_size: tokens added per increment (>= 1).
        duration: the warm-up's share of training, in (0, 1].

    Returns:
        An int in [min(min_length, full_length), full_length].
    """
    full_length, min_length, step_size = int(full_length), int(min_length), int(step_size)
    if min_length >= full_length:
        return full_length
    f = min(max(float(fraction), 0.0), 1.0)
    if f >= duration:
        return full_length
    increments = math.ceil((full_length - min_length) / step_size)
    slice_index = math.floor(f / duration * increments)
    return min(min_length + slice_index * step_size, full_length)


def scheduled_lengths(full_length, min_length=8, step_size=8, duration=0.3):
    """Every length `sequence_length` gives over a run, shortest first.

    Example:

    ```python
    scheduled_lengths(64, min_length=16, step_size=16)  # [16, 32, 48, 64]
    scheduled_lengths(60, min_length=16, step_size=16)  # [16, 32, 48, 60]
    ```
    """
    full_length, min_length, step_size = int(full_length), int(min_length), int(step_size)
    if min_length >= full_length:
        return [full_length]
    return list(range(min_length, full_length, step_size)) + [full_length]
