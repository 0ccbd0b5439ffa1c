"""`GradientFreeze`: MindSpore's gradient freezing (the core of level O1).

On a frozen step only a suffix of the network is trained: gradients are
taken of the suffix group alone, so the backward pass stops at its first
block. That is where the time saving comes from, and why the real speed-up
needs `BoostModel` (one compiled train function per depth); on a plain
`keras.Model`, `FreezeOptimizer` gives the same updates without the saving.
"""

import numpy as np

from keras_boost import config as config_lib
from keras_boost.algorithms.freezing.groups import groups_from_blocks
from keras_boost.algorithms.freezing.groups import model_blocks
from keras_boost.algorithms.freezing import schedule as freeze_schedule
from keras_boost.algorithms.freezing.optimizer import FreezeOptimizer
from keras_boost.validation import check_model

__all__ = ["GradientFreeze"]


class GradientFreeze:
    """Builds MindSpore's gradient-freezing groups and schedule for a model.

    Args:
        param_groups: number of suffix groups n (group 0 = all variables,
            group k = the variables after the first k * stride blocks).
        freeze_type: 0 (continuous: full steps, then depths 1..n-1) or 1
            (interval: full and frozen steps interleaved, random depths with
            P(k) proportional to n - k).
        freeze_p: long-run fraction of FULL steps, in (0, 1).
        total_steps: steps the schedule covers; `None` or `"auto"` takes
            epochs x steps per epoch from `BoostModel.fit`.
        seed: seed of the schedule's private RNG (never NumPy's global one).

    Example:

    ```python
    gf = boost.GradientFreeze(param_groups=4, freeze_p=0.7, total_steps=None, seed=0)
    model, optimizer = gf.freeze_generate(model, keras.optimizers.SGD(0.1))
    model = boost.BoostModel.from_model(model)
    model.compile(optimizer=optimizer, loss="mse")   # logs freeze_depth
    ```
    """

    def __init__(self, param_groups=10, freeze_type=1, freeze_p=0.7, total_steps=65536, seed=None):
        schema = config_lib.SCHEMA["grad_freeze"]
        self.param_groups = schema["param_groups"][1]("param_groups", param_groups)
        self.freeze_type = schema["freeze_type"][1]("freeze_type", freeze_type)
        self.freeze_p = schema["freeze_p"][1]("freeze_p", freeze_p)
        self.total_steps = schema["total_steps"][1]("total_steps", total_steps)
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise TypeError(f"seed must be an int or None, got {seed!r}.")
        self.seed = seed
        self._rng = np.random.default_rng(seed)

    def split_parameters_groups(self, model, freeze_para_groups_number):
        """List of variable lists: group i holds every trainable variable from
        block i * stride to the end (group 0 = all)."""
        check_model(model)
        n = config_lib.SCHEMA["grad_freeze"]["param_groups"][1](
            "freeze_para_groups_number", freeze_para_groups_number
        )
        return groups_from_blocks(model_blocks(model), n, where=f"model {model.name!r}")

    def generate_freeze_index_sequence(
        self, parameter_groups_number, freeze_strategy, freeze_p, total_steps
    ):
        """The schedule: one group index per step, length >= int(total_steps * 1.01)."""
        return freeze_schedule.generate_freeze_index_sequence(
            parameter_groups_number, freeze_strategy, freeze_p, total_steps, self._rng
        )

    def freeze_generate(self, model, optimizer):
        """Returns `(model, FreezeOptimizer)`; the model is not changed."""
        groups = self.split_parameters_groups(model, self.param_groups)
        if self.total_steps == "auto":
            return model, FreezeOptimizer(
                optimizer, groups, schedule=self.schedule_config()
            )
        sequence = self.generate_freeze_index_sequence(
            self.param_groups, self.freeze_type, self.freeze_p, self.total_steps
        )
        return model, FreezeOptimizer(optimizer, groups, sequence)

    def schedule_config(self):
        """What a FreezeOptimizer needs to generate the schedule later."""
        return {
            "param_groups": self.param_groups,
            "freeze_type": self.freeze_type,
            "freeze_p": self.freeze_p,
            "total_steps": self.total_steps,
            "seed": self.seed,
        }
