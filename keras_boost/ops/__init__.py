"""keras_boost's pure math (`keras.ops`, testable against NumPy), under the path users know.

Each function lives with its algorithm (`keras_boost.algorithms.<name>`):
the AdaSum rule, gradient centralization, cautious masking, loss-scale arithmetic and the
gradient norms of the noise scale.

Example:

```python
boost.ops.adasum(np.array([1.0, 0.0]), np.array([0.0, 1.0]))   # [1.0, 1.0]
```
"""

from keras_boost.algorithms.accumulation import squared_global_norm
from keras_boost.algorithms.accumulation import window_gradient_norms
from keras_boost.algorithms.adasum import adasum
from keras_boost.algorithms.adasum import adasum_reduce
from keras_boost.algorithms.adasum import adasum_tree
from keras_boost.algorithms.cautious import cautious_mask
from keras_boost.algorithms.cautious import cautious_update
from keras_boost.algorithms.cautious import kept_coordinates
from keras_boost.algorithms.centralization import centralize
from keras_boost.algorithms.centralization import gc_applies
from keras_boost.algorithms.loss_scaling import all_finite
from keras_boost.algorithms.loss_scaling import group_all_finite
from keras_boost.algorithms.loss_scaling import scale_gradient
from keras_boost.algorithms.loss_scaling import unscale
from keras_boost.algorithms.loss_scaling import unscale_by_group
from keras_boost.algorithms.loss_scaling import update_group_scales
from keras_boost.algorithms.loss_scaling import update_loss_scale

__all__ = [
    "adasum",
    "adasum_reduce",
    "adasum_tree",
    "all_finite",
    "cautious_mask",
    "cautious_update",
    "centralize",
    "gc_applies",
    "group_all_finite",
    "kept_coordinates",
    "scale_gradient",
    "squared_global_norm",
    "unscale",
    "unscale_by_group",
    "update_group_scales",
    "update_loss_scale",
    "window_gradient_norms",
]
