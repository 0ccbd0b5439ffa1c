"""Gradient centralization math (MindSpore's `Centralization`), in `keras.ops`.

Keras layouts put the output channels on the last axis (Dense `(in, out)`,
Conv2D `(kh, kw, in, out)`), so a kernel gradient is centralized per output
channel by subtracting its mean over every other axis. MindSpore applies it
only when the input-channel axis (Keras axis -2) is a multiple of 16.
"""

from keras import ops

__all__ = ["centralize", "gc_applies", "GC_CHANNEL_MULTIPLE"]

# MindSpore's rule: only kernels whose input-channel count is a multiple of 16.
GC_CHANNEL_MULTIPLE = 16


def gc_applies(shape, channel_multiple=GC_CHANNEL_MULTIPLE):
    """Whether MindSpore's shape rule centralizes a kernel of this `shape`.

    True when the rank is at least 2 and the input-channel axis (-2 in Keras
    layouts) is divisible by `channel_multiple`. Pure shape logic; the
    per-variable rules (biases, norm parameters, depthwise kernels, the
    `NormalizedDense` head) live in `keras_boost.GradientCentralization`.

    Example:

    ```python
    gc_applies((3, 3, 32, 64))  # True
    gc_applies((3, 3, 3, 64))   # False: 3 input channels
    gc_applies((64,))           # False: a bias
    ```
    """
    shape = tuple(shape)
    if len(shape) < 2 or shape[-2] is None:
        return False
    return int(shape[-2]) % int(channel_multiple) == 0


def centralize(gradient):
    """`g - mean(g over every axis but the last)`; rank < 2 is returned as is.

    Computed in float32 and cast back to the gradient's dtype.

    Example:

    ```python
    g = np.arange(6.0).reshape(3, 2)     # (in=3, out=2)
    centralize(g)                        # [[-2, -2], [0, 0], [2, 2]]
    ```
    """
    if gradient is None or len(gradient.shape) < 2:
        return gradient
    dtype = gradient.dtype
    g = ops.cast(gradient, "float32")
    axes = tuple(range(len(gradient.shape) - 1))
    g = g - ops.mean(g, axis=axes, keepdims=True)
    return ops.cast(g, dtype)
