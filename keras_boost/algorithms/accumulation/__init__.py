"""Gradient accumulation: k micro-batches, one update (MindSpore's `GradientAccumulation`).

`GradientAccumulation` sums the gradients of `max_accumulation_step`
micro-steps and applies their mean once, so a small batch trains like a k
times bigger one; `FlushGradientAccumulation` applies a partial window at
the end of an epoch.

Example:

```python
optimizer = boost.optimizers.GradientAccumulation(keras.optimizers.SGD(0.1), max_accumulation_step=4)
model.compile(optimizer=optimizer, loss="mse")
```

The method card: `docs/methods/grad_accumulation.md`.
"""

from keras_boost.algorithms.accumulation.optimizer import FlushGradientAccumulation
from keras_boost.algorithms.accumulation.optimizer import GradientAccumulation
from keras_boost.algorithms.accumulation.optimizer import find_gradient_accumulation

__all__ = ["FlushGradientAccumulation", "GradientAccumulation", "find_gradient_accumulation"]
