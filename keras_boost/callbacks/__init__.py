"""Keras callbacks of keras_boost, under the path users know.

`WeightTrajectory` (DimReduce's stage 1, `keras_boost.algorithms.dim_reduce`),
`ProgressiveResizing` (`keras_boost.algorithms.progressive_resizing`),
`CurriculumSampler` / `CurriculumCallback` (`keras_boost.algorithms.curriculum`),
`AdaptiveBatchSize` (`keras_boost.algorithms.batch_size`).

Example:

```python
model.fit(x, y, epochs=10, callbacks=[boost.callbacks.ProgressiveResizing(initial_scale=0.5)])
```
"""

from keras_boost.algorithms.batch_size import AdaptiveBatchSize
from keras_boost.algorithms.curriculum import CurriculumCallback
from keras_boost.algorithms.curriculum import CurriculumSampler
from keras_boost.algorithms.dim_reduce import WeightTrajectory
from keras_boost.algorithms.dim_reduce import load_trajectory
from keras_boost.algorithms.progressive_resizing import ProgressiveResizing

__all__ = [
    "AdaptiveBatchSize",
    "CurriculumCallback",
    "CurriculumSampler",
    "ProgressiveResizing",
    "WeightTrajectory",
    "load_trajectory",
]
