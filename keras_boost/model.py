"""`BoostModel`: a `keras.Model` whose train step runs the boost algorithms.

The step composes the step parts of the compiled chain (see
`keras_boost.algorithms.step_part`; this module names no algorithm):

    forward -> loss -> gradients of the variables the parts let this step
    train -> the update (its owner's, e.g. the loss scaler's skip on
    overflow, else `optimizer.apply`) -> each part's counters and logs

With no part (O0 in float32) the step is Keras' own. `keras_boost.backend` holds what
each backend forces (TF's tape, torch autograd, JAX's stateless twin of this composer).
"""

import warnings

import keras

from keras_boost import backend as kb_backend
from keras_boost import config as config_lib
from keras_boost import keras_private
from keras_boost.algorithms.compose import carry_surgery_report
from keras_boost.algorithms.compose import choice_from_config
from keras_boost.algorithms.compose import model_loss_scale
from keras_boost.algorithms.compose import prepare_compile
from keras_boost.algorithms.compose import run_fit
from keras_boost.algorithms.compose import step_parts_for
from keras_boost.algorithms.compose import summary_line
from keras_boost.algorithms.compose import warn_unapplied
from keras_boost.algorithms.queries import AlgorithmQueries
from keras_boost.algorithms.step_part import Step
from keras_boost.algorithms.step_part import prepared_batch
from keras_boost.algorithms.step_part import trained_variables
from keras_boost.algorithms.step_part import update_owner
from keras_boost.auto_boost import AutoBoost
from keras_boost.cloning import graph_copy_source
from keras_boost.cloning import note_graph_run
from keras_boost.cloning import settings_of_copy
from keras_boost.errors import reraise_with_context
from keras_boost.optimizers.boost_optimizer import chain_for_model
from keras_boost.validation import check_model
from keras_boost.validation import check_no_own_train_step

__all__ = ["BoostModel"]


@keras.saving.register_keras_serializable(package="keras_boost")
class BoostModel(AlgorithmQueries, keras_private.GraphRunHooks, keras.Model):
    """A functional Keras model trained with keras_boost's train step.

    Build it like a functional `keras.Model`, or wrap an existing built
    model with `BoostModel.from_model(model)`. Then `compile` with any Keras
    optimizer and `fit` as usual: `compile` wraps the optimizer in the
    level's chain itself (`boost.wrap` is not needed). `fit` logs
    `loss_scale` and `overflow` when dynamic loss scaling is on, and
    `freeze_depth` with gradient freezing; at O1 and O2, `fit` on arrays
    computes a frozen prefix once (the `boost_summary()` line says so).

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
    handles_clone_model = True  # its constructor recognises clones (keras_boost.cloning)

    def __init__(self, *args, boost_level="O0", boost_config_dict=None, loss_scale="auto",
                 precision_choice=None, **kwargs):
        source = None
        if (boost_level, boost_config_dict, loss_scale, precision_choice) == ("O0", None, "auto", None):
            source = graph_copy_source(args[1] if len(args) > 1 else kwargs.get("outputs"))
        if source is not None:  # keras.models.clone_model(source)
            boost_level, boost_config_dict, loss_scale, precision_choice = source._boost_arguments().values()
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
        if source is not None:
            boost, precision_choice = settings_of_copy(self, source, boost, precision_choice)
        self._auto_boost = boost
        self._boost_loss_scale, self._boost_loss_scale_arg = model_loss_scale(self, loss_scale), loss_scale
        self._boost_parts, self._boost_parts_of = [], None
        self.precision_choice = choice_from_config(precision_choice)
        if source is None:  # a copy's source was checked when it was built
            warn_unapplied(self, stacklevel=2)

    @classmethod
    def from_model(cls, model, boost_level="O0", boost_config_dict=None, loss_scale="auto",
                   input_shape=None, name=None):
        """Wraps a built Keras model (functional, Sequential or subclassed).

        The new model shares its layers and weights with `model` (as
        `keras.Model(model.input, model.output)` does): training it trains
        `model`'s weights. Clone first (`keras.models.clone_model`) for an
        independent copy. When the level enables model surgery (LessBN,
        fused batch norm, a precision) and it finds something to change, it
        runs first (`AutoBoost.network_auto_process_model`), which copies the
        weights into a new graph: `model` is then left untouched. The new
        model's `less_bn_report` says what LessBN removed, or why it removed
        nothing; it is None when LessBN is off (O0).

        A model whose class defines its own `train_step` (a VAE, a GAN) is
        refused: BoostModel's step would replace it. Compile such a model
        with `boost.wrap(optimizer, level)` instead; the optimizer-level
        algorithms apply there.

        Args:
            model: a built `keras.Model`.
            boost_level, boost_config_dict, loss_scale: as for `BoostModel`.
            input_shape: input shape without the batch axis; needed only for
                a subclassed model built without a recorded input shape.
            name: name of the new model (default: `model.name + "_boost"`).
        """
        check_model(model)
        if not isinstance(model, BoostModel):
            check_no_own_train_step(model, boost_level)
        boost = AutoBoost(boost_level, boost_config_dict)
        inputs, outputs, model, config, choice = boost.network_for_boost_model(model, input_shape)
        boosted = cls(
            inputs=inputs, outputs=outputs, boost_level=boost_level,
            boost_config_dict=config if config is not None else boost_config_dict,
            loss_scale=loss_scale, precision_choice=choice, name=name or f"{model.name}_boost",
        )
        carry_surgery_report(model, boosted)
        return boosted

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
        optimizer = chain_for_model(self, optimizer)
        parts = step_parts_for(self, optimizer)
        kwargs = prepare_compile(self, optimizer, parts, kwargs)
        super().compile(optimizer, *args, **kwargs)
        self._boost_parts, self._boost_parts_of = parts, optimizer
        optimizer.build_for(self)

    def compile_from_config(self, config):
        # Keras skips re-compiling a model whose compile() is overridden: do it here.
        self.compile(**keras.saving.deserialize_keras_object(config))

    def _boost_step_parts(self):
        """The `StepPart`s of the compiled chain (none before `compile`)."""
        optimizer = getattr(self, "optimizer", None)
        if optimizer is not self._boost_parts_of:
            self._boost_parts, self._boost_parts_of = step_parts_for(self, optimizer), optimizer
        return self._boost_parts

    def make_train_function(self, force=False):
        parts = self._boost_step_parts()
        if self.optimizer is not None:
            self.optimizer.build_for(self)
        if not self.trainable_variables:
            # Keras' own train step says the same (once per trace); this
            # step then only runs the forward pass and the metrics.
            warnings.warn("The model does not have any trainable weights.", stacklevel=2)
        if self.train_function is not None and not force:
            return self.train_function
        made = next(filter(None, (p.make_train_function(self, self._boost_compile_step) for p in parts)), None)
        if made is None:  # no part compiles its own: Keras' train function
            return super().make_train_function(force=force)
        self.train_function = made
        return made

    def _boost_compile_step(self, prepare):
        """Keras' own train function around a step that calls `prepare()`
        first: a fresh function object per call, as `jax.jit` caches traces
        by function (reusing `self.train_step` would reuse the first trace)."""

        def train_step_variant(*args):
            prepare()
            return type(self).train_step(self, *args)

        object.__setattr__(self, "train_step", train_step_variant)
        try:
            self.train_function = None
            super().make_train_function(force=True)
        finally:
            object.__delattr__(self, "train_step")
        return self.train_function

    def fit(self, *args, **kwargs):
        return run_fit(self, super().fit, args, kwargs, self._boost_step_parts())

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
        return summary_line(self, self._boost_step_parts())

    def train_step(self, *args):
        seam = kb_backend.current()
        with reraise_with_context(f"running BoostModel {self.name!r}'s train step"):
            if keras.backend.backend() == "jax":
                return seam.train_step(self, *args)
            return self._boost_stateful_train_step(seam, *args)

    def _boost_stateful_train_step(self, seam, data):
        """The stateful step (TensorFlow, torch), composed of the step parts
        (see `keras_boost.algorithms.step_part`)."""
        parts = self._boost_step_parts()
        x, y, sample_weight = prepared_batch(parts, *keras_private.unpack_x_y_sample_weight(data),
                                             predict=lambda inputs: seam.forward_without_grad(self, inputs))
        step = Step(self, seam, x, y, sample_weight, trained_variables(parts, self.trainable_variables))
        owner = update_owner(parts)
        # A skipped step leaves the forward pass's state (BatchNorm moving
        # statistics) untouched too.
        restored = owner.restored_state(self) if owner else []
        saved = [keras.ops.copy(v.value) for v in restored]
        step.y_pred, step.grads = seam.loss_and_grads(self, x, y, sample_weight, step.trained, self.optimizer)
        with keras_private.learning_rate_read_once(self.optimizer):
            if owner is None:
                seam.apply(self.optimizer.apply, (step.grads, step.trained))
                extra_logs = {}
            else:
                extra_logs = owner.apply(step) or {}
        if step.finite is not None:
            for variable, value in zip(restored, saved):
                variable.assign(keras.ops.where(step.finite, variable.value, value))
        for part in parts:
            extra_logs.update(part.finish(step))
        logs = {**self.compute_metrics(x, y, step.y_pred, sample_weight), **extra_logs}
        return seam.distributed_logs(self, logs)

    def test_step(self, *args):
        return kb_backend.current().distributed_logs(self, super().test_step(*args))

    def symbolic_build_batch(self, iterator, data_batch):
        return kb_backend.current().symbolic_build_batch(self, iterator)  # multi-worker TF

    def on_graph_run(self, outputs):
        note_graph_run(self, outputs)  # for keras.models.clone_model (keras_boost.cloning)

    @classmethod
    def from_config(cls, config, custom_objects=None):
        model = super().from_config(config, custom_objects=custom_objects)
        # A frozen keras-hub backbone comes back from its config frozen as a
        # layer but with trainable variables (its constructor passes
        # `trainable=False` to `Layer.__init__`, which leaves the variables
        # alone), and on torch they train. Keras' own setter freezes both.
        for layer in keras_private.flatten_layers(model, include_self=False):
            if not layer.trainable:
                layer.trainable = False
        return model

    def get_config(self):
        config = super().get_config()
        loss_scale, choice = self._boost_loss_scale_arg, self.precision_choice
        config.update(self._boost_arguments(),  # a DynamicLossScale and a PrecisionChoice as configs
                      loss_scale=loss_scale.get_config() if hasattr(loss_scale, "get_config") else loss_scale,
                      precision_choice=None if choice is None else choice.get_config())
        return config

    def _boost_arguments(self):
        """The constructor's boost arguments (in its order) that give a model these settings."""
        return {"boost_level": self.boost_level, "boost_config_dict": self.boost_config,
                "loss_scale": self._boost_loss_scale_arg, "precision_choice": self.precision_choice}
