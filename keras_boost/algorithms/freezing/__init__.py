"""Gradient freezing: MindSpore's `GradientFreeze` / `FreezeOpt` (level O1).

On a frozen step only a suffix of the network is trained: `BoostModel`
differentiates the suffix group alone (one compiled train function per
depth, picked per step by the `DepthPlanner`), so the backward pass stops at
its first block. On a plain `keras.Model`, `FreezeOptimizer` gives the same
updates without the time saving.

Example:

```python
gf = boost.GradientFreeze(param_groups=4, freeze_p=0.7, total_steps=None)
model, optimizer = gf.freeze_generate(model, keras.optimizers.SGD(0.1))
model = boost.BoostModel.from_model(model)
model.compile(optimizer=optimizer, loss="mse")  # fit logs freeze_depth
```

The method card: `docs/methods/grad_freeze.md`.
"""

from keras_boost.algorithms.freezing.gradient_freeze import GradientFreeze
from keras_boost.algorithms.freezing.groups import groups_from_blocks
from keras_boost.algorithms.freezing.groups import model_blocks
from keras_boost.algorithms.freezing.groups import variable_blocks
from keras_boost.algorithms.freezing.optimizer import DEFAULT_TABLE_STEPS
from keras_boost.algorithms.freezing.optimizer import FreezeOpt
from keras_boost.algorithms.freezing.optimizer import FreezeOptimizer
from keras_boost.algorithms.freezing.planner import TIMED_CALLS
from keras_boost.algorithms.freezing.planner import DepthPlanner
from keras_boost.algorithms.freezing.planner import FreezeDecision
from keras_boost.algorithms.freezing.planner import best_plan_saving
from keras_boost.algorithms.freezing.schedule import CONTINUOUS
from keras_boost.algorithms.freezing.step import FreezingStep
from keras_boost.algorithms.freezing.schedule import INTERVAL
from keras_boost.algorithms.freezing.schedule import depth_probabilities
from keras_boost.algorithms.freezing.schedule import generate_freeze_index_sequence
from keras_boost.algorithms.freezing.schedule import suffix_groups

__all__ = [
    "CONTINUOUS",
    "DEFAULT_TABLE_STEPS",
    "DepthPlanner",
    "FreezeDecision",
    "FreezeOpt",
    "FreezeOptimizer",
    "FreezingStep",
    "GradientFreeze",
    "INTERVAL",
    "TIMED_CALLS",
    "best_plan_saving",
    "depth_probabilities",
    "generate_freeze_index_sequence",
    "groups_from_blocks",
    "model_blocks",
    "suffix_groups",
    "variable_blocks",
]
