"""Training-time magnitude pruning, under the path users know.

The code lives in `keras_boost.algorithms.pruning`.

Example:

```python
pruned = boost.pruning.prune_low_magnitude(model, 0.8)
pruned.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
pruned.fit(x, y, epochs=3)   # a PrunedModel: fit runs UpdatePruningMasks()
plain = boost.pruning.strip(pruned)
```
"""

from keras_boost.algorithms.pruning import PolynomialDecay
from keras_boost.algorithms.pruning import PrunedModel
from keras_boost.algorithms.pruning import PruneLowMagnitude
from keras_boost.algorithms.pruning import UpdatePruningMasks
from keras_boost.algorithms.pruning import apply_masks
from keras_boost.algorithms.pruning import kernel_variable
from keras_boost.algorithms.pruning import prune_low_magnitude
from keras_boost.algorithms.pruning import sparsity_report
from keras_boost.algorithms.pruning import strip

__all__ = [
    "PolynomialDecay",
    "PruneLowMagnitude",
    "PrunedModel",
    "UpdatePruningMasks",
    "apply_masks",
    "kernel_variable",
    "prune_low_magnitude",
    "sparsity_report",
    "strip",
]
