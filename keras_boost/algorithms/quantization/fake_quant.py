"""Fake quantization in `keras.ops`, with Keras' own int8 abs-max scheme.

`model.quantize("int8")` (keras/src/quantizers/quantizers.py
`abs_max_quantize`, used by `Dense.quantize` with `axis=0` for the kernel and
`axis=-1` for the inputs) computes `scale = 127 / (max|x| over axis + eps)`,
`q = clip(round(x * scale), -127, 127)` and dequantizes as `q / scale`.
`fake_quantize` returns exactly that dequantized value in the forward pass
and passes the gradient straight through (`x + stop_gradient(dq - x)`).

Example:

```python

from keras_boost.algorithms.quantization.fake_quant import fake_quantize
w_q = fake_quantize(dense.kernel, axis=0)   # what Dense int8 will compute with
```
"""

import keras
from keras import ops

__all__ = ["abs_max_dequantized", "fake_quantize"]


def abs_max_dequantized(x, axis, value_range=(-127, 127), epsilon=None):
    """`x` rounded to Keras' symmetric abs-max int8 grid along `axis`, back in float.

    Example:

    ```python
    abs_max_dequantized(kernel, axis=0)   # = q / scale of keras.quantizers.abs_max_quantize(kernel, 0)
    ```
    """
    epsilon = keras.backend.epsilon() if epsilon is None else epsilon
    x = ops.convert_to_tensor(x)
    scale = ops.divide(value_range[1], ops.add(ops.max(ops.abs(x), axis=axis, keepdims=True), epsilon))
    scale = ops.cast(scale, x.dtype)
    q = ops.clip(ops.round(ops.multiply(x, scale)), value_range[0], value_range[1])
    return ops.divide(q, scale)


def fake_quantize(x, axis, value_range=(-127, 127), epsilon=None):
    """Straight-through fake quantization: forward `abs_max_dequantized`, gradient identity.

    Example:

    ```python
    fake_quantize(keras.ops.convert_to_tensor([[0.5, -1.0]]), axis=-1)  # [[0.5039, -1.0]]
    ```
    """
    x = ops.convert_to_tensor(x)
    return ops.add(x, ops.stop_gradient(ops.subtract(abs_max_dequantized(x, axis, value_range, epsilon), x)))
