"""Training-time magnitude pruning (Zhu & Gupta 2017's polynomial schedule).

Example:

```python
pruned = boost.pruning.prune_low_magnitude(model, 0.8)
pruned.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
pruned.fit(x, y, epochs=3)   # a PrunedModel: fit runs UpdatePruningMasks()
plain = boost.pruning.strip(pruned)
```
"""

from keras_boost.pruning.prune import PolynomialDecay
from keras_boost.pruning.prune import PrunedModel
from keras_boost.pruning.prune import PruneLowMagnitude
from keras_boost.pruning.prune import UpdatePruningMasks
from keras_boost.pruning.prune import apply_masks
from keras_boost.pruning.prune import kernel_variable
from keras_boost.pruning.prune import prune_low_magnitude
from keras_boost.pruning.prune import sparsity_report
from keras_boost.pruning.prune import strip
