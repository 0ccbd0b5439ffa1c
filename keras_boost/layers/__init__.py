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

__all__ = ["FusedBatchNormalization", "GroupLossScaleManager", "NormalizedDense", "ProgressiveResize"]
