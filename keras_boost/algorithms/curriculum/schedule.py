"""Schedule math of the loss-based curriculum: pure NumPy, no Keras.

The glue lives in `sampler.CurriculumSampler` and `sampler.CurriculumCallback`;
this module only answers "which examples, how likely, at fraction f of
training?", so it is tested on its own.

- `anneal_weight(f, anneal)`: how far the curriculum still is from uniform
  sampling: 1 at the start, linear down to 0 at `anneal`, then 0.
- `curriculum_probabilities(losses, weight, mode, pressure)`: per-example
  sampling probabilities, rank-based (Loshchilov & Hutter 2015: the most
  favoured example is `pressure` times as likely as the least favoured),
  mixed with uniform by `weight`.

Example:

```python

from keras_boost.algorithms.curriculum import anneal_weight, curriculum_probabilities

curriculum_probabilities([0.1, 2.0, 0.5], weight=anneal_weight(0.3, 0.6))
```
"""

import numpy as np

__all__ = ["MODES", "anneal_weight", "curriculum_probabilities"]

MODES = ("easy", "hard")


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
