"""Prefix caching: compute a model's frozen prefix once, train the rest.

In fine-tuning, the layers from the inputs up to the first trainable one
compute the same numbers at every epoch. `split_frozen_prefix(model)` finds
that frozen prefix (inside nested functional models too: a partly unfrozen
`keras.applications` base is cut at its first trainable layer) and splits
the model into `prefix` and `suffix` models over the same layer objects;
`fit_with_cached_prefix(model, x, y, ...)` computes the prefix's outputs
once and trains the suffix on them, which trains the model's own variables
with its own optimizer (AutoFreeze, Liu et al. 2021, caches the frozen
layers' activations the same way).

Example:

```python
from keras_boost.algorithms.prefix_cache import fit_with_cached_prefix, split_frozen_prefix

print(split_frozen_prefix(model).report)  # where the cut is, and why there
history = fit_with_cached_prefix(model, x_train, y_train, batch_size=64, epochs=10)
```

The hook form: `boost.prefix_cache` (on at O1 and O2) makes `BoostModel.fit`
on arrays do the same by itself (`keras_boost.algorithms.prefix_cache.level`).

The method card: `docs/methods/prefix_cache.md`.
"""

from keras_boost.algorithms.prefix_cache.fit import fit_with_cached_prefix
from keras_boost.algorithms.prefix_cache.level import CacheDecision
from keras_boost.algorithms.prefix_cache.level import fit_with_level_cache
from keras_boost.algorithms.prefix_cache.rules import uncacheable_reason
from keras_boost.algorithms.prefix_cache.split import CachedSuffix
from keras_boost.algorithms.prefix_cache.split import PrefixReport
from keras_boost.algorithms.prefix_cache.split import PrefixSplit
from keras_boost.algorithms.prefix_cache.split import frozen_prefix_report
from keras_boost.algorithms.prefix_cache.split import split_frozen_prefix

__all__ = [
    "CacheDecision",
    "CachedSuffix",
    "PrefixReport",
    "PrefixSplit",
    "fit_with_cached_prefix",
    "fit_with_level_cache",
    "frozen_prefix_report",
    "split_frozen_prefix",
    "uncacheable_reason",
]
