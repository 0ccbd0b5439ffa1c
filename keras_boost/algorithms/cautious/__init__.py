"""Cautious optimizers (Liang et al. 2024, C-AdamW) around any Keras optimizer.

`CautiousOptimizer(optimizer)` lets the wrapped optimizer (AdamW, Adam, SGD
with momentum, Lion, ...) take its step, then undoes the coordinates of the
step that do not move against the current gradient and rescales the rest
per tensor (`cautious_mask`, `kept_coordinates`, `rescale_kept`,
`cautious_update`: the pure math). Decoupled weight decay and the moment
buffers stay unmasked.

Example:

```python
from keras_boost.algorithms.cautious import CautiousOptimizer

model.compile(optimizer=CautiousOptimizer(keras.optimizers.AdamW(1e-3)), loss="mse")
```

The method card: `docs/methods/cautious.md`.
"""

from keras_boost.algorithms.cautious.mask import MIN_KEPT_FRACTION
from keras_boost.algorithms.cautious.mask import cautious_mask
from keras_boost.algorithms.cautious.mask import cautious_update
from keras_boost.algorithms.cautious.mask import kept_coordinates
from keras_boost.algorithms.cautious.mask import rescale_kept
from keras_boost.algorithms.cautious.optimizer import CautiousOptimizer

__all__ = [
    "MIN_KEPT_FRACTION",
    "CautiousOptimizer",
    "cautious_mask",
    "cautious_update",
    "kept_coordinates",
    "rescale_kept",
]
