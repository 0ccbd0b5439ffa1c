"""Gradient-freezing schedules (MindSpore's GradientFreeze), pure NumPy.

A schedule is a list of group indices, one per training step: index 0 trains
every variable, index k trains only the suffix group k (the first k blocks
are frozen). `freeze_p` is the long-run fraction of FULL steps, as in
MindSpore (not the probability of freezing).
"""

import math

import numpy as np

__all__ = [
    "CONTINUOUS",
    "depth_probabilities",
    "generate_freeze_index_sequence",
    "INTERVAL",
    "suffix_groups",
]

CONTINUOUS = 0  # "00001234": zero_cnt full steps, then depths 1..n-1, repeated
INTERVAL = 1  # "01020304": full and frozen steps interleaved, random depths


def _check(n, strategy, p, total_steps):
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"parameter_groups_number must be an int >= 1, got {n!r}.")
    if strategy not in (CONTINUOUS, INTERVAL) or isinstance(strategy, bool):
        raise ValueError(
            f"freeze_strategy must be 0 (continuous) or 1 (interval), got {strategy!r}."
        )
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 < p < 1:
        raise ValueError(f"freeze_p must be a number in (0, 1), got {p!r}.")
    if isinstance(total_steps, bool) or not isinstance(total_steps, int) or total_steps < 1:
        raise ValueError(f"total_steps must be an int >= 1, got {total_steps!r}.")


def depth_probabilities(n):
    """P(k) for k in 1..n-1, proportional to n - k (shallow freezing likelier)."""
    k = np.arange(1, n)
    return (n - k) / (n * (n - 1) / 2)


def generate_freeze_index_sequence(
    parameter_groups_number, freeze_strategy, freeze_p, total_steps, rng=None
):
    """MindSpore's freeze schedule: a list of ints of length >= int(1.01 * total_steps).

    Args:
        parameter_groups_number: n, the number of suffix groups.
        freeze_strategy: 0 (continuous) or 1 (interval).
        freeze_p: fraction of full steps, in (0, 1).
        total_steps: steps the schedule must cover.
        rng: a `numpy.random.Generator` for strategy 1's depths (never
            NumPy's global RNG); `None` means a fresh unseeded one.

    Example:

    ```python
    generate_freeze_index_sequence(4, 0, 0.5, 10)
    # [0, 0, 0, 1, 2, 3, 0, 0, 0, 1, 2, 3]  (zero_cnt = floor(0.5*3/0.5) = 3)
    ```
    """
    n, strategy, p = parameter_groups_number, freeze_strategy, freeze_p
    _check(n, strategy, p, total_steps)
    length = int(total_steps * 1.01)
    if n <= 1:
        return [0] * length
    if strategy == CONTINUOUS:
        zero_cnt = int(math.floor(p * (n - 1) / (1 - p)))
        unit = [0] * zero_cnt + list(range(1, n))
        return unit * math.ceil(length / len(unit))
    rng = rng if rng is not None else np.random.default_rng()
    # Depths are drawn in one batch (as many as could be needed) for speed;
    # the 0/non-0 interleaving is deterministic, as in MindSpore.
    depths = iter(rng.choice(np.arange(1, n), size=length, p=depth_probabilities(n)).tolist())
    sequence, zeros, frozen = [0], 1, 0
    while len(sequence) < length:
        if frozen / (zeros + frozen) < 1 - p:
            sequence.append(next(depths))
            frozen += 1
        else:
            sequence.append(0)
            zeros += 1
    return sequence


def suffix_groups(blocks, n):
    """Group i = all blocks from i * stride to the end (stride = len(blocks) // n).

    With fewer blocks than groups the stride is 0 and every group is the
    whole list (MindSpore's behaviour): callers must warn about it.
    """
    stride = len(blocks) // n
    return [[item for block in blocks[i * stride :] for item in block] for i in range(n)]
