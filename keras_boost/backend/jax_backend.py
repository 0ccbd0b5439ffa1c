"""JAX seams: the stateless variant of BoostModel's train step.

JAX cannot mutate variables inside `jit`, so the step threads the state tuple
`(trainable, non_trainable, optimizer, metrics)` through; the boost logic is
the same pure math (`keras_boost.ops`) as on the stateful backends.
"""

import jax
from keras import ops
from keras import StatelessScope
from keras.src.trainers.data_adapters import data_adapter_utils

from keras_boost import ops as kb_ops


def _positions(all_variables, wanted):
    ids = {id(v): i for i, v in enumerate(all_variables)}
    return [ids[id(v)] for v in wanted]


def train_step(model, state, data):
    trainable, non_trainable, optimizer_vars, metrics_vars = state
    x, y, sample_weight = data_adapter_utils.unpack_x_y_sample_weight(data)
    optimizer, offset = model._boost_update_optimizer()
    inner_slice = slice(offset, offset + len(optimizer.variables))
    inner_vars = list(optimizer_vars[inner_slice])
    trained_pos = _positions(model.trainable_variables, model._boost_trained_variables())
    scale_pos = None
    if model._boost_loss_scale is not None:
        scale_pos = _positions(model.non_trainable_variables, model._boost_scale_state)
        scale = non_trainable[scale_pos[0]]
        good_steps = non_trainable[scale_pos[1]]

    def loss_fn(trained_values, non_trainable):
        values = list(trainable)
        for pos, value in zip(trained_pos, trained_values):
            values[pos] = value
        kwargs = {"training": True} if model._call_has_training_arg else {}
        y_pred, non_trainable, losses = model.stateless_call(
            values, non_trainable, x, return_losses=True, **kwargs
        )
        if losses:
            model._losses_override.clear()
            model._losses_override = losses
        loss, (_, non_trainable, new_metrics) = model.stateless_compute_loss(
            values, non_trainable, metrics_vars,
            x=x, y=y, y_pred=y_pred, sample_weight=sample_weight, training=True,
        )
        if losses:
            model._losses_override.clear()
        with StatelessScope(state_mapping=list(zip(optimizer.variables, inner_vars))):
            scaled = optimizer.scale_loss(loss)
        if scale_pos is not None:
            scaled = scaled * ops.cast(scale, scaled.dtype)
        return scaled, (loss, y_pred, non_trainable, new_metrics)

    non_trainable_before = list(non_trainable)
    trained_values = [trainable[p] for p in trained_pos]
    (_, aux), trained_grads = jax.value_and_grad(loss_fn, has_aux=True)(
        trained_values, non_trainable
    )
    loss, y_pred, non_trainable, metrics_vars = aux
    grads = [None] * len(trainable)
    for pos, grad in zip(trained_pos, trained_grads):
        grads[pos] = grad

    def update():
        return optimizer.stateless_apply(inner_vars, grads, trainable)

    extra_logs = {}
    if scale_pos is None:
        new_trainable, new_inner = update()
    else:
        grads = kb_ops.unscale(grads, scale)
        finite = kb_ops.all_finite(grads)
        # lax.cond: the optimizer math runs only on finite steps.
        new_trainable, new_inner = ops.cond(
            finite, update, lambda: (list(trainable), inner_vars)
        )
        new_scale, new_steps = model._boost_next_scale(scale, good_steps, finite)
        # Forward-pass state (BatchNorm statistics) is kept only on finite steps.
        non_trainable = [
            ops.where(finite, new, old) for new, old in zip(non_trainable, non_trainable_before)
        ]
        non_trainable[scale_pos[0]] = new_scale
        non_trainable[scale_pos[1]] = ops.cast(new_steps, good_steps.dtype)
        extra_logs = {"loss_scale": new_scale, "overflow": 1.0 - ops.cast(finite, "float32")}

    optimizer_vars = list(optimizer_vars)
    optimizer_vars[inner_slice] = new_inner
    counter = model._boost_freeze_counter()
    if counter is not None:  # the schedule advances on every step
        pos = _positions(model.optimizer.variables, [counter])[0]
        optimizer_vars[pos] = optimizer_vars[pos] + 1
        extra_logs["freeze_depth"] = ops.convert_to_tensor(float(model._boost_depth))
    logs, metrics_vars = model._update_metrics_variables(
        metrics_vars, loss, x, y, y_pred, sample_weight
    )
    logs = {**logs, **extra_logs}
    return logs, (new_trainable, non_trainable, optimizer_vars, metrics_vars)


def switch(index, branches, args):
    # Eager use only: under jit Keras calls stateless_apply instead.
    branches[int(index)](*args)
