"""Cautious masking math (Liang et al. 2024, C-AdamW), in `keras.ops`.

`update` is the step an optimizer subtracts (`theta <- theta - update`, the
paper's `lr * u`) and `gradient` the current gradient. A coordinate is kept
when the step moves against the gradient (`update * gradient > 0`, a descent
direction coordinate by coordinate); the kept ones are scaled up per tensor
by `1 / max(mean(kept), MIN_KEPT_FRACTION)` so that the mean step keeps its
size (C-AdamW's and timm's rescaling).
"""

from keras import ops
from keras.backend import standardize_dtype

__all__ = ["MIN_KEPT_FRACTION", "cautious_mask", "cautious_update", "kept_coordinates", "rescale_kept"]

# The floor of the kept fraction in the rescaling (C-AdamW and timm: 1e-3).
MIN_KEPT_FRACTION = 1e-3


def _cast(x, dtype):
    """`ops.cast`, skipped where `x` has that dtype already (eager torch pays
    for every op)."""
    if not ops.is_tensor(x):
        x = ops.convert_to_tensor(x)
    return x if standardize_dtype(x.dtype) == dtype else ops.cast(x, dtype)


def kept_coordinates(update, gradient):
    """`1[update * gradient > 0]` in float32: the coordinates caution keeps.

    A zero gradient or a zero update keeps nothing (the product is 0).

    Example:

    ```python
    kept_coordinates(np.array([0.1, -0.2, 0.3]), np.array([1.0, 1.0, 0.0]))   # [1, 0, 0]
    ```
    """
    product = _cast(update, "float32") * _cast(gradient, "float32")
    return ops.cast(product > 0.0, "float32")


def rescale_kept(kept, min_kept_fraction=MIN_KEPT_FRACTION):
    """`kept / max(mean(kept), min_kept_fraction)`: a 0/1 mask (float32)
    scaled per tensor so that it keeps the mean step's size.

    Example:

    ```python
    rescale_kept(np.array([1.0, 0.0, 1.0, 1.0]))   # [4/3, 0, 4/3, 4/3]
    ```
    """
    kept = _cast(kept, "float32")
    return kept * (1.0 / ops.maximum(ops.mean(kept), min_kept_fraction))


def cautious_mask(update, gradient, min_kept_fraction=MIN_KEPT_FRACTION):
    """The rescaled mask `phi / max(mean(phi), min_kept_fraction)`, float32,
    with `phi = kept_coordinates(update, gradient)`.

    Example:

    ```python
    cautious_mask(np.array([0.1, -0.2, 0.3, 0.4]), np.ones(4))   # [4/3, 0, 4/3, 4/3]
    ```
    """
    return rescale_kept(kept_coordinates(update, gradient), min_kept_fraction)


def cautious_update(update, gradient, min_kept_fraction=MIN_KEPT_FRACTION, return_kept_fraction=False):
    """`update * cautious_mask(update, gradient)`: the cautious step to
    subtract, in `update`'s dtype; with `return_kept_fraction`, also
    `mean(kept_coordinates(update, gradient))` (a float32 scalar).

    Example:

    ```python
    cautious_update(np.array([0.1, -0.2]), np.array([1.0, 1.0]))   # [0.2, 0.0]
    ```
    """
    if not ops.is_tensor(update):
        update = ops.convert_to_tensor(update)
    kept = kept_coordinates(update, gradient)
    fraction = ops.mean(kept)
    scale = 1.0 / ops.maximum(fraction, min_kept_fraction)
    masked = _cast(_cast(update, "float32") * kept * scale, standardize_dtype(update.dtype))
    return (masked, fraction) if return_kept_fraction else masked
