"""Layers keras_boost adds to models, under the path users know.

`NormalizedDense` (LessBN's head, `keras_boost.algorithms.less_bn`),
`FusedBatchNormalization` (`keras_boost.algorithms.fused_batch_norm`),
`GroupLossScaleManager` (per-group loss scales,
`keras_boost.algorithms.loss_scaling`), `ProgressiveResize`
(`keras_boost.algorithms.progressive_resizing`).

Example:

```python
head = boost.layers.NormalizedDense(10)
```
"""

from keras_boost.algorithms.fused_batch_norm import FusedBatchNormalization
from keras_boost.algorithms.less_bn import NormalizedDense
from keras_boost.algorithms.loss_scaling import GroupLossScaleManager
from keras_boost.algorithms.progressive_resizing import ProgressiveResize

# The old modules stay attributes of this package, as before the algorithms
# moved (`boost.layers.normalized_dense.matched_scale`).
from keras_boost.layers import fused_batch_norm  # noqa: F401
from keras_boost.layers import group_loss_scale  # noqa: F401
from keras_boost.layers import normalized_dense  # noqa: F401
from keras_boost.layers import progressive_resize  # noqa: F401

__all__ = ["FusedBatchNormalization", "GroupLossScaleManager", "NormalizedDense", "ProgressiveResize"]
