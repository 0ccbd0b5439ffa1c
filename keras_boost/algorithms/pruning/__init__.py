"""Training-time magnitude pruning (Zhu & Gupta 2017's polynomial schedule).

`prune_low_magnitude(model, target_sparsity)` wraps the kernels of a copy
in `PruneLowMagnitude` layers whose masks `UpdatePruningMasks` raises along
a `PolynomialDecay` schedule (`sparsity`: the pure math); `strip(model)`
returns the plain model with the zeros baked in.

Example:

```python
from keras_boost.algorithms.pruning import prune_low_magnitude, strip

pruned = prune_low_magnitude(model, 0.8)
pruned.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
pruned.fit(x, y, epochs=3)   # a PrunedModel: fit runs UpdatePruningMasks()
plain = strip(pruned)
```

The method card: `docs/methods/pruning.md`.
"""

from keras_boost.algorithms.pruning import sparsity
from keras_boost.algorithms.pruning.prune import PolynomialDecay
from keras_boost.algorithms.pruning.prune import PrunedModel
from keras_boost.algorithms.pruning.prune import PruneLowMagnitude
from keras_boost.algorithms.pruning.prune import UpdatePruningMasks
from keras_boost.algorithms.pruning.prune import apply_masks
from keras_boost.algorithms.pruning.prune import kernel_variable
from keras_boost.algorithms.pruning.prune import prune_low_magnitude
from keras_boost.algorithms.pruning.prune import sparsity_report
from keras_boost.algorithms.pruning.prune import strip

__all__ = [
    "PolynomialDecay",
    "PruneLowMagnitude",
    "PrunedModel",
    "UpdatePruningMasks",
    "apply_masks",
    "kernel_variable",
    "prune_low_magnitude",
    "sparsity",
    "sparsity_report",
    "strip",
]
