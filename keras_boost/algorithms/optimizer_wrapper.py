"""`OptimizerWrapper`: the composition base every keras_boost optimizer uses.

A wrapper owns an `inner_optimizer` and delegates everything it does not
change to it, in the style of `keras.optimizers.LossScaleOptimizer`:

- `apply` (TensorFlow, torch) and `stateless_apply` (JAX);
- `variables` = the wrapper's own variables followed by the inner ones (this is
  the JAX state order and the order in which they are saved);
- `learning_rate`, `iterations`, `scale_loss`, `finalize_variable_values`
  and `exclude_from_weight_decay` pass through, so callbacks such as
  `LearningRateScheduler` keep working;
- the wrapped optimizer's hyperparameters (`momentum`, `beta_1`, `use_ema`,
  `clipnorm`, ...) read and write through the wrapper and through chains of
  wrappers (see `HYPERPARAMETERS`);
- `get_config` / `from_config` serialize the inner optimizer.

Subclasses override `_apply` / `_stateless_apply` (and `_build_own` for their
own state) and keep the pure math in `keras_boost.ops`.
"""

import keras

from keras_boost import keras_private
from keras_boost.errors import reraise_with_context
from keras_boost.validation import check_optimizer  # noqa: F401 (re-exported)

__all__ = [
    "BASE_HYPERPARAMETERS",
    "check_optimizer",
    "find_in_chain",
    "HYPERPARAMETERS",
    "optimizer_chain",
    "OptimizerWrapper",
]

# What Keras' base optimizer sets on every optimizer in `__init__`, the
# wrapper included; on a wrapper they belong to the wrapped optimizer.
BASE_HYPERPARAMETERS = (
    "weight_decay", "clipnorm", "clipvalue", "global_clipnorm", "use_ema", "ema_momentum",
    "ema_overwrite_frequency", "loss_scale_factor", "gradient_accumulation_steps",
)

# The constructor arguments of Keras' optimizers and of keras_boost's own
# (tests/test_wrapper_hyperparameters.py checks that this covers them): a
# write of one of these names on a wrapper sets it on the wrapped optimizer.
HYPERPARAMETERS = frozenset(BASE_HYPERPARAMETERS + (
    "momentum", "nesterov", "beta", "beta_1", "beta_2", "beta_2_decay", "epsilon", "epsilon_1",
    "epsilon_2", "amsgrad", "rho", "centered", "initial_accumulator_value", "learning_rate_power",
    "l1_regularization_strength", "l2_regularization_strength",
    "l2_shrinkage_regularization_strength", "clip_threshold", "relative_step", "warmup_steps",
    "adam_beta_1", "adam_beta_2", "adam_lr_ratio", "adam_weight_decay", "exclude_embeddings",
    "exclude_layers", "muon_a", "muon_b", "muon_c", "ns_steps", "rms_rate",
    "initial_scale", "dynamic_growth_steps",
    "rectify", "final_lr", "gamma", "trust_coefficient", "lars_weight_decay", "exclude_1d",
))

# Private state that Keras' `SwapEMAWeights` reads one level below
# `model.optimizer`: the EMA slots live in the innermost optimizer.
_FORWARDED_PRIVATE = frozenset({"_model_variables_moving_average"})


class OptimizerWrapper(keras.optimizers.Optimizer):
    """Base class for optimizers that wrap another Keras optimizer.

    Hyperparameters: reading an attribute the wrapper does not have (e.g.
    `wrapper.momentum`, `wrapper.use_ema`) reads it from the wrapped
    optimizer, through any chain of wrappers. Writing a name of
    `forwarded_hyperparameters` (by default `HYPERPARAMETERS`: the arguments
    of Keras' optimizers, e.g. `wrapper.momentum = 0.5`) sets it on the
    wrapped optimizer, and raises `AttributeError` when that optimizer has no
    such hyperparameter. As with a plain Keras optimizer, a Python-number
    hyperparameter changed after the train function was traced takes effect
    when it is traced again (`model.make_train_function(force=True)`); the
    learning rate is a variable and changes at once.

    Args:
        optimizer: the `keras.optimizers.Optimizer` instance to wrap.
        name: optional name of the wrapper.

    Example:

    ```python
    class Halve(OptimizerWrapper):
        def _transform(self, grads):
            return [None if g is None else g * 0.5 for g in grads]

    model.compile(optimizer=Halve(keras.optimizers.SGD(0.1, momentum=0.9)), loss="mse")
    model.optimizer.momentum = 0.5   # sets the SGD's momentum
    ```
    """

    # Names whose writes go to the wrapped optimizer. A subclass with a
    # hyperparameter of its own under one of these names removes it here.
    forwarded_hyperparameters = HYPERPARAMETERS

    def __init__(self, optimizer, name=None, **kwargs):
        check_optimizer(optimizer)
        if kwargs:
            raise ValueError(
                f"{type(self).__name__} does not accept the optimizer arguments "
                f"{sorted(kwargs)}; set them on the wrapped optimizer."
            )
        # learning_rate=0.0: the wrapper's own LR variable is unused, the
        # `learning_rate` property forwards to the inner optimizer.
        super().__init__(learning_rate=0.0, name=name)
        for attr in BASE_HYPERPARAMETERS:
            delattr(self, attr)  # reads now reach the inner optimizer's values
        self.inner_optimizer = optimizer

    # --- state -------------------------------------------------------------

    def _build_own(self, var_list):
        """Creates the wrapper's own variables (with `self.add_variable`)."""

    def _build_inner(self, var_list):
        """Builds the wrapped optimizer (its slots for `var_list`)."""
        self.inner_optimizer.build(var_list)

    @keras_private.no_automatic_dependency_tracking
    def build(self, var_list):
        if self.built:
            # Idempotent, unlike Keras' optimizers: Keras' legacy H5 loader
            # builds the optimizer again (with the model's own, empty,
            # variable list) after compile already built it.
            return
        self._build_own(var_list)
        self._build_inner(var_list)
        # Not `super().build`: it would add EMA and accumulator slots here for
        # the inner optimizer's `use_ema` / `gradient_accumulation_steps`
        # (read through this wrapper); the inner optimizer has its own.
        keras_private.set_optimizer_trained_variables(self, var_list)
        self.built = True

    @property
    def variables(self):
        return keras_private.optimizer_own_variables(self) + self.inner_optimizer.variables

    # --- updates -----------------------------------------------------------

    def _transform(self, grads):
        """Maps gradients before the inner update (identity by default)."""
        return grads

    def _apply(self, grads, trainable_variables):
        self.inner_optimizer.apply(self._transform(grads), trainable_variables)

    def apply(self, grads, trainable_variables=None):
        if not self.built:
            with keras.name_scope(self.name, caller=self):
                self.build(trainable_variables)
            self.built = True
        with reraise_with_context(f"{type(self).__name__} {self.name!r} applying gradients"), \
                keras_private.learning_rate_read_once(self):
            self._apply(list(grads), trainable_variables)

    def _stateless_apply(self, own_variables, inner_variables, grads, trainable):
        new_trainable, new_inner = self.inner_optimizer.stateless_apply(
            inner_variables, self._transform(grads), trainable
        )
        return new_trainable, list(own_variables), list(new_inner)

    def stateless_apply(self, optimizer_variables, grads, trainable_variables):
        if not self.built:
            raise ValueError(
                f"To call `stateless_apply`, {type(self).__name__} must be built: "
                "call `optimizer.build(trainable_variables)` first."
            )
        # An enclosing wrapper (Keras' LossScaleOptimizer) may hand over the
        # variables themselves, already mapped by its StatelessScope: use
        # their current values (a variable inside a scope mapping would be
        # abstractified by JAX).
        optimizer_variables = [_value(v) for v in optimizer_variables]
        trainable_variables = [_value(v) for v in trainable_variables]
        n_own = len(keras_private.optimizer_own_variables(self))
        own, inner = list(optimizer_variables[:n_own]), optimizer_variables[n_own:]
        mapping = list(zip(self.variables, optimizer_variables))
        # Inner optimizer and own variables resolve through this scope.
        with keras.StatelessScope(state_mapping=mapping):
            with reraise_with_context(f"{type(self).__name__} {self.name!r} applying gradients"), \
                    keras_private.learning_rate_read_once(self):
                new_trainable, new_own, new_inner = self._stateless_apply(
                    own, inner, list(grads), trainable_variables
                )
        return new_trainable, list(new_own) + list(new_inner)

    # --- pass-through ------------------------------------------------------

    def __getattr__(self, name):
        # Only called when normal lookup fails: the wrapper's own attributes
        # come first, anything public it lacks is the inner optimizer's.
        inner = self.__dict__.get("inner_optimizer")  # absent while __init__ runs
        if inner is None or (name.startswith("_") and name not in _FORWARDED_PRIVATE):
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return getattr(inner, name)

    def __setattr__(self, name, value):
        inner = self.__dict__.get("inner_optimizer")
        if inner is None or name not in self.forwarded_hyperparameters:
            super().__setattr__(name, value)
        elif hasattr(inner, name):
            setattr(inner, name, value)
        else:
            innermost = optimizer_chain(inner)[-1]
            known = sorted(n for n in HYPERPARAMETERS if hasattr(inner, n))
            raise AttributeError(
                f"Cannot set {name!r} on {type(self).__name__} {self.name!r}: the optimizer it "
                f"wraps ({type(innermost).__name__} {innermost.name!r}) has no hyperparameter "
                f"{name!r}. Its hyperparameters: {known}."
            )

    @property
    def learning_rate(self):
        return self.inner_optimizer.learning_rate

    @learning_rate.setter
    def learning_rate(self, learning_rate):
        self.inner_optimizer.learning_rate = learning_rate

    @property
    def iterations(self):
        return self.inner_optimizer.iterations

    def scale_loss(self, loss):
        return self.inner_optimizer.scale_loss(loss)

    def exclude_from_weight_decay(self, var_list=None, var_names=None):
        # Weight decay is the inner optimizer's; the wrapper applies none.
        self.inner_optimizer.exclude_from_weight_decay(var_list=var_list, var_names=var_names)

    def finalize_variable_values(self, var_list):
        self.inner_optimizer.finalize_variable_values(var_list)

    # --- serialization -----------------------------------------------------

    def get_config(self):
        # Not super().get_config(): the base optimizer arguments belong to the
        # inner optimizer.
        return {
            "name": self.name,
            "optimizer": keras.saving.serialize_keras_object(self.inner_optimizer),
        }

    @classmethod
    def from_config(cls, config, custom_objects=None):
        config = dict(config)
        config["optimizer"] = keras.saving.deserialize_keras_object(
            config["optimizer"], custom_objects=custom_objects
        )
        return cls(**config)


def _value(variable):
    return variable.value if isinstance(variable, keras.Variable) else variable


def optimizer_chain(optimizer):
    """`optimizer` and every optimizer it wraps, outermost first."""
    chain = []
    while optimizer is not None and all(optimizer is not o for o in chain):
        chain.append(optimizer)
        optimizer = getattr(optimizer, "inner_optimizer", None)
    return chain


def find_in_chain(optimizer, cls):
    """The first optimizer of type `cls` in `optimizer`'s chain, or None."""
    return next((o for o in optimizer_chain(optimizer) if isinstance(o, cls)), None)
