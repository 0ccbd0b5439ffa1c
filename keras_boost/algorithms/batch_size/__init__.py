"""Adaptive batch size: grow the effective batch as the gradient noise scale grows.

`AdaptiveBatchSize` raises the accumulation step of the model's
`GradientAccumulation` (the effective batch) on a schedule, or when the
measured gradient noise scale (`NoiseScale`, `simple_noise_scale`:
McCandlish et al. 2018, from the window norms that
`keras_boost.algorithms.accumulation` measures) says a bigger batch would not waste samples, and
rescales the learning rate (`lr_factor`).

Example:

```python
from keras_boost.algorithms.batch_size import AdaptiveBatchSize

optimizer = boost.GradientAccumulation(keras.optimizers.SGD(0.05), max_accumulation_step=1)
model.compile(optimizer=optimizer, loss="mse")
grow = AdaptiveBatchSize({"0.5dur": 2, "0.75dur": 4}, lr_rule="linear")  # or noise_scale="auto"
model.fit(x, y, batch_size=32, epochs=8, callbacks=[grow])
```

The method card: `docs/methods/grad_accumulation.md` (its adaptive batch size section).
"""

from keras_boost.algorithms.batch_size.callback import LR_RULES
from keras_boost.algorithms.batch_size.callback import AdaptiveBatchSize
from keras_boost.algorithms.batch_size.callback import NoiseScale
from keras_boost.algorithms.batch_size.callback import lr_factor
from keras_boost.algorithms.batch_size.callback import simple_noise_scale

__all__ = [
    "LR_RULES",
    "AdaptiveBatchSize",
    "NoiseScale",
    "lr_factor",
    "simple_noise_scale",
]
