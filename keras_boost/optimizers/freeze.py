"""`FreezeOptimizer`: updates only the schedule's group at each step."""

import warnings

import keras
import numpy as np
from keras import ops

from keras_boost import backend as kb_backend
from keras_boost.errors import NoEffectWarning
from keras_boost.ops import freeze_schedule
from keras_boost.optimizers.base import OptimizerWrapper


@keras.saving.register_keras_serializable(package="keras_boost")
class FreezeOptimizer(OptimizerWrapper):
    """At step t, updates only the variables of group `train_strategy[t]`.

    One inner optimizer serves every group (MindSpore builds one optimizer per
    group, so a variable in several groups had several momentum buffers and
    each group its own step count): frozen variables get no gradient, so
    their slots, weight decay and values stay untouched, and learning-rate
    schedules follow the global step (`iterations` counts every step).

    On a plain `keras.Model` the model computes every gradient and this
    wrapper drops the frozen ones: the updates are right but nothing is
    saved. `BoostModel` drives the schedule itself and differentiates only
    the trained group, which prunes the backward pass.

    Args:
        optimizer: the `keras.optimizers.Optimizer` to wrap.
        train_parameter_groups: list of variable lists (e.g. from
            `GradientFreeze.split_parameters_groups`), or lists of variable
            paths; `None` = one group with every variable, or, with
            `schedule`, suffix groups computed from the variables at build.
        train_strategy: list of group indices, one per step, cycled; `None`
            means round-robin over the groups, unless `schedule` is given.
        schedule: dict(param_groups, freeze_type, freeze_p, total_steps,
            seed), as `GradientFreeze` takes them: generate
            MindSpore's schedule once the number of steps is known
            (`BoostModel.fit` sets it; otherwise 65536 steps with a warning).
        name: optional name.

    Example:

    ```python
    groups = boost.GradientFreeze().split_parameters_groups(model, 4)
    opt = boost.FreezeOptimizer(keras.optimizers.SGD(0.1), groups, [0, 0, 1, 2, 3])
    model.compile(optimizer=opt, loss="mse")
    ```
    """

    def __init__(
        self, optimizer, train_parameter_groups=None, train_strategy=None, schedule=None,
        name=None, **kwargs,
    ):
        super().__init__(optimizer, name=name or "freeze_optimizer", **kwargs)
        if train_strategy is not None and train_parameter_groups is None:
            raise ValueError(
                "FreezeOptimizer: train_strategy was given without "
                "train_parameter_groups; pass the groups it indexes."
            )
        self._group_spec = self._check_groups(train_parameter_groups)
        self._schedule_spec = self._check_schedule(schedule)
        self.train_strategy = self._check_strategy(train_strategy, self._group_spec)
        # Set by BoostModel, which then selects the group itself.
        self.external_schedule = False

    # --- validation --------------------------------------------------------

    @staticmethod
    def _check_groups(groups):
        if groups is None:
            return None
        if not isinstance(groups, (list, tuple)) or not groups:
            raise TypeError(
                "train_parameter_groups must be a non-empty list of lists of model "
                f"variables (or variable paths), got {groups!r}."
            )
        checked = []
        for i, group in enumerate(groups):
            if not isinstance(group, (list, tuple)) or not group:
                raise TypeError(
                    f"train_parameter_groups[{i}] must be a non-empty list of "
                    f"variables, got {group!r}."
                )
            for v in group:
                if not isinstance(v, (keras.Variable, str)):
                    raise TypeError(
                        f"train_parameter_groups[{i}] holds {v!r}, which is neither "
                        "a keras.Variable nor a variable path."
                    )
            checked.append([v if isinstance(v, str) else v.path for v in group])
        return checked

    @staticmethod
    def _check_schedule(schedule):
        if schedule is None:
            return None
        from keras_boost.grad_freeze import GradientFreeze

        if not isinstance(schedule, dict):
            raise TypeError(f"schedule must be a dict, got {schedule!r}.")
        GradientFreeze(**schedule)  # validates the values
        return dict(schedule)

    @staticmethod
    def _check_strategy(strategy, groups):
        if strategy is None:
            return None
        strategy = [int(i) for i in np.asarray(strategy).reshape(-1)]
        n = len(groups)
        bad = [i for i in strategy if not 0 <= i < n]
        if bad or not strategy:
            raise ValueError(
                f"train_strategy indexes groups 0..{n - 1}, got out-of-range "
                f"value(s) {sorted(set(bad))[:5] or strategy!r}."
            )
        return strategy

    # --- state -------------------------------------------------------------

    def _build_own(self, var_list):
        from keras_boost.grad_freeze import groups_from_blocks
        from keras_boost.grad_freeze import variable_blocks

        if self._group_spec is None and self._schedule_spec is not None:
            blocks = variable_blocks(var_list)
            self._group_spec = [
                [v.path for v in g]
                for g in groups_from_blocks(blocks, self._schedule_spec["param_groups"], "variable list")
            ]
        by_path = {v.path: i for i, v in enumerate(var_list)}
        groups = self._group_spec or [[v.path for v in var_list]]
        missing = [p for g in groups for p in g if p not in by_path]
        if missing:
            raise ValueError(
                f"FreezeOptimizer groups name variables the model does not train: {missing[:5]}."
            )
        self._group_indices = [sorted(by_path[p] for p in g) for g in groups]
        if len(self._group_indices) == 1:
            warnings.warn(
                "FreezeOptimizer has a single group: every step trains every "
                "variable and nothing is frozen.",
                NoEffectWarning,
                stacklevel=4,
            )
        self.freeze_step = self.add_variable(
            shape=(), dtype="int", initializer="zeros", aggregation="only_first_replica",
            name="freeze_step",
        )

    @property
    def group_count(self):
        return len(self._group_spec) if self._group_spec else 1

    def ensure_schedule(self, total_steps):
        """Generates the schedule from `schedule` once `total_steps` is known."""
        if self.train_strategy is not None or self._schedule_spec is None:
            return
        from keras_boost.grad_freeze import GradientFreeze

        spec = dict(self._schedule_spec)
        if spec.get("total_steps", "auto") != "auto":  # a fixed length wins
            total_steps = spec["total_steps"]
        spec["total_steps"] = int(total_steps)
        gf = GradientFreeze(**spec)
        self.train_strategy = gf.generate_freeze_index_sequence(
            spec["param_groups"], spec["freeze_type"], spec["freeze_p"], spec["total_steps"]
        )

    def _schedule_table(self):
        if self.train_strategy is None and self._schedule_spec is not None:
            if self._schedule_spec.get("total_steps", "auto") == "auto":
                warnings.warn(
                    "FreezeOptimizer: total_steps='auto' is only known inside "
                    "BoostModel.fit; generating a 65536-step schedule instead.",
                    stacklevel=4,
                )
            self.ensure_schedule(65536)
        if self.train_strategy is None:  # MindSpore: round-robin over groups
            return list(range(self.group_count))
        return self.train_strategy

    def depth_at(self, step):
        """The group trained at (0-based) step `step` (host side)."""
        table = self._schedule_table()
        return table[step % len(table)]

    def trained_indices(self, depth):
        """Indices (into the built var_list) of the variables of group `depth`."""
        return self._group_indices[depth]

    # --- updates -----------------------------------------------------------

    def _masked(self, grads, depth):
        keep = set(self._group_indices[depth])
        return [g if i in keep else None for i, g in enumerate(grads)]

    def _branches(self, apply_fn):
        return [(lambda d: lambda *args: apply_fn(d, *args))(d) for d in range(self.group_count)]

    def _apply(self, grads, trainable_variables):
        if self.external_schedule:
            # BoostModel passed only the trained group and counts the steps
            # itself (skipped overflow steps included).
            self.inner_optimizer.apply(grads, trainable_variables)
            return
        table = self._schedule_table()
        step = ops.cast(self.freeze_step.value, "int32")
        depth = ops.take(ops.convert_to_tensor(table, "int32"), step % len(table))
        self.freeze_step.assign_add(1)  # after the read: torch assigns in place

        def apply_group(d, grads, variables):
            self.inner_optimizer.apply(self._masked(grads, d), variables)

        kb_backend.current().switch(depth, self._branches(apply_group), (grads, trainable_variables))

    def _stateless_apply(self, own_variables, inner_variables, grads, trainable):
        position = next(i for i, v in enumerate(self._variables) if v is self.freeze_step)
        if self.external_schedule:
            new_trainable, new_inner = self.inner_optimizer.stateless_apply(
                inner_variables, grads, trainable
            )
            return new_trainable, list(own_variables), new_inner
        step = own_variables[position]
        new_own = list(own_variables)
        new_own[position] = step + 1
        table = self._schedule_table()
        depth = ops.take(ops.convert_to_tensor(table, "int32"), ops.cast(step, "int32") % len(table))

        def apply_group(d):
            new_trainable, new_inner = self.inner_optimizer.stateless_apply(
                inner_variables, self._masked(grads, d), trainable
            )
            return list(new_trainable), list(new_inner)

        new_trainable, new_inner = ops.switch(depth, self._branches(apply_group))
        return new_trainable, new_own, new_inner

    # --- serialization -----------------------------------------------------

    def get_config(self):
        config = super().get_config()
        config.update(
            train_parameter_groups=self._group_spec,
            train_strategy=self.train_strategy,
            schedule=self._schedule_spec,
        )
        return config


FreezeOpt = FreezeOptimizer  # MindSpore's name
