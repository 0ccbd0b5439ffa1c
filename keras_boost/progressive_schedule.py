"""Schedule math of progressive learning: pure Python/NumPy, no Keras.

The glue lives in `keras_boost.callbacks.ProgressiveResizing` (with the
`keras_boost.layers.ProgressiveResize` layer) and
`keras_boost.callbacks.CurriculumSampler`; this module only answers "what
at fraction f of training?", so it is tested on its own.

- `resize_scale(f, ...)`: the image scale at fraction `f` of training:
  `initial_scale` until `start_fraction`, then linear up to 1 at
  `finish_fraction`, then 1 (Composer's ProgressiveResizing schedule).
- `scheduled_size(full, scale, size_increment)`: the side length in pixels,
  rounded to the nearest multiple of `size_increment` (so that only a few
  distinct sizes, hence a few traces of the train function, occur).
- `anneal_weight(f, anneal)`: how far the curriculum still is from uniform
  sampling: 1 at the start, linear down to 0 at `anneal`, then 0.
- `curriculum_probabilities(losses, weight, mode, pressure)`: per-example
  sampling probabilities, rank-based (Loshchilov & Hutter 2015: the most
  favoured example is `pressure` times as likely as the least favoured),
  mixed with uniform by `weight`.

Example:

```python
from keras_boost.progressive_schedule import resize_scale, scheduled_size

scale = resize_scale(0.3, initial_scale=0.5, finish_fraction=0.6)  # 0.75
scheduled_size(28, scale, size_increment=4)                        # 20
```
"""

import math

import numpy as np

MODES = ("easy", "hard")


def check_scale(initial_scale):
    """Validates `initial_scale`: a number in (0, 1]; returns it as a float.

    Example:

    ```python
    check_scale(0.5)  # 0.5
    check_scale(1.5)  # ValueError: initial_scale must be a number in (0, 1] ...
    ```
    """
    try:
        scale = float(initial_scale)
    except (TypeError, ValueError):
        scale = float("nan")
    if isinstance(initial_scale, bool) or not 0.0 < scale <= 1.0:
        raise ValueError(
            f"initial_scale must be a number in (0, 1] (the fraction of the full image size "
            f"to start from, e.g. 0.5), got {initial_scale!r}."
        )
    return scale


def resize_scale(fraction, initial_scale=0.5, finish_fraction=0.6, start_fraction=0.0):
    """The image scale at `fraction` of training.

    Args:
        fraction: progress through training, in [0, 1] (clipped).
        initial_scale: scale in (0, 1] used until `start_fraction`.
        finish_fraction: fraction at which the scale reaches 1.
        start_fraction: fraction at which the scale starts to grow
            (must be below `finish_fraction`).

    Returns:
        The scale, a float in [initial_scale, 1].

    Example:

    ```python
    resize_scale(0.0)  # 0.5
    resize_scale(0.3)  # 0.75
    resize_scale(0.6)  # 1.0
    ```
    """
    f = min(max(float(fraction), 0.0), 1.0)
    if f <= start_fraction:
        return float(initial_scale)
    if f >= finish_fraction:
        return 1.0
    progress = (f - start_fraction) / (finish_fraction - start_fraction)
    return float(initial_scale + (1.0 - initial_scale) * progress)


def scheduled_size(full_size, scale, size_increment=4):
    """The side length at `scale` of `full_size`, a multiple of `size_increment`.

    Rounded to the nearest multiple of `size_increment` (halves up), at
    least `size_increment` and at most `full_size`; `full_size` itself at
    scale 1 even when it is not a multiple.

    Example:

    ```python
    scheduled_size(28, 0.5)   # 16 (14 rounds up to 16)
    scheduled_size(28, 0.75)  # 20 (21 -> 20)
    scheduled_size(28, 1.0)   # 28
    ```
    """
    full_size, size_increment = int(full_size), int(size_increment)
    if scale >= 1.0:
        return full_size
    size = int(math.floor(full_size * float(scale) / size_increment + 0.5)) * size_increment
    return int(min(max(size, min(size_increment, full_size)), full_size))


def anneal_weight(fraction, anneal=0.6):
    """Weight of the curriculum (vs uniform sampling) at `fraction` of training.

    1 at the start, linear down to 0 at `anneal`, 0 afterwards.

    Example:

    ```python
    anneal_weight(0.0, 0.6), anneal_weight(0.3, 0.6), anneal_weight(0.9, 0.6)  # 1.0, 0.5, 0.0
    ```
    """
    f = min(max(float(fraction), 0.0), 1.0)
    return float(max(0.0, 1.0 - f / float(anneal)))


def curriculum_probabilities(losses, weight, mode="easy", pressure=10.0):
    """Per-example sampling probabilities for a loss-based curriculum.

    Examples are ranked by loss; with `mode="easy"` (curriculum learning,
    Bengio et al. 2009) the lowest loss is favoured, with `mode="hard"`
    (online batch selection) the highest. Rank `r` (0 = most favoured) of
    `n` gets `pressure ** (-r / (n - 1))`, normalized; the result is then
    `weight * that + (1 - weight) / n`: uniform at `weight=0`.

    Args:
        losses: 1-D array of per-example losses (or difficulty scores).
        weight: in [0, 1], see `anneal_weight`.
        mode: `"easy"` or `"hard"`.
        pressure: ratio of the largest to the smallest probability at
            `weight=1`; >= 1.

    Returns:
        A float64 array of probabilities summing to 1.

    Example:

    ```python
    curriculum_probabilities([0.1, 2.0, 0.5], weight=1.0, pressure=4.0)
    # array([0.571, 0.143, 0.286]): easiest first
    ```
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}.")
    losses = np.asarray(losses, dtype=np.float64).reshape(-1)
    n = losses.size
    if n == 0:
        raise ValueError("curriculum_probabilities needs at least one loss.")
    uniform = np.full(n, 1.0 / n)
    if weight <= 0.0 or n == 1:
        return uniform
    keys = losses if mode == "easy" else -losses
    order = np.argsort(keys, kind="stable")
    ranks = np.empty(n, dtype=np.float64)
    ranks[order] = np.arange(n)
    # Tied losses share their average rank: no bias by example index (all
    # losses equal, e.g. before the first scoring, gives the uniform draw).
    _, inverse = np.unique(keys, return_inverse=True)
    ranks = (np.bincount(inverse, weights=ranks) / np.bincount(inverse))[inverse]
    ranked = float(pressure) ** (-ranks / (n - 1))
    ranked /= ranked.sum()
    probabilities = float(weight) * ranked + (1.0 - float(weight)) * uniform
    return probabilities / probabilities.sum()
