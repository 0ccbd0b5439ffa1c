"""Dynamic loss-scale math, written once in `keras.ops` (pure functions)."""

from keras import ops

__all__ = [
    "all_finite",
    "group_all_finite",
    "GROUP_GROWTH",
    "GROUP_SHRINK",
    "scale_gradient",
    "unscale",
    "unscale_by_group",
    "update_group_scales",
    "update_loss_scale",
]


def all_finite(grads):
    """A boolean scalar: every gradient in `grads` is finite (None skipped)."""
    flags = [ops.all(ops.isfinite(g)) for g in grads if g is not None]
    if not flags:
        return ops.convert_to_tensor(True)
    return ops.all(ops.stack(flags))


def unscale(grads, scale):
    """Divides each gradient by `scale` in float32 and casts back."""
    inv = ops.divide(1.0, ops.cast(scale, "float32"))
    return [
        None if g is None else ops.cast(ops.multiply(ops.cast(g, "float32"), inv), g.dtype)
        for g in grads
    ]


def update_loss_scale(scale, good_steps, finite, factor, window, min_scale):
    """One step of dynamic loss scaling; returns `(new_scale, new_good_steps)`.

    - finite step: `good_steps + 1`; once it reaches `window` the scale is
      multiplied by `factor` and the count restarts at 0;
    - overflow: the scale is divided by `factor`, never below `min_scale`,
      and the count restarts at 0.

    Example (NumPy semantics):

    ```python
    update_loss_scale(8.0, 1, True, 2.0, 2, 1.0)   # -> (16.0, 0)
    update_loss_scale(8.0, 1, False, 2.0, 2, 1.0)  # -> (4.0, 0)
    ```
    """
    scale = ops.cast(scale, "float32")
    good_steps = ops.cast(good_steps, "int32")
    counted = good_steps + 1
    grow = ops.greater_equal(counted, window)
    scale_if_finite = ops.where(grow, scale * factor, scale)
    steps_if_finite = ops.where(grow, ops.zeros_like(counted), counted)
    scale_if_overflow = ops.maximum(scale / factor, min_scale)
    new_scale = ops.where(finite, scale_if_finite, scale_if_overflow)
    new_steps = ops.where(finite, steps_if_finite, ops.zeros_like(counted))
    return new_scale, new_steps


# --- per-group loss scaling (MindSpore's GroupLossScaleManager) ---------------

# MindSpore's per-step factors: shrink by 2**-0.5 on overflow, else grow by 2**(1/1000).
GROUP_SHRINK = 2.0 ** -0.5
GROUP_GROWTH = 2.0 ** (1.0 / 1000.0)


def scale_gradient(x, ratio):
    """Identity forward; the backward pass multiplies the gradient by `ratio`.

    `stop_gradient(x) + (x - stop_gradient(x)) * ratio`: the second term is
    exactly 0 forward (for a finite ratio), and its derivative is `ratio`.
    Computed in float32 (a float16 ratio of 2**16 would overflow), cast
    back to `x`'s dtype, so a float16 gradient that overflows becomes inf
    and is caught by the per-group finite check.

    Example:

    ```python
    y = scale_gradient(x, 8.0)   # y == x; dL/dx = 8 * dL/dy
    ```
    """
    x32 = ops.cast(x, "float32")
    frozen = ops.stop_gradient(x32)
    return ops.cast(frozen + (x32 - frozen) * ops.cast(ratio, "float32"), x.dtype)


def update_group_scales(scales, group_finite, min_scale=1.0):
    """One step of the per-group scales `S[0..n+1]` (S[0] = S[n+1] = 1 stay).

    Group `g` (scale `S[g+1]`) shrinks by `GROUP_SHRINK` when its gradients
    overflowed, else grows by `GROUP_GROWTH`, every step (MindSpore's rule),
    never below `min_scale`.

    Example (NumPy semantics):

    ```python
    update_group_scales([1, 1024, 1024, 1], [True, False])
    # -> [1, 1024 * 2**(1/1000), 1024 / 2**0.5, 1]
    ```
    """
    scales = ops.cast(ops.convert_to_tensor(scales), "float32")
    finite = ops.convert_to_tensor(group_finite)
    inner = ops.where(finite, scales[1:-1] * GROUP_GROWTH, scales[1:-1] * GROUP_SHRINK)
    inner = ops.maximum(inner, min_scale)
    one = ops.ones((1,), "float32")
    return ops.concatenate([one, inner, one])


def unscale_by_group(grads, scales, group_of):
    """Divides gradient `i` by the scale of its group, `scales[group_of[i] + 1]`.

    Example:

    ```python
    unscale_by_group([g0, g1], [1.0, 4.0, 16.0, 1.0], [0, 1])   # [g0 / 4, g1 / 16]
    ```
    """
    return [
        None if g is None else unscale([g], scales[group + 1])[0]
        for g, group in zip(grads, group_of)
    ]


def group_all_finite(grads, group_of, num_groups):
    """A boolean vector: per group, whether all of its gradients are finite.

    Example:

    ```python
    group_all_finite([g0, g1, g2], [0, 0, 1], 2)   # [all finite in g0, g1; in g2]
    ```
    """
    return ops.stack([
        all_finite([g for g, group in zip(grads, group_of) if group == k]) for k in range(num_groups)
    ])
