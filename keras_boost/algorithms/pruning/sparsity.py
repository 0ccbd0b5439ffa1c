"""Pruning math in `keras.ops`: the polynomial sparsity schedule and magnitude masks.

Zhu & Gupta, "To prune, or not to prune" (2017), eq. (1): from step `t0`
the sparsity rises from `s_i` to `s_f` over `n` pruning steps of `dt`
steps each,

    s_t = s_f + (s_i - s_f) * (1 - (t - t0) / (n * dt)) ** 3,

and stays at `s_f` afterwards. A magnitude mask keeps the
`size - round(s * size)` largest-magnitude weights of a tensor.

Example:

```python

from keras_boost.algorithms.pruning import sparsity
sparsity.polynomial_sparsity(50, 0.0, 0.8, begin_step=0, end_step=100)  # 0.7
mask = sparsity.magnitude_mask(kernel, 0.5)   # 0/1, exactly half zeros
```
"""

from keras import ops

__all__ = ["magnitude_mask", "polynomial_sparsity", "pruned_count", "real_sparsity"]


def polynomial_sparsity(step, initial_sparsity, final_sparsity, begin_step, end_step, power=3):
    """The sparsity at `step` of Zhu & Gupta's polynomial schedule.

    `initial_sparsity` before `begin_step`, `final_sparsity` from `end_step`
    on, and `s_f + (s_i - s_f) * (1 - (t - t0) / (end - t0)) ** power` in
    between (`end_step - begin_step` is the paper's `n * dt`).

    Args:
        step: the training step (a number or a scalar tensor).
        initial_sparsity, final_sparsity: fractions in [0, 1].
        begin_step, end_step: first step of the ramp and the step where it
            reaches `final_sparsity` (`end_step > begin_step`).
        power: the exponent (3 in the paper).

    Returns:
        A float32 scalar tensor.

    Example:

    ```python
    polynomial_sparsity(0, 0.0, 0.5, 0, 10)   # 0.0
    polynomial_sparsity(10, 0.0, 0.5, 0, 10)  # 0.5
    ```
    """
    step = ops.cast(step, "float32")
    span = float(max(end_step - begin_step, 1))
    progress = ops.clip((step - float(begin_step)) / span, 0.0, 1.0)
    return final_sparsity + (initial_sparsity - final_sparsity) * ops.power(1.0 - progress, power)


def pruned_count(size, sparsity):
    """How many of `size` weights a sparsity prunes: `round(sparsity * size)`.

    Example:

    ```python
    pruned_count(10, 0.25)   # 2 (int32 tensor; round half to even)
    ```
    """
    return ops.cast(ops.round(ops.cast(sparsity, "float32") * float(size)), "int32")


def magnitude_mask(weights, sparsity):
    """A 0/1 mask (dtype of `weights`) zeroing the `round(sparsity * size)` smallest |w|.

    Ranks are exact (ties broken by position), so the mask has exactly that
    many zeros; weights that are already zero rank first, so masks grow
    monotonically as the sparsity rises.

    Example:

    ```python
    magnitude_mask(keras.ops.convert_to_tensor([[0.1, -3.0], [2.0, 0.5]]), 0.5)
    # [[0., 1.], [1., 0.]]
    ```
    """
    weights = ops.convert_to_tensor(weights)
    flat = ops.reshape(ops.abs(ops.cast(weights, "float32")), (-1,))
    size = int(flat.shape[0])
    ranks = ops.argsort(ops.argsort(flat))
    keep = ops.greater_equal(ops.cast(ranks, "int32"), pruned_count(size, sparsity))
    return ops.reshape(ops.cast(keep, weights.dtype), weights.shape)


def real_sparsity(weights):
    """The fraction of exact zeros in `weights` (a Python float).

    Example:

    ```python
    real_sparsity([[0.0, 1.0], [0.0, 2.0]])   # 0.5
    ```
    """
    weights = ops.convert_to_tensor(weights)
    size = 1
    for d in weights.shape:
        size *= int(d)
    zeros = ops.sum(ops.cast(ops.equal(weights, 0), "int32"))
    return float(ops.convert_to_numpy(zeros)) / max(size, 1)
