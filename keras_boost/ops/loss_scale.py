"""Dynamic loss-scale math, written once in `keras.ops` (pure functions)."""

from keras import ops


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
