"""Fused batch norm: BatchNormalization trained with one fused kernel.

`fuse_batch_norm(model)` returns a copy whose eligible BatchNormalization
layers are `FusedBatchNormalization` layers: the same math and weights, the
training-mode forward and backward in one op where the backend has one
(TensorFlow's `FusedBatchNormV3`). `count_batch_norms(model)` counts the
eligible layers.

Example:

```python
from keras_boost.algorithms.fused_batch_norm import fuse_batch_norm

fused = fuse_batch_norm(model)
fused.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
```

The method card: `docs/methods/fused_batch_norm.md`.
"""

from keras_boost.algorithms.fused_batch_norm.layer import FusedBatchNormalization
from keras_boost.algorithms.fused_batch_norm.surgery import count_batch_norms
from keras_boost.algorithms.fused_batch_norm.surgery import fuse_batch_norm

__all__ = ["FusedBatchNormalization", "count_batch_norms", "fuse_batch_norm"]
