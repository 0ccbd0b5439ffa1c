"""`BoostModel`: a `keras.Model` whose train step runs the boost algorithms.

The step, in order (one implementation; `keras_boost.backend` holds the few
lines each backend forces: TensorFlow's tape and cross-replica cond, torch
autograd, JAX statelessness):

    forward -> loss -> x loss scale -> gradients of the variables this step
    trains -> unscale -> finite on ALL replicas? -> apply, or skip the update
    -> update the loss scale

With loss scaling off (float32/bfloat16 models by default) the step is
Keras' own: gradients, then `optimizer.apply`, no extra work.
"""

import contextlib
import os
import threading
import time
import warnings
import weakref

import keras
from keras.src.trainers.data_adapters import data_adapter_utils
from keras.src.utils import io_utils

from keras_boost import backend as kb_backend
from keras_boost import config as config_lib
from keras_boost.auto_boost import AutoBoost
from keras_boost.errors import NoEffectWarning
from keras_boost.errors import reraise_with_context
from keras_boost.algorithms.accumulation import find_gradient_accumulation
from keras_boost.algorithms.adasum import adasum_status
from keras_boost.algorithms.dim_reduce import DimReduce
from keras_boost.algorithms.dim_reduce import flatten
from keras_boost.algorithms.dim_reduce import unflatten
from keras_boost.algorithms.freezing import DEFAULT_TABLE_STEPS
from keras_boost.algorithms.freezing import DepthPlanner
from keras_boost.algorithms.freezing import FreezeOptimizer
from keras_boost.algorithms.freezing import groups_from_blocks
from keras_boost.algorithms.freezing import model_blocks
from keras_boost.algorithms.loss_scaling import DynamicLossScale
from keras_boost.algorithms.loss_scaling import DynamicLossScaleOptimizer
from keras_boost.algorithms.loss_scaling import GroupLossScaleManager
from keras_boost.algorithms.loss_scaling import group_all_finite
from keras_boost.algorithms.loss_scaling import resolve_loss_scale
from keras_boost.algorithms.loss_scaling import unscale_by_group
from keras_boost.algorithms.loss_scaling import update_group_scales
from keras_boost.algorithms.optimizer_wrapper import find_in_chain
from keras_boost.algorithms.status import AlgorithmStatus
from keras_boost.layers.fused_batch_norm import FusedBatchNormalization
from keras_boost.optimizers.boost_optimizer import BoostOptimizer
from keras_boost.optimizers.centralization import exclude_grouped_kernels
from keras_boost.precision import PrecisionChoice
from keras_boost.precision import choose_precision
from keras_boost.precision import model_policies
from keras_boost.surgery import find_less_bn
from keras_boost.surgery.less_bn import REPORT_ATTR
from keras_boost.validation import check_model
from keras_boost.validation import check_optimizer
from keras_boost.validation import has_custom_train_step


def _uses_float16(model):
    policies = [model.dtype_policy] + [layer.dtype_policy for layer in model.layers]
    return any(p.compute_dtype == "float16" for p in policies)


# keras.models.clone_model rebuilds a functional model as
# `type(model)(inputs, outputs, name=model.name)` right after running the
# model's graph with copied layers (keras/src/models/cloning.py), which would
# reset a BoostModel to its defaults (level O0). So each BoostModel notes the
# symbolic outputs its graph made last (per thread, by weak reference), and a
# constructor called with exactly those outputs and no boost argument takes
# the settings of the model they were copied from.
_last_graph_run = threading.local()


def _note_graph_run(model, outputs):
    flat = keras.tree.flatten(outputs)
    if flat and all(isinstance(t, keras.KerasTensor) for t in flat):
        _last_graph_run.value = (weakref.ref(model), [weakref.ref(t) for t in flat])


def _graph_copy_source(outputs):
    """The BoostModel whose graph, run with copied layers, made `outputs`, or None."""
    source, refs = getattr(_last_graph_run, "value", (lambda: None, []))
    source, flat = source(), keras.tree.flatten(outputs)
    if source is None or len(flat) != len(refs) or any(t is not r() for t, r in zip(flat, refs)):
        return None
    # `model(x)` on Keras tensors also runs the graph, but its outputs come
    # from the model itself: a new model around it is not a copy of it.
    if any(getattr(t, "_keras_history", (None,))[0] is source for t in flat):
        return None
    return source


def _in_own_precision(boost, policies):
    """`boost` with `common.precision` set to what the model computes in."""
    config = boost.config
    config["common"]["precision"] = next(iter(policies)) if len(policies) == 1 else None
    return AutoBoost(boost.level, config)


def _chain_settings(config):
    """A resolved config without `common.precision`, which sets the model's
    dtypes, not the optimizer chain (a copy in another precision, e.g.
    `with_precision`'s, keeps its source's compiled chain)."""
    return {**config, "common": {**config["common"], "precision": None}}


def _graph_io(model):
    """The input and output structures (dicts, lists or tensors) of a graph model."""
    if isinstance(model, keras.Sequential):
        return model.inputs[0], model.outputs[0]
    try:
        return model.input, model.output
    except (AttributeError, ValueError):
        return None, None


@keras.saving.register_keras_serializable(package="keras_boost")
class BoostModel(keras.Model):
    """A functional Keras model trained with keras_boost's train step.

    Build it like a functional `keras.Model`, or wrap an existing built
    model with `BoostModel.from_model(model)`. Then `compile` with any Keras
    optimizer and `fit` as usual: `compile` wraps the optimizer in the
    level's chain itself (`boost.wrap` is not needed). `fit` logs
    `loss_scale` and `overflow` when dynamic loss scaling is on, and
    `freeze_depth` with gradient freezing.

    Args:
        inputs, outputs: as for a functional `keras.Model`.
        boost_level: `"O0"`, `"O1"` or `"O2"` (see `boost.AutoBoost`).
        boost_config_dict: `None`, a dict or a JSON file path.
        loss_scale: `"auto"` (dynamic scaling when the model computes in
            float16, e.g. under the `"mixed_float16"` policy), `"dynamic"`,
            `None` (off), or a `boost.DynamicLossScale`.
        precision_choice: the `boost.precision.PrecisionChoice` (or its
            config) that picked the model's precision, kept as the
            `precision_choice` attribute and saved with the model
            (`from_model` sets it with `common.precision="auto"`).
        **kwargs: passed to `keras.Model` (`name`, ...).

    `keras.models.clone_model(model)` returns a `BoostModel` with the same
    level, config, loss scale and precision choice (compiled like `model`
    when it is).

    Example:

    ```python
    inputs = keras.Input((28, 28, 1))
    x = keras.layers.Conv2D(16, 3, activation="relu")(inputs)
    outputs = keras.layers.Dense(10)(keras.layers.GlobalAveragePooling2D()(x))
    model = boost.BoostModel(inputs, outputs, boost_level="O1")
    model.compile(optimizer=keras.optimizers.SGD(0.1),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(x_train, y_train, epochs=1)
    ```
    """

    precision_choice = None  # set by from_model when "auto" measured it
    freeze_planner = None  # the DepthPlanner of the last train function, with freezing

    def __init__(
        self, *args, boost_level="O0", boost_config_dict=None, loss_scale="auto",
        precision_choice=None, **kwargs
    ):
        source = None
        if (boost_level, boost_config_dict, loss_scale, precision_choice) == ("O0", None, "auto", None):
            source = _graph_copy_source(args[1] if len(args) > 1 else kwargs.get("outputs"))
            if source is not None:  # keras.models.clone_model(source)
                settings = source._boost_arguments()
                boost_level, boost_config_dict = settings["boost_level"], settings["boost_config_dict"]
                loss_scale, precision_choice = settings["loss_scale"], settings["precision_choice"]
        # Validate everything before building anything.
        boost = AutoBoost(boost_level, boost_config_dict)
        config_lib.check_implemented(boost.config)
        if not (args or "inputs" in kwargs):
            raise TypeError(
                "BoostModel is built with the functional constructor, "
                "BoostModel(inputs, outputs, ...); to boost a Sequential or "
                "subclassed model use BoostModel.from_model(model)."
            )
        super().__init__(*args, **kwargs)
        if source is not None and model_policies(self) != model_policies(source):
            # A copy in another precision (boost.precision.with_precision):
            # the source's precision decision does not describe it.
            boost, precision_choice = _in_own_precision(boost, model_policies(self)), None
        self._auto_boost = boost
        if boost.config["boost"]["loss_scale_group"]:
            # The per-group scales replace the single one.
            if loss_scale not in ("auto", None):
                raise ValueError(
                    "loss_scale_group scales the gradients per group with the model's "
                    f"GroupLossScaleManager; it replaces loss_scale={loss_scale!r}: pass "
                    "loss_scale='auto' or None."
                )
            self._boost_group_manager().active = True  # a clear error now if the model has none
            loss_scale = None
        self._boost_loss_scale = resolve_loss_scale(loss_scale, _uses_float16(self))
        self._boost_loss_scale_arg = loss_scale
        self._boost_depth = 0
        self._boost_total_updates = None
        if isinstance(precision_choice, dict):
            precision_choice = PrecisionChoice.from_config(precision_choice)
        self.precision_choice = precision_choice
        if source is None:  # a copy's source was checked when it was built
            if boost.config["boost"]["less_bn"]:
                self._boost_warn_unprocessed_graph()
            self._boost_warn_unapplied_precision()

    def _boost_warn_unapplied_precision(self):
        precision = self._auto_boost.config["common"]["precision"]
        if precision is None or model_policies(self) <= {precision}:
            return
        warnings.warn(
            f"BoostModel(boost_config_dict={{'common': {{'precision': {precision!r}}}}}) trains the "
            f"layers it is given, which compute in {sorted(model_policies(self))}: build it with "
            "BoostModel.from_model(model, boost_config_dict=...) to get the precision applied.",
            NoEffectWarning,
            stacklevel=3,
        )

    def _boost_warn_unprocessed_graph(self):
        removable = find_less_bn(self).num_removed
        if removable:
            warnings.warn(
                f"BoostModel(boost_level={self.boost_level!r}) trains the graph it is "
                f"given, but LessBN would remove {removable} BatchNormalization "
                "layer(s) from it: build it with BoostModel.from_model(model, "
                "boost_level=...) (or boost.LessBN(model) first) to apply the surgery.",
                NoEffectWarning,
                stacklevel=3,
            )

    @classmethod
    def from_model(
        cls, model, boost_level="O0", boost_config_dict=None, loss_scale="auto",
        input_shape=None, name=None,
    ):
        """Wraps a built Keras model (functional, Sequential or subclassed).

        The new model shares its layers and weights with `model` (as
        `keras.Model(model.input, model.output)` does): training it trains
        `model`'s weights. Clone first (`keras.models.clone_model`) for an
        independent copy. When the level enables LessBN or fused batch norm
        and the surgery finds something to change, it runs first
        (`AutoBoost.network_auto_process_model`), which copies the weights
        into a new graph: `model` is then left untouched.

        A model whose class defines its own `train_step` (a VAE, a GAN) is
        refused: BoostModel's step would replace it. Compile such a model
        with `boost.wrap(optimizer, level)` instead; the optimizer-level
        algorithms (gradient centralization, freezing, accumulation) apply
        there.

        Args:
            model: a built `keras.Model`.
            boost_level, boost_config_dict, loss_scale: as for `BoostModel`.
            input_shape: input shape without the batch axis; needed only for
                a subclassed model built without a recorded input shape.
            name: name of the new model (default: `model.name + "_boost"`).
        """
        check_model(model)
        if has_custom_train_step(model) and not isinstance(model, BoostModel):
            raise TypeError(
                f"{type(model).__name__} {model.name!r} defines its own train_step or "
                "compute_loss, which BoostModel's train step would replace. Keep the model and compile it "
                f"with optimizer=boost.wrap(optimizer, {boost_level!r}): gradient "
                "centralization, freezing and accumulation act through the optimizer "
                "(call self.optimizer.scale_loss(loss) in your train_step for loss "
                "scaling); the pruned backward pass of freezing and the all-replica "
                "overflow check need BoostModel's train_step."
            )
        boost = AutoBoost(boost_level, boost_config_dict)
        flags = boost.config["boost"]
        if flags["less_bn"] or flags["fused_batch_norm"] or boost.config["common"]["precision"] is not None:
            model = boost.network_auto_process_model(model)
        choice = None
        if boost.config["common"]["precision"] == "auto":
            # The surgery attaches the choice to a model it copied; when it
            # kept the model itself (float32 kept), the choice it just made
            # is in the process cache: no new timing.
            choice = getattr(model, "precision_choice", None) or choose_precision(model)
            # The config keeps the decision, not "auto": a reload (or a clone)
            # computes in the chosen policy without timing again.
            boost_config_dict = boost.config
            boost_config_dict["common"]["precision"] = choice.policy
        inputs, outputs = _graph_io(model)
        if inputs is None:
            shape = input_shape
            if shape is None:
                shapes = list((getattr(model, "_build_shapes_dict", None) or {}).values())
                if len(shapes) != 1:
                    raise ValueError(
                        f"Cannot tell the input shape of subclassed model {model.name!r}; "
                        "pass input_shape=(...) (without the batch axis)."
                    )
                shape = tuple(shapes[0])[1:]
            inputs = keras.Input(shape=tuple(shape))
            outputs = model(inputs)
        boosted = cls(
            inputs=inputs,
            outputs=outputs,
            boost_level=boost_level,
            boost_config_dict=boost_config_dict,
            loss_scale=loss_scale,
            precision_choice=choice,
            name=name or f"{model.name}_boost",
        )
        if getattr(model, REPORT_ATTR, None) is not None:  # what the surgery did, to print
            setattr(boosted, REPORT_ATTR, getattr(model, REPORT_ATTR))
        return boosted

    # --- configuration seen by the step -------------------------------------

    @property
    def boost_level(self):
        return self._auto_boost.level

    @property
    def boost_config(self):
        """The fully resolved boost config of this model."""
        return self._auto_boost.config

    @property
    def loss_scale(self):
        """The `DynamicLossScale` settings, or None when scaling is off."""
        return self._boost_loss_scale

    # --- compile: the one place where the level meets the optimizer ---------

    def compile(self, optimizer="rmsprop", *args, **kwargs):
        """`keras.Model.compile`, with `optimizer` wrapped in this model's level.

        Any Keras optimizer (or its name) is wrapped once in the optimizer
        chain of `boost_level` / `boost_config_dict` (and in dynamic loss
        scaling when it is on). A `boost.wrap(optimizer)` without a level
        follows the model; one with a different explicit level or config
        raises `ValueError`. Keras' `LossScaleOptimizer` is refused: this
        model scales the loss itself, with the overflow check over all
        replicas (pass `loss_scale=boost.DynamicLossScale(...)` instead).
        """
        optimizer = self._boost_optimizer_for(optimizer)
        freeze = find_in_chain(optimizer, FreezeOptimizer)
        steps = kwargs.get("steps_per_execution", 1)
        if freeze is not None and steps != 1:
            raise ValueError(
                "Gradient freezing picks a compiled train function per step; it needs "
                f"steps_per_execution=1, got steps_per_execution={steps!r}. Compile with "
                "steps_per_execution=1 or switch grad_freeze off."
            )
        if find_in_chain(optimizer, DimReduce) is not None and self._boost_group_manager() is not None:
            raise ValueError(
                "DimReduce's step does not combine with loss_scale_group in this version: "
                "switch one of them off."
            )
        if self._boost_loss_scale is not None:
            # The chain scales the loss; Keras must not add a LossScaleOptimizer.
            kwargs["auto_scale_loss"] = False
        if freeze is not None:
            freeze.drive_from_model(self._boost_freeze_groups(freeze))
        optimizer.model_surgery_handled = True  # see _boost_warn_unprocessed_graph
        # GC sees variables only; mark this graph's depthwise/grouped kernels
        # (again after load_model, whose variables are new).
        exclude_grouped_kernels(self)
        super().compile(optimizer, *args, **kwargs)
        self._boost_build_optimizer()

    def _boost_build_optimizer(self):
        """Builds the whole chain for this model's variables (idempotent).

        The step applies parts of the chain directly (the loss scaler), so
        the chain is built here rather than on its first `apply`; its
        variables, and hence saving and loading, are then complete.
        """
        if self.optimizer is None or self.optimizer.built or not self.built:
            return
        tf_backend = keras.backend.backend() == "tensorflow"
        with self.distribute_strategy.scope() if tf_backend else contextlib.nullcontext():
            self.optimizer.build(self.trainable_variables)

    def compile_from_config(self, config):
        # Keras skips re-compiling a model whose compile() is overridden:
        # do what Keras' own version does, through this compile().
        self.compile(**keras.saving.deserialize_keras_object(config))

    def _boost_optimizer_for(self, optimizer):
        if isinstance(optimizer, (str, dict)):
            optimizer = keras.optimizers.get(optimizer)  # "sgd", a config dict
        check_optimizer(optimizer, where=f"BoostModel {self.name!r}'s optimizer")
        if isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
            raise ValueError(
                f"BoostModel {self.name!r} scales the loss itself (the overflow check runs "
                "over all replicas): compile it with the inner optimizer "
                f"({optimizer.inner_optimizer.name!r}) instead of a LossScaleOptimizer, and "
                "set the scaling with BoostModel(..., loss_scale=boost.DynamicLossScale("
                "initial_scale=...)) or loss_scale='dynamic'."
            )
        if not isinstance(optimizer, BoostOptimizer):
            return BoostOptimizer(
                optimizer, self.boost_level, self.boost_config, loss_scale=self._boost_loss_scale
            )
        if optimizer.boost_level is not None and (
            optimizer.boost_level != self.boost_level
            or _chain_settings(optimizer.boost_config) != _chain_settings(self.boost_config)
        ):
            raise ValueError(
                f"BoostModel {self.name!r} has boost_level={self.boost_level!r} but was compiled "
                f"with boost.wrap(..., {optimizer.boost_level!r}) and "
                f"{'the same level with another' if optimizer.boost_level == self.boost_level else 'its'}"
                " config; set the level and config in one place: BoostModel wraps a plain "
                "optimizer itself, and boost.wrap(optimizer) without a level follows the model."
            )
        matches = optimizer.boost_level is not None and optimizer.loss_scale == self._boost_loss_scale
        if matches:
            return optimizer  # e.g. the saved chain, re-compiled by load_model
        if optimizer.built or optimizer.user_optimizer is None:
            raise ValueError(
                f"The optimizer {optimizer.name!r} was already built for other boost settings "
                f"(level {optimizer.boost_level!r}, loss scale {optimizer.loss_scale}) than "
                f"BoostModel {self.name!r} (level {self.boost_level!r}, loss scale "
                f"{self._boost_loss_scale}); compile with a fresh optimizer."
            )
        return BoostOptimizer(
            optimizer.user_optimizer, self.boost_level, self.boost_config,
            loss_scale=self._boost_loss_scale,
        )

    def check_adasum_enable(self):
        """Whether AdaSum combines the replicas' updates in this setting.

        MindSpore's name. Returns an `AlgorithmStatus`: truthy when AdaSum acts,
        with a `reason` that says why not otherwise (AdaSum off in the
        config, one replica, a `device_number` that does not fit the
        strategy, a hierarchical layout with one node).

        Example:

        ```python
        with tf.distribute.MirroredStrategy().scope():
            model = boost.BoostModel(inputs, outputs, boost_level="O2")
        status = model.check_adasum_enable()
        print(bool(status), status.reason)
        ```
        """
        config = self.boost_config
        if not config["boost"]["adasum"]:
            return AlgorithmStatus(False, f"adasum is off in this model's config (level {self.boost_level!r})")
        tf_backend = keras.backend.backend() == "tensorflow"
        with self.distribute_strategy.scope() if tf_backend else contextlib.nullcontext():
            replicas, local = kb_backend.current().replica_layout()
        return adasum_status(
            replicas, local, config["adasum"]["hierarchical"], config["common"]["device_number"]
        )

    def _boost_freeze_groups(self, freeze):
        """The freeze groups by layer structure, as indices into trainable_variables.

        Computed at each compile, from the variables trainable then. None
        when the optimizer has its groups, or the model trains nothing (one
        group, of no variable, made at build).
        """
        spec = freeze.schedule_spec
        if spec is None or freeze.groups_given or not self.trainable_variables:
            return None
        groups = groups_from_blocks(
            model_blocks(self), spec["param_groups"], where=f"model {self.name!r}",
            fit=freeze.fits_groups_to_model,
        )
        positions = {id(v): i for i, v in enumerate(self.trainable_variables)}
        return [[positions[id(v)] for v in g] for g in groups]

    def _boost_scaler(self):
        """The chain's DynamicLossScaleOptimizer, or None."""
        return find_in_chain(getattr(self, "optimizer", None), DynamicLossScaleOptimizer)

    def _boost_group_manager(self):
        """The model's GroupLossScaleManager when loss_scale_group is on, else None."""
        if not self._auto_boost.config["boost"]["loss_scale_group"]:
            return None
        managers = [layer for layer in self._flatten_layers(include_self=False)
                    if isinstance(layer, GroupLossScaleManager)]
        if len(managers) != 1:
            raise ValueError(
                f"loss_scale_group needs exactly one boost.layers.GroupLossScaleManager called at "
                f"the group boundaries of the model; {self.name!r} has {len(managers)}."
            )
        return managers[0]

    def _boost_group_scaled_apply(self, seam, manager, grads, trained):
        """Unscales each gradient by the scale its group used, applies the
        update only if no group overflowed (on any replica), then updates
        the scales. Returns `(finite, group_finite)`."""
        scales = manager.scales.value
        group_of = manager.group_of(trained, self)
        grads = unscale_by_group(list(grads), scales, group_of)
        group_finite = seam.all_replicas(group_all_finite(grads, group_of, manager.num_groups))
        finite = keras.ops.all(group_finite)
        seam.apply_if(finite, self.optimizer.apply, (grads, trained))
        manager.scales.assign(update_group_scales(scales, group_finite))
        return finite

    def _boost_trained_variables(self):
        """The variables this step differentiates and updates.

        With gradient freezing, the group of the depth this train function
        was built for: the frozen prefix is left out, so its backward pass is
        never built.
        """
        freeze = self._boost_freeze_optimizer()
        if freeze is None:
            return list(self.trainable_variables)
        variables = self.trainable_variables
        return [variables[i] for i in freeze.trained_indices(self._boost_depth)]

    def _boost_freeze_optimizer(self):
        """The FreezeOptimizer in the optimizer chain, or None."""
        return find_in_chain(getattr(self, "optimizer", None), FreezeOptimizer)

    def _boost_check_compiled(self):
        optimizer = getattr(self, "optimizer", None)
        if optimizer is not None and not isinstance(optimizer, BoostOptimizer):
            # Only reachable by assigning model.optimizer by hand.
            raise ValueError(
                f"BoostModel {self.name!r}: model.optimizer was replaced after compile by "
                f"{type(optimizer).__name__}; compile again instead."
            )

    # --- the train step ----------------------------------------------------

    def make_train_function(self, force=False):
        self._boost_check_compiled()
        self._boost_build_optimizer()
        if not self.trainable_variables:
            # Keras' own train step says the same (once per trace); this
            # step then only runs the forward pass and the metrics.
            warnings.warn("The model does not have any trainable weights.", stacklevel=2)
        freeze = self._boost_freeze_optimizer()
        if freeze is None:
            return super().make_train_function(force=force)
        if self.train_function is not None and not force:
            return self.train_function
        return self._boost_make_freeze_dispatch(freeze)

    def _boost_make_freeze_dispatch(self, freeze):
        """One train function per freeze depth; the host-side schedule picks
        one per step (no retracing), through a `DepthPlanner`.

        All are created here, before `fit` starts (on JAX, `fit` then takes
        the variables' values into its state); each is traced on first use,
        and in adaptive mode only once the planner expects it to pay back
        its trace (see `keras_boost.freeze_planner`).
        """
        compiled = [self._boost_compile_at_depth(d) for d in range(freeze.group_count)]
        self._boost_step = int(keras.ops.convert_to_numpy(freeze.freeze_step))
        # With accumulation, a window of k micro-steps is one update: the
        # schedule advances per window, so every micro-step of a window
        # trains the same group.
        steps_per_update = _steps_per_update(self.optimizer)
        spec = freeze.schedule_spec
        pinned = spec["depths"] if spec and spec["depths"] != "auto" else None
        planner = DepthPlanner(
            [freeze.trained_indices(d) for d in range(freeze.group_count)],
            adaptive=bool(spec and spec["adaptive_depths"]),
            min_run_saving=spec["min_run_saving"] if spec else 0.0,
            calls_per_step=steps_per_update,
            depths=pinned,
            state=None if pinned else freeze.planner_state,
        )
        self.freeze_planner = planner

        def train_function(*args):
            if not planner.has_schedule:  # fit sized it (on_train_begin)
                planner.set_schedule(freeze.schedule_table(), self._boost_total_updates)
            step = self._boost_step // steps_per_update
            depth = planner.choose(step, freeze.depth_at(step))
            self._boost_step += 1
            self._boost_depth = depth
            if not planner.needs_timing(depth):
                return compiled[depth](*args)
            start = time.perf_counter()
            result = compiled[depth](*args)
            keras.ops.convert_to_numpy(keras.tree.flatten(result)[0])  # wait for it
            planner.record(depth, time.perf_counter() - start)
            # Saved with the optimizer: a reload or resume decides the same.
            freeze.planner_state = planner.state()
            return result

        self.train_function = train_function
        return train_function

    def _boost_compile_at_depth(self, depth):
        """Keras' own train function, built around a step fixed at `depth`.

        The step is a fresh function object per depth: `jax.jit` caches
        traces by function, so reusing `self.train_step` would hand every
        depth the first depth's trace.
        """

        def train_step_at_depth(*args):
            self._boost_depth = depth
            return type(self).train_step(self, *args)

        object.__setattr__(self, "train_step", train_step_at_depth)
        try:
            self.train_function = None
            super().make_train_function(force=True)
        finally:
            object.__delattr__(self, "train_step")
        return self.train_function

    def fit(self, *args, callbacks=None, **kwargs):
        callbacks = list(callbacks or [])
        if self._boost_freeze_optimizer() is not None:
            callbacks.append(_FreezeScheduleCallback())
        callbacks.append(_BoostReportCallback())
        return super().fit(*args, callbacks=callbacks, **kwargs)

    # --- what the level did --------------------------------------------------

    @property
    def freeze_decision(self):
        """What gradient freezing runs, as a `FreezeDecision`: the depths that
        run and why (measured, pinned by `grad_freeze.depths`, or MindSpore's
        schedule). None without freezing, before `fit`, and while the full
        step is still being timed."""
        return None if self.freeze_planner is None else self.freeze_planner.decision()

    def boost_summary(self):
        """One line saying what the level did on this model ("" at O0 with
        nothing on); `fit` prints it at its end when `verbose` is not 0.

        Example:

        ```python
        model.fit(x, y, epochs=3, verbose=0)
        print(model.boost_summary())
        # keras_boost O1 on 'net_boost': LessBN removed 4 of 6 BatchNormalization; ...
        ```
        """
        config = self.boost_config
        if not (config_lib.enabled_algorithms(config) or config["common"]["precision"]
                or self._boost_loss_scale is not None):
            return ""
        parts = [part for part in (self._boost_surgery_summary(), self._boost_freeze_summary(),
                                   self._boost_precision_summary()) if part]
        scaler = self._boost_scaler()
        if scaler is not None:
            parts.append(f"dynamic loss scaling (scale now {float(keras.ops.convert_to_numpy(scaler.dynamic_scale)):g})")
        elif config["boost"]["loss_scale_group"]:
            parts.append("loss scaling per group (GroupLossScaleManager)")
        else:
            parts.append("no loss scaling")
        return f"keras_boost {self.boost_level} on {self.name!r}: " + "; ".join(parts) + "."

    def _boost_surgery_summary(self):
        report = getattr(self, REPORT_ATTR, None)
        fused = sum(isinstance(layer, FusedBatchNormalization) for layer in self._flatten_layers())
        parts = []
        if report is not None:
            done = [f"removed {report.num_removed} of {report.num_bn} BatchNormalization"] if report.num_bn else []
            done += ["NormalizedDense head"] if report.head else []
            parts.append("LessBN " + (", ".join(done) or "changed nothing"))
        elif self.boost_config["boost"]["less_bn"]:
            removable = find_less_bn(self).num_removed
            parts.append(f"LessBN not applied ({removable} BatchNormalization it would remove: build with "
                         "BoostModel.from_model)" if removable else "no BatchNormalization for LessBN to remove")
        if fused:
            parts.append(f"{fused} fused BatchNormalization")
        return "; ".join(parts)

    def _boost_freeze_summary(self):
        freeze = self._boost_freeze_optimizer()
        if freeze is None:
            return ""
        if freeze.group_count == 1:
            if not self.trainable_variables:
                return "no freezing (the model trains no variable)"
            return "no freezing (the model has one block)" if freeze.fits_groups_to_model else "no freezing (one group)"
        decision = self.freeze_decision or "undecided (the full step is timed on the first steps)"
        return f"freezing in {freeze.group_count} groups: {decision}"

    def _boost_precision_summary(self):
        if self.precision_choice is not None:
            return self.precision_choice.summary_line()
        policies = sorted(model_policies(self))
        return "" if policies == ["float32"] else f"precision {', '.join(policies)}"

    def train_step(self, *args):
        seam = kb_backend.current()
        with reraise_with_context(f"running BoostModel {self.name!r}'s train step"):
            if keras.backend.backend() == "jax":
                return seam.train_step(self, *args)
            return self._boost_stateful_train_step(seam, *args)

    def _boost_stateful_train_step(self, seam, data):
        dim_reduce = self._boost_dim_reduce()
        if dim_reduce is not None:
            return self._boost_dim_reduce_step(seam, dim_reduce, data)
        x, y, sample_weight = data_adapter_utils.unpack_x_y_sample_weight(data)
        trained = self._boost_trained_variables()
        scaler = self._boost_scaler()
        manager = self._boost_group_manager()
        if scaler is not None or manager is not None:
            # The forward pass updates state (BatchNorm moving statistics);
            # an overflowing step must leave it untouched too.
            forward_state = [v for v in self.non_trainable_variables
                             if manager is None or v is not manager.scales]
            saved = [keras.ops.copy(v.value) for v in forward_state]
        y_pred, grads = seam.loss_and_grads(self, x, y, sample_weight, trained, self.optimizer)
        extra_logs = {}
        if manager is not None:
            finite = self._boost_group_scaled_apply(seam, manager, grads, trained)
            for variable, value in zip(forward_state, saved):
                variable.assign(keras.ops.where(finite, variable.value, value))
            extra_logs = {"overflow": 1.0 - keras.ops.cast(finite, "float32")}
        elif scaler is None:
            seam.apply(self.optimizer.apply, (grads, trained))
        else:
            finite = seam.apply(scaler.apply_and_check, (grads, trained))
            for variable, value in zip(forward_state, saved):
                variable.assign(keras.ops.where(finite, variable.value, value))
            extra_logs = {
                "loss_scale": scaler.dynamic_scale.value,
                "overflow": 1.0 - keras.ops.cast(finite, "float32"),
            }
        freeze = self._boost_freeze_optimizer()
        if freeze is not None:  # the schedule advances on every step
            freeze.freeze_step.assign_add(1)
            extra_logs["freeze_depth"] = keras.ops.convert_to_tensor(self._boost_depth, "int32")
        logs = {**self.compute_metrics(x, y, y_pred, sample_weight), **extra_logs}
        return self._boost_distributed_logs(logs)

    def _boost_dim_reduce(self):
        """The chain's DimReduce (stage 2), or None."""
        return find_in_chain(getattr(self, "optimizer", None), DimReduce)

    def _boost_dim_reduce_step(self, seam, dim_reduce, data):
        """Gradient, subspace BFGS with the line search on this batch, residual
        momentum; the trial forward passes leave the BN statistics as the
        step's own forward pass set them.

        Under tf.distribute every replica runs this on its share of the
        global batch: the gradient, the loss and each trial loss are the
        global batch's (`seam.global_batch_sum`), so every replica takes the
        same step on its copy of the (mirrored) weights and state.
        """
        x, y, sample_weight = data_adapter_utils.unpack_x_y_sample_weight(data)
        variables = list(self.trainable_variables)
        y_pred, grads = seam.loss_and_grads(self, x, y, sample_weight, variables, self.optimizer)

        def update():
            loss = self._compute_loss(x=x, y=y, y_pred=y_pred, sample_weight=sample_weight, training=True)
            loss, gradient = seam.global_batch_sum([loss, flatten(grads)])
            forward_state = list(self.non_trainable_variables)
            saved = [keras.ops.copy(v.value) for v in forward_state]

            def trial_loss(flat):
                for variable, value in zip(variables, unflatten(flat, variables)):
                    variable.assign(value)
                trial = self(x, training=True) if self._call_has_training_arg else self(x)
                value = self._compute_loss(x=x, y=y, y_pred=trial, sample_weight=sample_weight, training=True)
                for variable, old in zip(forward_state, saved):
                    variable.assign(old)
                return seam.global_batch_sum([value])[0]

            state = [v.value for v in dim_reduce.state_variables()]
            weights = flatten([v.value for v in variables])
            new_weights, new_state, accepted = dim_reduce.step(
                dim_reduce.basis.value, state, weights, gradient, loss, trial_loss
            )
            for variable, value in zip(variables, unflatten(new_weights, variables)):
                variable.assign(value)
            for variable, value in zip(dim_reduce.state_variables(), new_state):
                variable.assign(value)
            dim_reduce.accepted_steps.assign_add(keras.ops.cast(accepted, "int32"))
            dim_reduce.iterations.assign_add(1)
            return accepted

        accepted = seam.apply(update, ())
        logs = self.compute_metrics(x, y, y_pred, sample_weight)
        logs = {**logs, "line_search_accepted": keras.ops.cast(accepted, "float32")}
        return self._boost_distributed_logs(logs)

    def check_dim_reduce_enable(self):
        """Whether DimReduce (stage 2) acts here (MindSpore's name): an
        `AlgorithmStatus`, truthy when it does, with the reason.

        Any number of tf.distribute replicas is fine (each step uses the
        global batch's gradient and losses); several workers need
        `pca_mat_path`, through which the chief shares the basis.

        Example:

        ```python
        status = stage2.check_dim_reduce_enable()
        print(bool(status), status.reason)
        ```
        """
        if not self.boost_config["boost"]["dim_reduce"]:
            return AlgorithmStatus(False, f"dim_reduce is off in this model's config (level {self.boost_level!r})")
        settings = self.boost_config["dim_reduce"]
        path, directory = settings["pca_mat_path"], settings["weight_load_dir"]
        chief, workers = self._boost_worker_role()
        if workers > 1 and not path:
            return AlgorithmStatus(False, (
                f"{workers} workers share the basis through pca_mat_path, which is not set; set it "
                "to a path every worker reads (the chief writes it)"
            ))
        replicas = self._boost_replicas_in_sync()
        where = f" on {replicas} replicas (global-batch gradient and losses)" if replicas > 1 else ""
        if not (path and os.path.isfile(path)) and not chief:
            return AlgorithmStatus(True, (
                f"DimReduce stage 2{where}; this worker reads the basis the chief writes to "
                f"{path!r}, waiting up to timeout={settings['timeout']} s"
            ))
        if not ((path and os.path.isfile(path)) or (directory and os.path.isdir(directory))):
            return AlgorithmStatus(False, (
                "no stage-1 basis: neither pca_mat_path nor weight_load_dir exists; record the "
                "trajectory with boost.callbacks.WeightTrajectory first"
            ))
        return AlgorithmStatus(True, f"DimReduce stage 2{where} (exclusive: the other algorithms are off)")

    def _boost_worker_role(self):
        """`(is_chief, workers)` of this process under the model's strategy."""
        tf_backend = keras.backend.backend() == "tensorflow"
        with self.distribute_strategy.scope() if tf_backend else contextlib.nullcontext():
            return kb_backend.current().worker_role()

    def _boost_replicas_in_sync(self):
        if keras.backend.backend() != "tensorflow":
            return 1
        return self.distribute_strategy.num_replicas_in_sync

    def test_step(self, *args):
        return self._boost_distributed_logs(super().test_step(*args))

    def _boost_distributed_logs(self, logs):
        if keras.backend.backend() == "tensorflow":
            seam = kb_backend.current()
            if seam.is_multi_worker(self.distribute_strategy):
                return seam.logs_for_multi_worker(logs)
        return logs

    def _maybe_symbolic_build(self, iterator=None, data_batch=None):
        seam = kb_backend.current()
        strategy = getattr(self, "_distribute_strategy", None)
        if iterator is None or strategy is None or not seam.is_multi_worker(strategy):
            return super()._maybe_symbolic_build(iterator=iterator, data_batch=data_batch)
        for _, _, it in iterator:
            data_batch = seam.first_local_batch(strategy, next(it))
            break
        with strategy.scope():
            self._symbolic_build(data_batch=data_batch)

    # --- serialization -----------------------------------------------------

    def get_config(self):
        config = super().get_config()
        loss_scale = self._boost_loss_scale_arg
        if isinstance(loss_scale, DynamicLossScale):
            loss_scale = loss_scale.get_config()
        choice = self.precision_choice
        config.update(self._boost_arguments(), loss_scale=loss_scale,
                      precision_choice=None if choice is None else choice.get_config())
        return config

    def _boost_arguments(self):
        """The constructor's boost arguments that give a model these settings."""
        return {
            "boost_level": self.boost_level,
            "boost_config_dict": self.boost_config,
            "loss_scale": self._boost_loss_scale_arg,
            "precision_choice": self.precision_choice,
        }

    def _run_through_graph(self, *args, **kwargs):
        outputs = super()._run_through_graph(*args, **kwargs)
        _note_graph_run(self, outputs)  # for keras.models.clone_model (see _graph_copy_source)
        return outputs


def _steps_per_update(optimizer):
    accumulation = find_gradient_accumulation(optimizer)
    return accumulation.max_accumulation_step if accumulation else 1


class _FreezeScheduleCallback(keras.callbacks.Callback):
    """Sizes a `total_steps="auto"` schedule from `fit` and syncs the host-side
    step counter with the saved one."""

    def on_train_begin(self, logs=None):
        freeze = self.model._boost_freeze_optimizer()
        epochs, steps = self.params.get("epochs"), self.params.get("steps")
        # An unknown length (a generator without len) takes the default
        # table, which is cycled: the schedule's statistics are the same.
        freeze.ensure_schedule(epochs * steps if steps else DEFAULT_TABLE_STEPS)
        # The run's end, in schedule steps, for the depth planner.
        start = int(keras.ops.convert_to_numpy(freeze.freeze_step)) if freeze.built else 0
        end = (start + epochs * steps) // _steps_per_update(self.model.optimizer) if steps else None
        self.model._boost_total_updates = end
        planner = getattr(self.model, "freeze_planner", None)
        if planner is not None and planner.has_schedule:
            planner.total_steps = end
        if freeze.built:
            self.model._boost_step = int(keras.ops.convert_to_numpy(freeze.freeze_step))


class _BoostReportCallback(keras.callbacks.Callback):
    """Prints `BoostModel.boost_summary()` once, at the end of `fit`, when
    `verbose` is not 0 (after the progress bar, through Keras' printer)."""

    def on_train_end(self, logs=None):
        line = self.model.boost_summary()
        if line and self.params.get("verbose"):
            io_utils.print_msg(line)
