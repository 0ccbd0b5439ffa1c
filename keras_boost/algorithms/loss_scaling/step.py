"""Loss scaling's step parts: one dynamic scale, or one scale per group.

Both own the update: they unscale the gradients, check them finite on every
replica, apply the update only then, and have the step put the forward
pass's state (BatchNorm statistics) back when they skip it.
"""

import keras

from keras_boost import keras_private
from keras_boost.algorithms.loss_scaling.arithmetic import group_all_finite
from keras_boost.algorithms.loss_scaling.arithmetic import unscale_by_group
from keras_boost.algorithms.loss_scaling.arithmetic import update_group_scales
from keras_boost.algorithms.loss_scaling.group_manager import GroupLossScaleManager
from keras_boost.algorithms.loss_scaling.settings import resolve_loss_scale
from keras_boost.algorithms.step_part import StepPart

__all__ = ["group_manager", "GroupLossScaleStep", "LossScaleStep", "model_loss_scale"]


def _overflow(finite):
    return 1.0 - keras.ops.cast(finite, "float32")


class LossScaleStep(StepPart):
    """The `StepPart` of the chain's `DynamicLossScaleOptimizer`; logs
    `loss_scale` and `overflow`.

    Example:

    ```python
    part = LossScaleStep(find_in_chain(model.optimizer, DynamicLossScaleOptimizer))
    part.summary(model)  # "dynamic loss scaling (scale now 32768)"
    ```
    """

    label = "loss scaling"

    owns_update = True

    def __init__(self, scaler):
        self.scaler = scaler

    def restored_state(self, model):
        return list(model.non_trainable_variables)

    def apply(self, step):
        step.finite = step.seam.apply(self.scaler.apply_and_check, (step.grads, step.trained))

    def stateless_apply(self, step):
        part = step.optimizer_slice(self.scaler)
        step.trainable, new_part, step.finite = self.scaler.stateless_apply_and_check(
            step.optimizer_values[part], step.grads, step.trainable
        )
        step.optimizer_values[part] = new_part

    def finish(self, step):
        return {"loss_scale": self.scaler.dynamic_scale.value, "overflow": _overflow(step.finite)}

    def stateless_finish(self, step):
        return {"loss_scale": step.value(self.scaler.dynamic_scale), "overflow": _overflow(step.finite)}

    def summary(self, model):
        scale = float(keras.ops.convert_to_numpy(self.scaler.dynamic_scale))
        return f"dynamic loss scaling (scale now {scale:g})"


class GroupLossScaleStep(StepPart):
    """The `StepPart` of a model's `GroupLossScaleManager` (MindSpore's
    `loss_scale_group`): unscales each gradient by the scale its group used,
    applies the update only if no group overflowed (on any replica), then
    updates the scales. Logs `overflow`.

    Example:

    ```python
    part = GroupLossScaleStep(group_manager(model))
    part.summary(model)  # "loss scaling per group (GroupLossScaleManager)"
    ```
    """

    label = "group loss scaling"

    owns_update = True

    def __init__(self, manager):
        self.manager = manager

    def restored_state(self, model):
        # The scales are this part's own: a skipped step shrinks them.
        return [v for v in model.non_trainable_variables if v is not self.manager.scales]

    def _unscale(self, grads, trained, scales, model):
        group_of = self.manager.group_of(trained, model)
        grads = unscale_by_group(list(grads), scales, group_of)
        return grads, group_all_finite(grads, group_of, self.manager.num_groups)

    def apply(self, step):
        scales = self.manager.scales.value
        grads, group_finite = self._unscale(step.grads, step.trained, scales, step.model)
        group_finite = step.seam.all_replicas(group_finite)
        step.finite = keras.ops.all(group_finite)
        step.seam.apply_if(step.finite, step.model.optimizer.apply, (grads, step.trained))
        self.manager.scales.assign(update_group_scales(scales, group_finite))

    def stateless_apply(self, step):
        model, positions = step.model, step.trained_positions
        scales = step.value_before(self.manager.scales)
        trained = [model.trainable_variables[p] for p in positions]
        trained_grads, group_finite = self._unscale([step.grads[p] for p in positions], trained, scales, model)
        grads = list(step.grads)
        for position, grad in zip(positions, trained_grads):
            grads[position] = grad
        step.finite = keras.ops.all(group_finite)
        trainable, values = list(step.trainable), list(step.optimizer_values)

        def update():
            new_trainable, new_values = model.optimizer.stateless_apply(values, grads, trainable)
            return list(new_trainable), list(new_values)

        step.trainable, step.optimizer_values = keras.ops.cond(step.finite, update, lambda: (trainable, values))
        step.assign(self.manager.scales, update_group_scales(scales, group_finite))

    def finish(self, step):
        return {"overflow": _overflow(step.finite)}

    def stateless_finish(self, step):
        return {"overflow": _overflow(step.finite)}

    def summary(self, model):
        return "loss scaling per group (GroupLossScaleManager)"


def group_manager(model):
    """The one `GroupLossScaleManager` of `model` (an error for none or several)."""
    managers = [layer for layer in keras_private.flatten_layers(model, include_self=False)
                if isinstance(layer, GroupLossScaleManager)]
    if len(managers) != 1:
        raise ValueError(
            f"loss_scale_group needs exactly one boost.layers.GroupLossScaleManager called at "
            f"the group boundaries of the model; {model.name!r} has {len(managers)}."
        )
    return managers[0]


def model_loss_scale(model, loss_scale):
    """The `DynamicLossScale` (or None) of a `BoostModel` built with
    `loss_scale`; with `loss_scale_group` on, the model's
    `GroupLossScaleManager` is switched on and replaces the single scale."""
    if model.boost_config["boost"]["loss_scale_group"]:
        if loss_scale not in ("auto", None):
            raise ValueError(
                "loss_scale_group scales the gradients per group with the model's "
                f"GroupLossScaleManager; it replaces loss_scale={loss_scale!r}: pass "
                "loss_scale='auto' or None."
            )
        group_manager(model).active = True  # a clear error now if the model has none
        return None
    policies = [model.dtype_policy] + [layer.dtype_policy for layer in model.layers]
    return resolve_loss_scale(loss_scale, any(p.compute_dtype == "float16" for p in policies))
