"""Dynamic loss scaling, with one scale or one scale per group of layers.

The loss is multiplied by a scale before differentiation so that float16
gradients do not underflow; the gradients are divided by it again, and a
step whose gradients are not finite on every replica is skipped (weights,
optimizer state and the forward pass's state left as they were) while the
scale shrinks. `DynamicLossScale` holds the settings,
`DynamicLossScaleOptimizer` applies them in the optimizer chain, and
`GroupLossScaleManager` (MindSpore's `loss_scale_group`) keeps one scale per
group of layers.

Example:

```python
keras.mixed_precision.set_global_policy("mixed_float16")
model = boost.BoostModel(inputs, outputs, loss_scale=boost.DynamicLossScale(initial_scale=2.0**12))
model.compile(optimizer="sgd", loss="mse")  # fit logs loss_scale and overflow
```

The method card: `docs/methods/loss_scaling.md`.
"""

from keras_boost.algorithms.loss_scaling.arithmetic import GROUP_GROWTH
from keras_boost.algorithms.loss_scaling.arithmetic import GROUP_SHRINK
from keras_boost.algorithms.loss_scaling.arithmetic import all_finite
from keras_boost.algorithms.loss_scaling.arithmetic import group_all_finite
from keras_boost.algorithms.loss_scaling.arithmetic import scale_gradient
from keras_boost.algorithms.loss_scaling.arithmetic import unscale
from keras_boost.algorithms.loss_scaling.arithmetic import unscale_by_group
from keras_boost.algorithms.loss_scaling.arithmetic import update_group_scales
from keras_boost.algorithms.loss_scaling.arithmetic import update_loss_scale
from keras_boost.algorithms.loss_scaling.group_manager import GroupLossScaleManager
from keras_boost.algorithms.loss_scaling.optimizer import DynamicLossScaleOptimizer
from keras_boost.algorithms.loss_scaling.settings import DynamicLossScale
from keras_boost.algorithms.loss_scaling.step import GroupLossScaleStep
from keras_boost.algorithms.loss_scaling.step import LossScaleStep
from keras_boost.algorithms.loss_scaling.step import group_manager
from keras_boost.algorithms.loss_scaling.step import model_loss_scale
from keras_boost.algorithms.loss_scaling.settings import resolve_loss_scale

__all__ = [
    "DynamicLossScale",
    "DynamicLossScaleOptimizer",
    "GROUP_GROWTH",
    "GROUP_SHRINK",
    "GroupLossScaleManager",
    "GroupLossScaleStep",
    "LossScaleStep",
    "all_finite",
    "group_all_finite",
    "group_manager",
    "model_loss_scale",
    "resolve_loss_scale",
    "scale_gradient",
    "unscale",
    "unscale_by_group",
    "update_group_scales",
    "update_loss_scale",
]
