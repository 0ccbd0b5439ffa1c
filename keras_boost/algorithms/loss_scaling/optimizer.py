"""`DynamicLossScaleOptimizer`: dynamic loss scaling that is safe on replicas.

Keras' `LossScaleOptimizer` checks finiteness on one replica's un-reduced
gradients, so an overflow on another replica corrupts the weights under
`MirroredStrategy`. This wrapper reduces the finite flag over all replicas,
floors the scale at `min_scale`, and keeps its state (the scale and the count
of finite steps) with the optimizer, so it is saved and restored with it and
the model's weights keep their plain layout.
"""

import keras
from keras import ops

from keras_boost import keras_private
from keras_boost import backend as kb_backend
from keras_boost.algorithms.loss_scaling import arithmetic as kb_ops
from keras_boost.algorithms.loss_scaling.settings import DynamicLossScale
from keras_boost.algorithms.optimizer_wrapper import OptimizerWrapper

__all__ = ["DynamicLossScaleOptimizer"]


@keras.saving.register_keras_serializable(package="keras_boost")
class DynamicLossScaleOptimizer(OptimizerWrapper):
    """Scales the loss, unscales the gradients, skips non-finite steps.

    `scale_loss(loss)` multiplies the loss by the current scale (Keras' train
    steps call it on every backend); `apply` divides the gradients by it,
    checks that they are finite on every replica, and applies the wrapped
    optimizer only then. A skipped step leaves every variable and optimizer
    slot bit-identical and halves the scale (never below `min_scale`); after
    `scale_window` finite steps in a row the scale grows by `growth_factor`.

    `BoostModel` puts it outermost in its optimizer chain when the model
    computes in float16 (or `loss_scale="dynamic"`); used directly on a plain
    model it replaces Keras' `LossScaleOptimizer` (pass
    `auto_scale_loss=False` to `compile` so that Keras does not add its own).

    Args:
        optimizer: the `keras.optimizers.Optimizer` to wrap.
        loss_scale: a `boost.DynamicLossScale` (or its config dict); default
            `DynamicLossScale()` (2**15, x2 every 2000 finite steps).
        name: optional name.

    Example:

    ```python
    opt = boost.optimizers.DynamicLossScaleOptimizer(
        keras.optimizers.SGD(0.1), boost.DynamicLossScale(scale_window=500))
    model.compile(optimizer=opt, loss="mse", auto_scale_loss=False)
    ```
    """

    def __init__(self, optimizer, loss_scale=None, name=None, **kwargs):
        super().__init__(optimizer, name=name or "dynamic_loss_scale_optimizer", **kwargs)
        if loss_scale is None:
            loss_scale = DynamicLossScale()
        elif isinstance(loss_scale, dict):
            loss_scale = DynamicLossScale.from_config(loss_scale)
        elif not isinstance(loss_scale, DynamicLossScale):
            raise TypeError(
                f"loss_scale must be a boost.DynamicLossScale or its config dict, got {loss_scale!r}."
            )
        self.settings = loss_scale

    def _build_own(self, var_list):
        self.dynamic_scale = self.add_variable(
            shape=(), dtype="float32",
            initializer=keras.initializers.Constant(self.settings.initial_scale),
            name="dynamic_scale",
        )
        self.good_steps = self.add_variable(
            shape=(), dtype="int32", initializer="zeros", name="good_steps"
        )

    def scale_loss(self, loss):
        loss = self.inner_optimizer.scale_loss(loss)
        scale = self.dynamic_scale if self.built else self.settings.initial_scale
        return loss * ops.cast(scale, loss.dtype)

    def _next_scale(self, scale, good_steps, finite):
        s = self.settings
        return kb_ops.update_loss_scale(
            scale, good_steps, finite, s.growth_factor, s.scale_window, s.min_scale
        )

    # --- stateful path (TensorFlow, torch) ----------------------------------

    def apply_and_check(self, grads, trainable_variables):
        """`apply`, returning whether the step was applied (finite everywhere)."""
        if not self.built:
            self.build(trainable_variables)
            self.built = True
        seam = kb_backend.current()
        scale, good_steps = self.dynamic_scale.value, self.good_steps.value
        grads = kb_ops.unscale(list(grads), scale)
        finite = seam.all_replicas(kb_ops.all_finite(grads))
        seam.apply_if(finite, self.inner_optimizer.apply, (grads, trainable_variables))
        new_scale, new_steps = self._next_scale(scale, good_steps, finite)
        self.dynamic_scale.assign(new_scale)
        self.good_steps.assign(new_steps)
        return finite

    def _apply(self, grads, trainable_variables):
        self.apply_and_check(grads, trainable_variables)

    # --- stateless path (JAX) -----------------------------------------------

    def stateless_apply_and_check(self, optimizer_variables, grads, trainable_variables):
        """`stateless_apply`, also returning the (all-replica) finite flag."""
        own_variables = keras_private.optimizer_own_variables(self)
        own = len(own_variables)
        scale_pos = next(i for i, v in enumerate(own_variables) if v is self.dynamic_scale)
        steps_pos = next(i for i, v in enumerate(own_variables) if v is self.good_steps)
        optimizer_variables = list(optimizer_variables)
        scale, good_steps = optimizer_variables[scale_pos], optimizer_variables[steps_pos]
        inner = optimizer_variables[own:]
        grads = kb_ops.unscale(list(grads), scale)
        finite = kb_ops.all_finite(grads)
        trainable = list(trainable_variables)

        def update():
            new_trainable, new_inner = self.inner_optimizer.stateless_apply(inner, grads, trainable)
            return list(new_trainable), list(new_inner)

        # lax.cond: the optimizer math runs only on finite steps.
        new_trainable, new_inner = ops.cond(finite, update, lambda: (trainable, list(inner)))
        new_scale, new_steps = self._next_scale(scale, good_steps, finite)
        new_own = optimizer_variables[:own]
        new_own[scale_pos] = new_scale
        new_own[steps_pos] = ops.cast(new_steps, "int32")
        return new_trainable, new_own + new_inner, finite

    def _stateless_apply(self, own_variables, inner_variables, grads, trainable):
        new_trainable, new_variables, _ = self.stateless_apply_and_check(
            list(own_variables) + list(inner_variables), grads, trainable
        )
        n = len(own_variables)
        return new_trainable, new_variables[:n], new_variables[n:]

    def get_config(self):
        config = super().get_config()
        config["loss_scale"] = self.settings.get_config()
        return config
