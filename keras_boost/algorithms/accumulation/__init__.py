"""Gradient accumulation: k micro-batches, one update (MindSpore's `GradientAccumulation`).

`GradientAccumulation` sums the gradients of `max_accumulation_step`
micro-steps and applies their mean once, so a small batch trains like a k
times bigger one; `FlushGradientAccumulation` applies a partial window at
the end of an epoch. With `measure_gradient_norms=True` each window also
yields the two squared gradient norms (`squared_global_norm`,
`window_gradient_norms`) that `keras_boost.algorithms.batch_size` turns into
the gradient noise scale.

Example:

```python
optimizer = boost.optimizers.GradientAccumulation(keras.optimizers.SGD(0.1), max_accumulation_step=4)
model.compile(optimizer=optimizer, loss="mse")
```

The method card: `docs/methods/grad_accumulation.md`.
"""

from keras_boost.algorithms.accumulation.gradient_norms import squared_global_norm
from keras_boost.algorithms.accumulation.gradient_norms import window_gradient_norms
from keras_boost.algorithms.accumulation.optimizer import FlushGradientAccumulation
from keras_boost.algorithms.accumulation.optimizer import GradientAccumulation
from keras_boost.algorithms.accumulation.optimizer import find_gradient_accumulation

__all__ = [
    "FlushGradientAccumulation",
    "GradientAccumulation",
    "find_gradient_accumulation",
    "squared_global_norm",
    "window_gradient_norms",
]
