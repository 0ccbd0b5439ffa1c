"""Optimizers Keras lacks: LARS, AdaBelief, AdaBound.

Each is a plain `keras.optimizers.Optimizer` with Keras' keywords
(`learning_rate`, `beta_1`, `beta_2`, `epsilon`, `weight_decay`, ...), so
the keras_boost wrappers compose around them like around any other.

Example:

```python
from keras_boost.algorithms.adaptive_optimizers import LARS

model.compile(optimizer=LARS(learning_rate=1.0, momentum=0.9), loss="mse")
```

The method card: `docs/methods/adaptive_optimizers.md`.
"""

from keras_boost.algorithms.adaptive_optimizers.optimizers import LARS
from keras_boost.algorithms.adaptive_optimizers.optimizers import AdaBelief
from keras_boost.algorithms.adaptive_optimizers.optimizers import AdaBound

__all__ = ["LARS", "AdaBelief", "AdaBound"]
