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
import warnings

import keras
from keras.src.trainers.data_adapters import data_adapter_utils

from keras_boost import auto_boost
from keras_boost import backend as kb_backend
from keras_boost import ops as kb_ops
from keras_boost.errors import NoEffectWarning
from keras_boost.loss_scale import DynamicLossScale
from keras_boost.loss_scale import resolve_loss_scale
from keras_boost.optimizers.base import find_in_chain
from keras_boost.optimizers.boost_optimizer import BoostOptimizer
from keras_boost.optimizers.accumulation import find_gradient_accumulation
from keras_boost.optimizers.freeze import FreezeOptimizer


def _uses_float16(model):
    policies = [model.dtype_policy] + [layer.dtype_policy for layer in model.layers]
    return any(p.compute_dtype == "float16" for p in policies)


@keras.saving.register_keras_serializable(package="keras_boost")
class BoostModel(keras.Model):
    """A functional Keras model trained with keras_boost's train step.

    Build it like a functional `keras.Model`, or wrap an existing built
    model with `BoostModel.from_model(model)`. Then `compile` and `fit` as
    usual; `fit` logs `loss_scale` and `overflow` when dynamic loss scaling
    is on.

    Args:
        inputs, outputs: as for a functional `keras.Model`.
        boost_level: `"O0"`, `"O1"` or `"O2"` (see `boost.AutoBoost`).
        boost_config_dict: `None`, a dict or a JSON file path.
        loss_scale: `"auto"` (dynamic scaling when the model computes in
            float16, e.g. under the `"mixed_float16"` policy), `"dynamic"`,
            `None` (off), or a `boost.DynamicLossScale`.
        **kwargs: passed to `keras.Model` (`name`, ...).

    Example:

    ```python
    inputs = keras.Input((28, 28, 1))
    x = keras.layers.Conv2D(16, 3, activation="relu")(inputs)
    outputs = keras.layers.Dense(10)(keras.layers.GlobalAveragePooling2D()(x))
    model = boost.BoostModel(inputs, outputs, boost_level="O0")
    model.compile(optimizer=boost.wrap(keras.optimizers.SGD(0.1)),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(x_train, y_train, epochs=1)
    ```
    """

    def __init__(
        self, *args, boost_level="O0", boost_config_dict=None, loss_scale="auto", **kwargs
    ):
        # Validate everything before building anything.
        boost = auto_boost.AutoBoost(boost_level, boost_config_dict)
        auto_boost.check_implemented(boost.config)
        if not (args or "inputs" in kwargs):
            raise TypeError(
                "BoostModel is built with the functional constructor, "
                "BoostModel(inputs, outputs, ...); to boost a Sequential or "
                "subclassed model use BoostModel.from_model(model)."
            )
        super().__init__(*args, **kwargs)
        self._auto_boost = boost
        self._boost_loss_scale = resolve_loss_scale(loss_scale, _uses_float16(self))
        self._boost_loss_scale_arg = loss_scale
        if boost.config["boost"]["less_bn"]:
            self._boost_warn_unprocessed_graph()
        self._boost_scale_state = []
        if self._boost_loss_scale is not None:
            settings = self._boost_loss_scale
            self._boost_scale_state = [
                self.add_weight(
                    shape=(),
                    dtype="float32",
                    initializer=keras.initializers.Constant(settings.initial_scale),
                    trainable=False,
                    name="loss_scale",
                ),
                self.add_weight(
                    shape=(),
                    dtype="int32",
                    initializer="zeros",
                    trainable=False,
                    name="loss_scale_good_steps",
                ),
            ]

    def _boost_warn_unprocessed_graph(self):
        from keras_boost.surgery import find_less_bn

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
        `keras.Model(model.inputs, model.outputs)` does): training it trains
        `model`'s weights. Clone first (`keras.models.clone_model`) for an
        independent copy. When the level enables LessBN, the surgery runs
        first (`AutoBoost.network_auto_process_model`), which copies the
        weights into a new graph: `model` is then left untouched.

        Args:
            model: a built `keras.Model`.
            boost_level, boost_config_dict, loss_scale: as for `BoostModel`.
            input_shape: input shape without the batch axis; needed only for
                a subclassed model built without a recorded input shape.
            name: name of the new model (default: `model.name + "_boost"`).
        """
        auto_boost.check_model(model)
        boost = auto_boost.AutoBoost(boost_level, boost_config_dict)
        if boost.config["boost"]["less_bn"] and isinstance(model, keras.Model):
            model = boost.network_auto_process_model(model)
        try:
            inputs, outputs = model.inputs, model.outputs
        except (AttributeError, ValueError):
            inputs = outputs = None
        if not inputs:
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
            name=name or f"{model.name}_boost",
        )
        report = getattr(model, "less_bn_report", None)
        if report is not None:
            boosted.less_bn_report = report  # what LessBN removed, to print
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

    def _boost_update_optimizer(self):
        """The optimizer the step applies, and its offset in `optimizer.variables`.

        A `LossScaleOptimizer` (Keras wraps one automatically under
        "mixed_float16") is bypassed: this model scales the loss itself, with
        the finite check reduced over all replicas.
        """
        optimizer = self.optimizer
        if isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
            if self._boost_loss_scale is None:
                raise ValueError(
                    "BoostModel does its own loss scaling: pass "
                    "loss_scale='dynamic' (or a boost.DynamicLossScale) to "
                    "BoostModel instead of wrapping the optimizer in "
                    "LossScaleOptimizer."
                )
            return optimizer.inner_optimizer, len(optimizer._variables)
        return optimizer, 0

    def _boost_check_optimizer(self):
        optimizer, _ = self._boost_update_optimizer()
        if isinstance(optimizer, BoostOptimizer):
            default = auto_boost.AutoBoost().config
            mine = self._auto_boost.config
            theirs = optimizer.boost_config
            if mine != default and theirs != default and mine != theirs:
                raise ValueError(
                    f"BoostModel(boost_level={self.boost_level!r}) was compiled with "
                    f"boost.wrap(..., {optimizer.boost_level!r}) and a different "
                    "config; set the level and config in one place."
                )

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

    def _boost_freeze_counter(self):
        freeze = self._boost_freeze_optimizer()
        return None if freeze is None else freeze.freeze_step

    def _boost_prepare(self):
        """Takes over what the optimizer chain cannot do alone: the model
        surgery check and the freeze schedule (groups by layer structure,
        host-side dispatch). Idempotent; runs before the optimizer is built.
        Returns the FreezeOptimizer, or None."""
        wrapper = find_in_chain(self.optimizer, BoostOptimizer)
        if wrapper is not None:
            wrapper.model_surgery_handled = True  # see _boost_warn_unprocessed_graph
        freeze = self._boost_freeze_optimizer()
        if freeze is None:
            if self._auto_boost.config["boost"]["grad_freeze"]:
                raise ValueError(
                    f"BoostModel(boost_level={self.boost_level!r}) enables gradient "
                    "freezing: compile with optimizer=boost.wrap(optimizer, "
                    f"{self.boost_level!r}) so that its schedule state is saved."
                )
            return None
        if self.steps_per_execution > 1:
            raise ValueError(
                "Gradient freezing picks a compiled train function per step; it "
                f"needs steps_per_execution=1, got {self.steps_per_execution}."
            )
        freeze.external_schedule = True
        if freeze._group_spec is None and freeze._schedule_spec is not None:
            from keras_boost.grad_freeze import GradientFreeze

            n = freeze._schedule_spec["param_groups"]
            groups = GradientFreeze(param_groups=n).split_parameters_groups(self, n)
            freeze._group_spec = [[v.path for v in g] for g in groups]
        return freeze

    def _boost_forward_state(self):
        """Non-trainable variables the forward pass may update."""
        own = {id(v) for v in self._boost_scale_state}
        return [v for v in self.non_trainable_variables if id(v) not in own]

    def _boost_next_scale(self, scale, good_steps, finite):
        settings = self._boost_loss_scale
        return kb_ops.update_loss_scale(
            scale, good_steps, finite,
            settings.growth_factor, settings.scale_window, settings.min_scale,
        )

    # --- the train step ----------------------------------------------------

    def _symbolic_build(self, *args, **kwargs):
        if getattr(self, "optimizer", None) is not None:
            self._boost_prepare()
        return super()._symbolic_build(*args, **kwargs)

    def make_train_function(self, force=False):
        self._boost_check_optimizer()
        freeze = self._boost_prepare()
        if self.optimizer is not None and not self.optimizer.built and self.built:
            # The step may apply only an inner optimizer (it bypasses a
            # LossScaleOptimizer); build the whole chain now so that its
            # variables, and hence saving and loading, are complete.
            tf_backend = keras.backend.backend() == "tensorflow"
            with self.distribute_strategy.scope() if tf_backend else contextlib.nullcontext():
                self.optimizer.build(self.trainable_variables)
        if freeze is None:
            return super().make_train_function(force=force)
        if self.train_function is not None and not force:
            return self.train_function
        return self._boost_make_freeze_dispatch(freeze)

    def _boost_make_freeze_dispatch(self, freeze):
        """One train function per freeze depth; the host-side schedule picks
        one per step (no retracing).

        All are created here, before `fit` starts (on JAX, `fit` then takes
        the variables' values into its state); each is traced on first use.
        """
        compiled = [self._boost_compile_at_depth(d) for d in range(freeze.group_count)]
        self._boost_step = int(keras.ops.convert_to_numpy(freeze.freeze_step))
        # With accumulation, a window of k micro-steps is one update: the
        # schedule advances per window, so every micro-step of a window
        # trains the same group.
        accumulation = find_gradient_accumulation(self.optimizer)
        steps_per_update = accumulation.max_accumulation_step if accumulation else 1

        def train_function(*args):
            depth = freeze.depth_at(self._boost_step // steps_per_update)
            self._boost_step += 1
            self._boost_depth = depth
            return compiled[depth](*args)

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
        return super().fit(*args, callbacks=callbacks, **kwargs)

    def train_step(self, *args):
        seam = kb_backend.current()
        if keras.backend.backend() == "jax":
            return seam.train_step(self, *args)
        (data,) = args
        x, y, sample_weight = data_adapter_utils.unpack_x_y_sample_weight(data)
        optimizer, _ = self._boost_update_optimizer()
        trained = self._boost_trained_variables()
        scale = self._boost_scale_state[0] if self._boost_scale_state else None
        if scale is not None:
            # The forward pass updates state (BatchNorm moving statistics);
            # an overflowing step must leave it untouched too.
            forward_state = self._boost_forward_state()
            saved = [keras.ops.copy(v.value) for v in forward_state]
        _, y_pred, grads = seam.scaled_loss_and_grads(
            self, x, y, sample_weight, trained, optimizer, scale
        )
        extra_logs = {}
        if scale is None:
            seam.apply(optimizer.apply, (grads, trained))
        else:
            scale_value, good_steps = (v.value for v in self._boost_scale_state)
            grads = kb_ops.unscale(grads, scale_value)
            finite = seam.all_replicas(kb_ops.all_finite(grads))
            seam.apply_if(finite, optimizer.apply, (grads, trained))
            for variable, value in zip(forward_state, saved):
                variable.assign(keras.ops.where(finite, variable.value, value))
            new_scale, new_steps = self._boost_next_scale(scale_value, good_steps, finite)
            self._boost_scale_state[0].assign(new_scale)
            self._boost_scale_state[1].assign(new_steps)
            extra_logs = {
                "loss_scale": new_scale,
                "overflow": 1.0 - keras.ops.cast(finite, "float32"),
            }
        counter = self._boost_freeze_counter()
        if counter is not None:  # the schedule advances on every step
            counter.assign_add(1)
            extra_logs["freeze_depth"] = keras.ops.convert_to_tensor(float(self._boost_depth))
        logs = {**self.compute_metrics(x, y, y_pred, sample_weight), **extra_logs}
        return self._boost_distributed_logs(logs)

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
        config.update(
            boost_level=self.boost_level,
            boost_config_dict=self.boost_config,
            loss_scale=loss_scale,
        )
        return config


class _FreezeScheduleCallback(keras.callbacks.Callback):
    """Sizes a `total_steps="auto"` schedule from `fit` and syncs the host-side
    step counter with the saved one."""

    def on_train_begin(self, logs=None):
        freeze = self.model._boost_freeze_optimizer()
        epochs, steps = self.params.get("epochs"), self.params.get("steps")
        if freeze.train_strategy is None and freeze._schedule_spec is not None:
            if steps:
                freeze.ensure_schedule(epochs * steps)
            else:
                warnings.warn(
                    "Gradient freezing: fit does not know its steps per epoch, so "
                    "total_steps='auto' falls back to 65536 steps.",
                    stacklevel=2,
                )
                freeze.ensure_schedule(65536)
        if freeze.built:
            self.model._boost_step = int(keras.ops.convert_to_numpy(freeze.freeze_step))
