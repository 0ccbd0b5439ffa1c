"""`GradientFreeze`: MindSpore's gradient freezing (the core of level O1).

On a frozen step only a suffix of the network is trained: gradients are
taken of the suffix group alone, so the backward pass stops at its first
block. That is where the time saving comes from, and why the real speed-up
needs `BoostModel` (one compiled train function per depth); on a plain
`keras.Model`, `FreezeOptimizer` gives the same updates without the saving.
"""

import warnings

import keras
import numpy as np

from keras_boost import config as config_lib
from keras_boost.errors import NoEffectWarning
from keras_boost.ops import freeze_schedule

# Variables that open a block: the weight matrix of a conv/dense/embedding
# layer. Biases and normalization parameters join the block before them.
BLOCK_STARTERS = ("kernel", "depthwise_kernel", "pointwise_kernel", "embeddings")


def _starts_block(layer_variables):
    return any(v.name in BLOCK_STARTERS for v in layer_variables)


def variable_blocks(variables):
    """Blocks from a variable list in layer order (no model at hand).

    A kernel-like variable opens a block; everything else joins the open one.
    """
    blocks = []
    for v in variables:
        if v.name in BLOCK_STARTERS or not blocks:
            blocks.append([v])
        else:
            blocks[-1].append(v)
    return blocks


def model_blocks(model):
    """The model's trainable variables as blocks, by layer structure.

    A layer with a kernel (Conv, Dense, Embedding, ...) opens a block; the
    layers after it without one (BatchNormalization, LayerNormalization, a
    bias-only layer) join it. Every trainable variable lands in exactly one
    block; variables no layer walk reaches join the last block (always
    trained).
    """
    trainable = {id(v) for v in model.trainable_variables}
    seen, blocks = set(), []
    # Depth-first in tracking order: graph order for functional models,
    # attribute order inside subclassed ones.
    for layer in model._flatten_layers(include_self=True, recursive=True):
        fresh = [
            v for v in layer._trainable_variables if id(v) in trainable and id(v) not in seen
        ]
        if not fresh:
            continue
        seen.update(id(v) for v in fresh)
        if _starts_block(fresh) or not blocks:
            blocks.append(fresh)
        else:
            blocks[-1].extend(fresh)
    rest = [v for v in model.trainable_variables if id(v) not in seen]
    if rest:
        if blocks:
            blocks[-1].extend(rest)
        else:
            blocks.append(rest)
    return blocks


def groups_from_blocks(blocks, n, where="model"):
    """Suffix groups; warns (NoEffectWarning) when there are fewer blocks than groups."""
    if len(blocks) < n:
        warnings.warn(
            f"Gradient freezing: the {where} has {len(blocks)} block(s) but "
            f"param_groups={n}, so every group is the whole network and nothing "
            f"is ever frozen. Use param_groups <= {len(blocks)}.",
            NoEffectWarning,
            stacklevel=3,
        )
    return freeze_schedule.suffix_groups(blocks, n)


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
        from keras_boost.auto_boost import check_model

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
        from keras_boost.optimizers.freeze import FreezeOptimizer

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
