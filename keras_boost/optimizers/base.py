"""`OptimizerWrapper`: the composition base every keras_boost optimizer uses.

A wrapper owns an `inner_optimizer` and delegates everything it does not
change to it, in the style of `keras.optimizers.LossScaleOptimizer`:

- `apply` (TensorFlow, torch) and `stateless_apply` (JAX);
- `variables` = the wrapper's own variables followed by the inner ones (this is
  the JAX state order and the order in which they are saved);
- `learning_rate`, `iterations`, `scale_loss` and `finalize_variable_values`
  pass through, so callbacks such as `LearningRateScheduler` keep working;
- `get_config` / `from_config` serialize the inner optimizer.

Subclasses override `_apply` / `_stateless_apply` (and `_build_own` for their
own state) and keep the pure math in `keras_boost.ops`.
"""

import keras
from keras.src.utils import tracking  # same private helper LossScaleOptimizer uses

from keras_boost.errors import reraise_with_context
from keras_boost.validation import check_optimizer  # noqa: F401 (re-exported)


class OptimizerWrapper(keras.optimizers.Optimizer):
    """Base class for optimizers that wrap another Keras optimizer.

    Args:
        optimizer: the `keras.optimizers.Optimizer` instance to wrap.
        name: optional name of the wrapper.

    Example:

    ```python
    class Halve(OptimizerWrapper):
        def _transform(self, grads):
            return [None if g is None else g * 0.5 for g in grads]

    model.compile(optimizer=Halve(keras.optimizers.SGD(0.1)), loss="mse")
    ```
    """

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
        self.inner_optimizer = optimizer

    # --- state -------------------------------------------------------------

    def _build_own(self, var_list):
        """Creates the wrapper's own variables (with `self.add_variable`)."""

    def _build_inner(self, var_list):
        """Builds the wrapped optimizer (its slots for `var_list`)."""
        self.inner_optimizer.build(var_list)

    @tracking.no_automatic_dependency_tracking
    def build(self, var_list):
        if self.built:
            # Idempotent, unlike Keras' optimizers: Keras' legacy H5 loader
            # builds the optimizer again (with the model's own, empty,
            # variable list) after compile already built it.
            return
        self._build_own(var_list)
        self._build_inner(var_list)
        super().build(var_list)

    @property
    def variables(self):
        return self._variables + self.inner_optimizer.variables

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
        with reraise_with_context(f"{type(self).__name__} {self.name!r} applying gradients"):
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
        n_own = len(self._variables)
        own, inner = list(optimizer_variables[:n_own]), optimizer_variables[n_own:]
        mapping = list(zip(self.variables, optimizer_variables))
        # Inner optimizer and own variables resolve through this scope.
        with keras.StatelessScope(state_mapping=mapping):
            with reraise_with_context(f"{type(self).__name__} {self.name!r} applying gradients"):
                new_trainable, new_own, new_inner = self._stateless_apply(
                    own, inner, list(grads), trainable_variables
                )
        return new_trainable, list(new_own) + list(new_inner)

    # --- pass-through ------------------------------------------------------

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
