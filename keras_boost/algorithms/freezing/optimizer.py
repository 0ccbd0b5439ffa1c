"""`FreezeOptimizer`: updates only the schedule's group at each step."""

import warnings

import keras
import numpy as np
from keras import ops

from keras_boost import keras_private
from keras_boost import backend as kb_backend
from keras_boost import config as config_lib
from keras_boost.errors import NoEffectWarning
from keras_boost.algorithms.freezing.groups import groups_from_blocks
from keras_boost.algorithms.freezing.groups import variable_blocks
from keras_boost.algorithms.freezing import schedule as freeze_schedule
from keras_boost.algorithms.optimizer_wrapper import OptimizerWrapper
from keras_boost.algorithms.optimizer_wrapper import optimizer_chain

__all__ = ["DEFAULT_TABLE_STEPS", "FreezeOpt", "FreezeOptimizer"]

# Length of the schedule table when the run's length is unknown (a plain
# model's fit). The table is cycled; MindSpore's schedules have the same
# statistics whatever their length, so nothing is lost by cycling.
DEFAULT_TABLE_STEPS = 65536


@keras.saving.register_keras_serializable(package="keras_boost")
class FreezeOptimizer(OptimizerWrapper):
    """At step t, updates only the variables of group `train_strategy[t]`.

    One inner optimizer serves every group (MindSpore builds one optimizer per
    group, so a variable in several groups had several momentum buffers and
    each group its own step count): frozen variables, their optimizer slots
    (momentum, EMA, ...) and their weight decay stay untouched, and
    learning-rate schedules follow the global step (`iterations` counts every
    step).

    On a plain `keras.Model` the model computes every gradient; this wrapper
    runs one ordinary update and keeps the frozen variables and slots at
    their previous values. The updates are right, the step costs about what
    the plain step costs, and nothing is saved (a `NoEffectWarning` says so
    once). `BoostModel` drives the schedule itself and differentiates only
    the trained group, which prunes the backward pass: that is the speed-up.

    Args:
        optimizer: the (unbuilt) `keras.optimizers.Optimizer` to wrap.
        train_parameter_groups: list of groups, each a list of model
            variables, variable paths, or indices into the trained variable
            list (e.g. from `GradientFreeze.split_parameters_groups`); `None`
            = one group with every variable, or, with `schedule`, suffix
            groups computed from the variables at build.
        train_strategy: list of group indices, one per step, cycled; `None`
            means round-robin over the groups, unless `schedule` is given.
        schedule: dict(param_groups, freeze_type, freeze_p, total_steps,
            seed), as `GradientFreeze` takes them: generate MindSpore's
            schedule once the number of steps is known (`BoostModel.fit`
            sets it; elsewhere a 65536-step table, cycled). With
            `adaptive_depths` (the default unless `param_groups` is given),
            groups computed at build are fitted to the model: at most one
            per block.
        planner_state: the measurements `BoostModel`'s depth planner
            decided from (`DepthPlanner.state()`), kept in the config so a
            reloaded model decides the same without timing.
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
        planner_state=None, name=None, **kwargs,
    ):
        super().__init__(optimizer, name=name or "freeze_optimizer", **kwargs)
        if train_strategy is not None and train_parameter_groups is None:
            raise ValueError(
                "FreezeOptimizer: train_strategy was given without "
                "train_parameter_groups; pass the groups it indexes."
            )
        self._group_spec = _check_groups(train_parameter_groups)
        self._schedule_spec = None if schedule is None else _check_schedule(schedule)
        self.train_strategy = _check_strategy(train_strategy, self._group_spec)
        self._model_driven = False
        self.planner_state = planner_state
        self._warned_no_saving = False
        self._tables = None  # NumPy schedule and group masks, built on first use

    # --- what BoostModel drives ---------------------------------------------

    @property
    def schedule_spec(self):
        """The `schedule` dict this optimizer was given (a copy), or None."""
        return None if self._schedule_spec is None else dict(self._schedule_spec)

    @property
    def run_steps(self):
        """The run's length in schedule steps that the user set
        (`total_steps`), or None: `"auto"`, or the default 65536, which
        stands for a run of unknown length (MindSpore's default table)."""
        spec = self._schedule_spec
        if spec is None or spec["total_steps"] in ("auto", DEFAULT_TABLE_STEPS):
            return None
        return spec["total_steps"]

    @property
    def groups_given(self):
        """True when the groups are known (given, or fixed by a saved config)."""
        return self._group_spec is not None

    @property
    def model_driven(self):
        """True once a `BoostModel` selects the trained group at each step."""
        return self._model_driven

    def drive_from_model(self, groups=None):
        """Hands the schedule to the model's train step (`BoostModel`).

        The model then passes only the trained group's gradients and
        variables to `apply` and advances `freeze_step` itself.

        Args:
            groups: the groups to use when none were given, as lists of
                indices into the trained variable list (BoostModel derives
                them from the model's layer structure).
        """
        if self._group_spec is None and groups is not None:
            if self.built:
                raise ValueError(
                    f"{self.name}: groups cannot change after the optimizer is built."
                )
            self._group_spec = _check_groups(groups)
        self._model_driven = True

    # --- state -------------------------------------------------------------

    @property
    def fits_groups_to_model(self):
        """True when the groups come from the level's default `param_groups`,
        fitted to the model (not chosen by the user)."""
        return self._schedule_spec is not None and self._schedule_spec["adaptive_depths"]

    def build(self, var_list):
        var_list = list(var_list)
        if self._group_spec is None and self._schedule_spec is not None and var_list:
            blocks = variable_blocks(var_list)
            groups = groups_from_blocks(
                blocks, self._schedule_spec["param_groups"], "variable list",
                fit=self.fits_groups_to_model,
            )
            positions = {id(v): i for i, v in enumerate(var_list)}
            self._group_spec = [[positions[id(v)] for v in g] for g in groups]
        self._group_indices = _group_indices(self._group_spec, var_list)
        # A BoostModel at the level's default reports this at the end of fit.
        if len(self._group_indices) == 1 and not (self._model_driven and self.fits_groups_to_model):
            what = f"{len(var_list)} variable(s) in one group" if var_list else "no trainable variable"
            warnings.warn(
                f"{self.name}: the model has {what}, so every step trains every "
                "variable and nothing is frozen.",
                NoEffectWarning,
                stacklevel=3,
            )
        super().build(var_list)

    def _build_own(self, var_list):
        self.freeze_step = self.add_variable(
            shape=(), dtype="int", initializer="zeros", aggregation="only_first_replica",
            name="freeze_step",
        )

    def _build_inner(self, var_list):
        # Records which model variable each inner slot (momentum, EMA, ...)
        # belongs to, so that a frozen variable's slots can be kept as well.
        chain = optimizer_chain(self.inner_optimizer)
        if any(o.built for o in chain):
            raise ValueError(
                f"{self.name}: the wrapped optimizer {self.inner_optimizer.name!r} is "
                "already built; pass a fresh (unbuilt) optimizer."
            )
        positions = {id(v): i for i, v in enumerate(var_list)}
        owners = {}

        def recording(original):
            def add_variable_from_reference(reference_variable, *args, **kwargs):
                slot = original(reference_variable, *args, **kwargs)
                owners[id(slot)] = positions.get(id(reference_variable))
                return slot

            return add_variable_from_reference

        for optimizer in chain:
            optimizer.add_variable_from_reference = recording(
                optimizer.add_variable_from_reference
            )
        try:
            self.inner_optimizer.build(var_list)
        finally:
            for optimizer in chain:
                del optimizer.add_variable_from_reference
        self._slot_owners = [owners.get(id(v)) for v in self.inner_optimizer.variables]

    @property
    def group_count(self):
        return len(self._group_spec) if self._group_spec else 1

    def ensure_schedule(self, total_steps):
        """Generates the schedule from `schedule` once `total_steps` is known."""
        if self.train_strategy is not None or self._schedule_spec is None:
            return
        spec = self._schedule_spec
        if spec["total_steps"] != "auto":  # a fixed length wins
            total_steps = spec["total_steps"]
        self._tables = None
        # Once known, the groups may be fewer than param_groups (fitted to the model).
        known = self._group_spec is not None or self.built
        groups = self.group_count if known else spec["param_groups"]
        self.train_strategy = freeze_schedule.generate_freeze_index_sequence(
            groups, spec["freeze_type"], spec["freeze_p"], int(total_steps),
            np.random.default_rng(spec["seed"]),
        )

    def schedule_table(self):
        """The depth per step (cycled), generated on first use."""
        if self.train_strategy is None and self._schedule_spec is not None:
            self.ensure_schedule(DEFAULT_TABLE_STEPS)
        if self.train_strategy is None:  # MindSpore: round-robin over groups
            return list(range(self.group_count))
        return self.train_strategy

    def depth_at(self, step):
        """The group trained at (0-based) step `step` (host side)."""
        table = self.schedule_table()
        return table[step % len(table)]

    def trained_indices(self, depth):
        """Indices (into the built var_list) of the variables of group `depth`."""
        return self._group_indices[depth]

    # --- updates -----------------------------------------------------------

    def _depth_and_mask(self, step):
        """The depth at `step` and, per variable, whether that depth trains it."""
        if self._tables is None:
            # NumPy, built once: converting a Python list of ~66k steps on
            # every eager (torch) step would cost more than the step.
            mask = np.zeros((self.group_count, len(keras_private.optimizer_trained_variables(self))), bool)
            for d, indices in enumerate(self._group_indices):
                mask[d, indices] = True
            self._tables = (np.asarray(self.schedule_table(), np.int32), mask)
        table, mask = self._tables
        position = ops.cast(step, "int32") % len(table)
        depth = ops.take(ops.convert_to_tensor(table), position)
        return depth, ops.take(ops.convert_to_tensor(mask), depth, axis=0)

    def _frozen_candidates(self):
        """Variable positions that some depth freezes (the rest always train)."""
        always = set.intersection(*(set(g) for g in self._group_indices))
        return [i for i in range(len(keras_private.optimizer_trained_variables(self))) if i not in always]

    def _warn_no_saving(self):
        if not self._warned_no_saving:
            self._warned_no_saving = True
            warnings.warn(
                f"{self.name}: on a plain keras.Model every gradient is computed and "
                "the frozen variables are only kept unchanged, so gradient freezing "
                "saves no time here. Use boost.BoostModel.from_model(model, "
                "boost_level=...) to skip the frozen part of the backward pass.",
                NoEffectWarning,
                stacklevel=5,
            )

    def _apply(self, grads, trainable_variables):
        if self._model_driven:
            # BoostModel passed only the trained group and counts the steps
            # itself (skipped overflow steps included).
            self.inner_optimizer.apply(grads, trainable_variables)
            return
        self._warn_no_saving()
        variables = list(trainable_variables or keras_private.optimizer_trained_variables(self))
        seam = kb_backend.current()
        step = self.freeze_step.value
        known_step = seam.static_value(step)
        if known_step is None:  # a traced step: keep whatever this depth freezes
            _, trained = self._depth_and_mask(step)
            candidates = self._frozen_candidates()
        else:
            # Eager (torch): this step's depth on the host, without the
            # schedule as a tensor; every candidate is then frozen.
            trained_now = set(self._group_indices[self.depth_at(known_step)])
            candidates = [i for i in range(len(variables)) if i not in trained_now]
            trained = [False] * len(variables)
        self.freeze_step.assign_add(1)  # after the read: torch assigns in place
        slots = [
            (slot, owner) for slot, owner in zip(self.inner_optimizer.variables, self._slot_owners)
            if owner in candidates
        ]
        before = [ops.copy(variables[i].value) for i in candidates]
        before_slots = [ops.copy(slot.value) for slot, _ in slots]
        self.inner_optimizer.apply(grads, variables)
        keep = [(variables[i], trained[i], old) for i, old in zip(candidates, before)]
        keep += [(slot, trained[owner], old) for (slot, owner), old in zip(slots, before_slots)]
        seam.assign_where(keep)

    def _stateless_apply(self, own_variables, inner_variables, grads, trainable):
        if self._model_driven:
            # BoostModel's JAX step differentiated the trained group only
            # (None elsewhere): apply to that subset, so that Keras sees no
            # missing gradient.
            new_trainable, new_inner = self._stateless_subset_apply(
                inner_variables, grads, trainable
            )
            return new_trainable, list(own_variables), new_inner
        self._warn_no_saving()
        position = next(i for i, v in enumerate(keras_private.optimizer_own_variables(self)) if v is self.freeze_step)
        step = own_variables[position]
        new_own = list(own_variables)
        new_own[position] = step + 1
        _, trained = self._depth_and_mask(step)
        new_trainable, new_inner = self.inner_optimizer.stateless_apply(
            inner_variables, grads, trainable
        )
        candidates = set(self._frozen_candidates())
        new_trainable = [
            ops.where(trained[i], new, old) if i in candidates else new
            for i, (new, old) in enumerate(zip(new_trainable, trainable))
        ]
        new_inner = [
            ops.where(trained[owner], new, old) if owner in candidates else new
            for new, old, owner in zip(new_inner, inner_variables, self._slot_owners)
        ]
        return new_trainable, new_own, new_inner

    def _stateless_subset_apply(self, inner_variables, grads, trainable):
        variables = keras_private.optimizer_trained_variables(self)
        inner = self.inner_optimizer
        mapping = list(zip(variables, trainable)) + list(zip(inner.variables, inner_variables))
        present = [i for i, g in enumerate(grads) if g is not None]
        with keras.StatelessScope(state_mapping=mapping) as scope:
            inner.apply([grads[i] for i in present], [variables[i] for i in present])
        new_trainable = [scope.get_current_value(v) for v in variables]
        new_inner = [scope.get_current_value(v) for v in inner.variables]
        return new_trainable, new_inner

    # --- serialization -----------------------------------------------------

    def get_config(self):
        config = super().get_config()
        # Indices into the trained variable list: they survive the model
        # being rebuilt (load_model, from_model), paths do not.
        groups = self._group_indices if self.built else self._group_spec
        config.update(
            train_parameter_groups=groups,
            train_strategy=self.train_strategy,
            schedule=self._schedule_spec,
            planner_state=self.planner_state,
        )
        return config


FreezeOpt = FreezeOptimizer  # MindSpore's name


def _check_groups(groups):
    if groups is None:
        return None
    if not isinstance(groups, (list, tuple)) or not groups:
        raise TypeError(
            "train_parameter_groups must be a non-empty list of lists of model "
            f"variables (or variable paths or indices), got {groups!r}."
        )
    checked = []
    for i, group in enumerate(groups):
        # [[]]: the one group of a model that trains nothing.
        if not isinstance(group, (list, tuple)) or (not group and len(groups) > 1):
            raise TypeError(
                f"train_parameter_groups[{i}] must be a non-empty list of "
                f"variables, got {group!r}."
            )
        members = []
        for v in group:
            if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
                members.append(int(v))
            elif isinstance(v, keras.Variable):
                members.append(v.path)
            elif isinstance(v, str):
                members.append(v)
            else:
                raise TypeError(
                    f"train_parameter_groups[{i}] holds {v!r}, which is neither a "
                    "keras.Variable, a variable path nor an index."
                )
        checked.append(members)
    return checked


def _group_indices(spec, var_list):
    """Each group as sorted indices into `var_list`."""
    if spec is None:
        return [list(range(len(var_list)))]
    by_path = {}
    for i, v in enumerate(var_list):
        by_path.setdefault(v.path, []).append(i)
    ambiguous = sorted(p for p, positions in by_path.items() if len(positions) > 1)
    indices, missing = [], []
    for group in spec:
        members = set()
        for member in group:
            if isinstance(member, int):
                if not 0 <= member < len(var_list):
                    missing.append(member)
                else:
                    members.add(member)
            elif member in ambiguous:
                raise ValueError(
                    f"FreezeOptimizer: the variable path {member!r} names several "
                    "trained variables; give the groups as variables or indices."
                )
            elif member not in by_path:
                missing.append(member)
            else:
                members.add(by_path[member][0])
        indices.append(sorted(members))
    if missing:
        raise ValueError(
            f"FreezeOptimizer groups name variables the model does not train: "
            f"{missing[:5]} (it trains {len(var_list)} variables)."
        )
    return indices


def _check_schedule(schedule):
    if not isinstance(schedule, dict):
        raise TypeError(f"schedule must be a dict, got {schedule!r}.")
    checked = config_lib.check_grad_freeze_values(schedule)
    if checked["adaptive_depths"] == "auto":  # as in the config
        checked["adaptive_depths"] = "param_groups" not in schedule
    return checked


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
