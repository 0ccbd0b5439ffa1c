"""Gradient freezing's step part: one compiled train function per depth.

The step at depth d differentiates only the variables of group d (the
frozen prefix is left out, so its backward pass is never built). The part
compiles one train function per depth before `fit` starts and picks one per
step on the host, through a `DepthPlanner`; a depth's function is traced on
its first use.
"""

import time

import keras

from keras_boost.algorithms.freezing.groups import groups_from_blocks
from keras_boost.algorithms.freezing.groups import model_blocks
from keras_boost.algorithms.freezing.optimizer import DEFAULT_TABLE_STEPS
from keras_boost.algorithms.freezing.planner import DepthPlanner
from keras_boost.algorithms.step_part import StepPart

__all__ = ["FreezingStep"]


class FreezingStep(StepPart):
    """The `StepPart` of a `FreezeOptimizer` in `BoostModel`'s chain.

    Attributes: `depth` (the depth of the step being traced or run),
    `planner` (the `DepthPlanner` of the last train function, or None).

    Example:

    ```python
    part = FreezingStep(find_in_chain(model.optimizer, FreezeOptimizer))
    part.depth = 2
    part.trained_variables(model.trainable_variables)  # group 2's variables
    ```
    """

    label = "gradient freezing"
    optional = True  # it trains less of the model on some steps, to save time
    # The planner's timing source (tests replace it with a fake clock).
    clock = staticmethod(time.perf_counter)

    def __init__(self, freeze, steps_per_update=1):
        self.freeze = freeze
        # With accumulation, a window of k micro-steps is one update: the
        # schedule advances per window, so every micro-step of a window
        # trains the same group.
        self.steps_per_update = steps_per_update
        self.depth = 0
        self.planner = None
        self.host_step = 0  # micro-steps run, on the host
        # Calls that ran at a depth above 0 (they froze layers), counted on
        # the host: the summary says so when freezing ends up switched off.
        self.frozen_calls = 0
        self.total_updates = None  # the run's end in schedule steps (from fit)

    def trained_variables(self, variables):
        return [variables[i] for i in self.freeze.trained_indices(self.depth)]

    def finish(self, step):
        self.freeze.freeze_step.assign_add(1)  # the schedule advances on every step
        return {"freeze_depth": keras.ops.convert_to_tensor(self.depth, "int32")}

    def stateless_finish(self, step):
        counter = self.freeze.freeze_step
        step.assign(counter, step.value(counter) + 1)
        return {"freeze_depth": keras.ops.convert_to_tensor(self.depth, "int32")}

    def on_compile(self, model, compile_kwargs):
        steps = compile_kwargs.get("steps_per_execution", 1)
        if steps != 1:
            raise ValueError(
                "Gradient freezing picks a compiled train function per step; it needs "
                f"steps_per_execution=1, got steps_per_execution={steps!r}. Compile with "
                "steps_per_execution=1 or switch grad_freeze off."
            )
        self.freeze.drive_from_model(self._groups(model))

    def _groups(self, model):
        """The freeze groups by layer structure, as indices into
        `model.trainable_variables` (computed at each compile, from the
        variables trainable then). None when the optimizer has its groups,
        or the model trains nothing (one group, of no variable, made at build).
        """
        spec = self.freeze.schedule_spec
        if spec is None or self.freeze.groups_given or not model.trainable_variables:
            return None
        groups = groups_from_blocks(
            model_blocks(model), spec["param_groups"], where=f"model {model.name!r}",
            fit=self.freeze.fits_groups_to_model,
        )
        positions = {id(v): i for i, v in enumerate(model.trainable_variables)}
        return [[positions[id(v)] for v in g] for g in groups]

    def make_train_function(self, model, compile_step):
        """One train function per depth; the host-side schedule picks one per
        step (no retracing), through a `DepthPlanner`. In adaptive mode a
        depth is traced only once the planner expects it to pay back its
        trace (see `keras_boost.algorithms.freezing.planner`)."""
        freeze = self.freeze
        compiled = [compile_step(self._at_depth(d)) for d in range(freeze.group_count)]
        self.host_step = int(keras.ops.convert_to_numpy(freeze.freeze_step))
        per_update = self.steps_per_update
        spec = freeze.schedule_spec
        pinned = spec["depths"] if spec and spec["depths"] != "auto" else None
        planner = self.planner = DepthPlanner(
            [freeze.trained_indices(d) for d in range(freeze.group_count)],
            adaptive=bool(spec and spec["adaptive_depths"]),
            min_run_saving=spec["min_run_saving"] if spec else 0.0,
            calls_per_step=per_update,
            depths=pinned,
            state=None if pinned else freeze.planner_state,
        )

        untraced = set(range(freeze.group_count))  # functions not called yet

        def train_function(*args):
            if not planner.has_schedule:  # fit sized it (on_train_begin)
                planner.set_schedule(freeze.schedule_table(), self.total_updates)
            step = self.host_step // per_update
            self.depth = depth = planner.choose(step, freeze.depth_at(step))
            self.host_step += 1
            self.frozen_calls += depth != 0
            # The first call traces; for a depth timed before (a resumed run's
            # planner state), that is not one of its steps.
            retrace = depth in untraced and planner.has_measured(depth)
            untraced.discard(depth)
            if retrace or not planner.needs_timing(depth):
                return compiled[depth](*args)
            start = self.clock()
            result = compiled[depth](*args)
            keras.ops.convert_to_numpy(keras.tree.flatten(result)[0])  # wait for it
            planner.record(depth, self.clock() - start)
            # Saved with the optimizer: a reload or resume decides the same.
            freeze.planner_state = planner.state()
            return result

        return train_function

    def _at_depth(self, depth):
        def prepare():
            self.depth = depth
        return prepare

    def callbacks(self, model):
        return [_FreezeScheduleCallback(self)]

    def summary(self, model):
        freeze = self.freeze
        if freeze.group_count == 1:
            if not model.trainable_variables:
                return "no freezing (the model trains no variable)"
            return "no freezing (the model has one block)" if freeze.fits_groups_to_model else "no freezing (one group)"
        decision = self.decision()
        if decision is None:
            return f"freezing in {freeze.group_count} groups: undecided (the full step is timed on the first steps)"
        phrase = f"freezing in {freeze.group_count} groups: {decision}"
        if decision.depths == (0,) and self.frozen_calls:
            # Timing a depth trains at it: those steps froze layers.
            phrase += f" ({self.frozen_calls} steps ran frozen at deeper depths while they were timed)"
        return phrase

    def decision(self):
        """The planner's `FreezeDecision`, or None before `fit`."""
        return None if self.planner is None else self.planner.decision()


class _FreezeScheduleCallback(keras.callbacks.Callback):
    """Sizes a `total_steps="auto"` schedule from `fit` and syncs the host-side
    step counter with the saved one."""

    def __init__(self, part):
        super().__init__()
        self.part = part

    def on_train_begin(self, logs=None):
        part, freeze = self.part, self.part.freeze
        epochs, steps = self.params.get("epochs"), self.params.get("steps")
        # An unknown length (a generator without len) takes the default
        # table, which is cycled: the schedule's statistics are the same.
        freeze.ensure_schedule(epochs * steps if steps else DEFAULT_TABLE_STEPS)
        # The run's end, in schedule steps, for the depth planner: the run
        # the user configured, across fit calls, else this fit's end.
        start = int(keras.ops.convert_to_numpy(freeze.freeze_step)) if freeze.built else 0
        fit_end = (start + epochs * steps) // part.steps_per_update if steps else None
        configured = freeze.run_steps
        end = fit_end if configured is None else max(configured, fit_end or 0)
        part.total_updates = end
        if part.planner is not None and part.planner.has_schedule:
            part.planner.total_steps = end
        if freeze.built:
            part.host_step = int(keras.ops.convert_to_numpy(freeze.freeze_step))
