"""The math of orthogonalized (Muon-style) updates, in `keras.ops`.

A kernel of any rank is viewed as one (fan-in x fan-out) matrix by a split
index: axes before `split` are the fan-in, the rest the fan-out (a Dense
kernel `(in, out)` has split 1; Keras' MultiHeadAttention query/key/value
kernels `(hidden, heads, head_dim)` split 1 and its output kernel `(heads,
head_dim, hidden)` split 2; a Conv2D kernel `(kh, kw, in, out)` split 3).

The Newton-Schulz iteration is Keras' own
(`keras.optimizers.Muon.zeropower_via_newtonschulz5`), called with the
coefficients given here, so there is one copy of it.
"""

import math

import keras
from keras import ops

__all__ = [
    "NS_COEFFICIENTS",
    "matrix_shape",
    "momentum_direction",
    "orthogonal_update",
    "orthogonalize",
    "update_scale",
]

# Jordan et al.'s quintic coefficients (a, b, c), Keras Muon's defaults.
NS_COEFFICIENTS = (3.4445, -4.7750, 2.0315)


class _Coefficients:
    """What `Muon.zeropower_via_newtonschulz5` reads from its `self`: the
    coefficients and `transpose_last_axis`; no optimizer (and no variable)
    is created."""

    def __init__(self, coefficients):
        self.muon_a, self.muon_b, self.muon_c = (float(c) for c in coefficients)

    @staticmethod
    def transpose_last_axis(x):
        return keras.optimizers.Muon.transpose_last_axis(None, x)


def matrix_shape(shape, split):
    """`(fan_in, fan_out)`: the product of `shape[:split]` and of `shape[split:]`.

    Example:

    ```python
    matrix_shape((64, 4, 16), 1)   # (64, 64): a query kernel
    matrix_shape((4, 16, 64), 2)   # (64, 64): an attention output kernel
    ```
    """
    shape = tuple(int(d) for d in shape)
    if not 0 < split < len(shape):
        raise ValueError(f"split must be in [1, {len(shape) - 1}] for shape {shape}, got {split}.")
    return math.prod(shape[:split]), math.prod(shape[split:])


def orthogonalize(matrix, steps=5, coefficients=NS_COEFFICIENTS):
    """About `U S' V^T` (S' in [0.5, 1.5]) of `matrix = U S V^T`: `steps`
    quintic Newton-Schulz iterations after a Frobenius normalization
    (Keras' `Muon.zeropower_via_newtonschulz5`), in the matrix's dtype.

    Example:

    ```python
    o = orthogonalize(np.random.randn(64, 256).astype("float32"))
    # the singular values of o are all about 1
    ```
    """
    return keras.optimizers.Muon.zeropower_via_newtonschulz5(
        _Coefficients(coefficients), matrix, int(steps)
    )


def momentum_direction(buffer, gradient, momentum, nesterov):
    """`(new_buffer, direction)`: `B <- momentum * B + g`; the direction is
    `g + momentum * B` with Nesterov, else `B` (Keras Muon's update)."""
    buffer = buffer * momentum + gradient
    direction = gradient + buffer * momentum if nesterov else buffer
    return buffer, direction


def update_scale(fan_in, fan_out, rule, rms_rate=0.2, sgd_ratio=1.0):
    """The Python factor of the `"adam"` rule (`rms_rate * sqrt(max(fan_in,
    fan_out))`, Moonlight's), or `sgd_ratio` for the `"norm"` rule (which
    also multiplies by the direction's Frobenius norm, see
    `orthogonal_update`).

    Example:

    ```python
    update_scale(256, 1024, "adam")   # 0.2 * 32 = 6.4
    ```
    """
    if rule == "adam":
        return float(rms_rate) * math.sqrt(max(fan_in, fan_out))
    if rule == "norm":
        return float(sgd_ratio)
    raise ValueError(f"rule must be 'adam' or 'norm', got {rule!r}.")


def orthogonal_update(direction, split, steps=5, coefficients=NS_COEFFICIENTS, rule="adam",
                      rms_rate=0.2, sgd_ratio=1.0):
    """The update (before the learning rate) for a kernel's momentum
    direction, in the kernel's shape.

    The direction is viewed as a `(fan_in, fan_out)` matrix (`split`),
    orthogonalized (`orthogonalize`) and scaled:

    - `"adam"`: by `rms_rate * sqrt(max(fan_in, fan_out))`, so the update's
      RMS is about `rms_rate` (0.2 is AdamW's typical update RMS; Moonlight);
    - `"norm"`: to the direction's own Frobenius norm times `sgd_ratio`
      (the step of SGD on the same buffer, with its singular values evened
      out).

    Example:

    ```python
    u = orthogonal_update(np.random.randn(64, 4, 16).astype("float32"), split=1)
    # u.shape == (64, 4, 16); RMS about 0.2
    ```
    """
    shape = tuple(direction.shape)
    fan_in, fan_out = matrix_shape(shape, split)
    matrix = ops.reshape(direction, (fan_in, fan_out))
    update = orthogonalize(matrix, steps, coefficients)
    scale = update_scale(fan_in, fan_out, rule, rms_rate, sgd_ratio)
    if rule == "norm":
        ratio = ops.norm(matrix) / (ops.norm(update) + 1e-7)
        update = update * ops.cast(ratio, update.dtype)
    return ops.reshape(update * scale, shape)
