"""JAX seams: the stateless variant of BoostModel's train step.

JAX cannot mutate variables inside `jit`, so the step threads the state tuple
`(trainable, non_trainable, optimizer, metrics)` through; the boost logic is
the same pure math (`keras_boost.ops`) as on the stateful backends.
"""

import jax
from keras import ops
from keras import StatelessScope
from keras.src.trainers.data_adapters import data_adapter_utils

from keras_boost.algorithms.dim_reduce import flatten
from keras_boost.algorithms.dim_reduce import unflatten
from keras_boost.algorithms.loss_scaling import group_all_finite
from keras_boost.algorithms.loss_scaling import unscale_by_group
from keras_boost.algorithms.loss_scaling import update_group_scales


def _positions(all_variables, wanted):
    ids = {id(v): i for i, v in enumerate(all_variables)}
    return [ids[id(v)] for v in wanted]


def _slice_of(outer, inner):
    """Where `inner.variables` sit in `outer.variables` (a wrapper chain
    lists its own variables, then the inner ones: a contiguous run)."""
    if not inner.variables:
        return slice(0, 0)
    start = _positions(outer.variables, inner.variables[:1])[0]
    return slice(start, start + len(inner.variables))


def _loss_fn(model, state, x, y, sample_weight, trained_pos):
    """`loss_fn(trained_values, non_trainable) -> (scaled, (loss, y_pred,
    non_trainable, metrics))`, stateless, for `jax.value_and_grad`."""
    trainable, _, optimizer_vars, metrics_vars = state
    optimizer = model.optimizer

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
        # The chain's scale_loss reads its loss scale from the state.
        with StatelessScope(state_mapping=list(zip(optimizer.variables, optimizer_vars))):
            scaled = optimizer.scale_loss(loss)
        return scaled, (loss, y_pred, non_trainable, new_metrics)

    return loss_fn


def train_step(model, state, data):
    dim_reduce = model._boost_dim_reduce()
    if dim_reduce is not None:
        return _dim_reduce_train_step(model, dim_reduce, state, data)
    trainable, non_trainable, optimizer_vars, metrics_vars = state
    x, y, sample_weight = data_adapter_utils.unpack_x_y_sample_weight(data)
    optimizer = model.optimizer
    trained_pos = _positions(model.trainable_variables, model._boost_trained_variables())
    scaler = model._boost_scaler()
    loss_fn = _loss_fn(model, state, x, y, sample_weight, trained_pos)

    non_trainable_before = list(non_trainable)
    trained_values = [trainable[p] for p in trained_pos]
    (_, aux), trained_grads = jax.value_and_grad(loss_fn, has_aux=True)(
        trained_values, non_trainable
    )
    loss, y_pred, non_trainable, metrics_vars = aux
    grads = [None] * len(trainable)
    for pos, grad in zip(trained_pos, trained_grads):
        grads[pos] = grad

    optimizer_vars = list(optimizer_vars)
    extra_logs = {}
    manager = model._boost_group_manager()
    if manager is not None:
        new_trainable, optimizer_vars, non_trainable, finite = _group_scaled_apply(
            model, manager, optimizer_vars, grads, trainable, trained_pos, non_trainable, non_trainable_before)
        extra_logs = {"overflow": 1.0 - ops.cast(finite, "float32")}
    elif scaler is None:
        new_trainable, optimizer_vars = optimizer.stateless_apply(optimizer_vars, grads, trainable)
        optimizer_vars = list(optimizer_vars)
    else:
        part = _slice_of(optimizer, scaler)
        new_trainable, new_part, finite = scaler.stateless_apply_and_check(
            optimizer_vars[part], grads, trainable
        )
        optimizer_vars[part] = new_part
        # Forward-pass state (BatchNorm statistics) is kept only on finite steps.
        non_trainable = [
            ops.where(finite, new, old) for new, old in zip(non_trainable, non_trainable_before)
        ]
        scale_pos = _positions(optimizer.variables, [scaler.dynamic_scale])[0]
        extra_logs = {
            "loss_scale": optimizer_vars[scale_pos],
            "overflow": 1.0 - ops.cast(finite, "float32"),
        }
    freeze = model._boost_freeze_optimizer()
    if freeze is not None:  # the schedule advances on every step
        pos = _positions(optimizer.variables, [freeze.freeze_step])[0]
        optimizer_vars[pos] = optimizer_vars[pos] + 1
        extra_logs["freeze_depth"] = ops.convert_to_tensor(model._boost_depth, "int32")
    logs, metrics_vars = model._update_metrics_variables(
        metrics_vars, loss, x, y, y_pred, sample_weight
    )
    logs = {**logs, **extra_logs}
    return logs, (new_trainable, non_trainable, optimizer_vars, metrics_vars)


def _group_scaled_apply(model, manager, optimizer_vars, grads, trainable, trained_pos, non_trainable, before):
    """Per-group loss scaling, stateless: unscale by the scales the forward
    pass used, update only when no group overflowed, then the new scales."""
    scale_pos = _positions(model.non_trainable_variables, [manager.scales])[0]
    scales = before[scale_pos]
    group_of = manager.group_of([model.trainable_variables[p] for p in trained_pos], model)
    trained_grads = unscale_by_group([grads[p] for p in trained_pos], scales, group_of)
    grads = list(grads)
    for pos, grad in zip(trained_pos, trained_grads):
        grads[pos] = grad
    group_finite = group_all_finite(trained_grads, group_of, manager.num_groups)
    finite = ops.all(group_finite)

    def update():
        new_trainable, new_vars = model.optimizer.stateless_apply(optimizer_vars, grads, trainable)
        return list(new_trainable), list(new_vars)

    new_trainable, optimizer_vars = ops.cond(finite, update, lambda: (list(trainable), list(optimizer_vars)))
    non_trainable = [ops.where(finite, new, old) for new, old in zip(non_trainable, before)]
    non_trainable[scale_pos] = update_group_scales(scales, group_finite)
    return new_trainable, optimizer_vars, non_trainable, finite


def _dim_reduce_train_step(model, dim_reduce, state, data):
    """DimReduce's step, stateless: the trial losses of the line search are
    forward passes from the step's own BN statistics."""
    trainable, non_trainable, optimizer_vars, metrics_vars = state
    x, y, sample_weight = data_adapter_utils.unpack_x_y_sample_weight(data)
    variables = model.trainable_variables
    loss_fn = _loss_fn(model, state, x, y, sample_weight, list(range(len(trainable))))
    non_trainable_before = list(non_trainable)
    (_, aux), grads = jax.value_and_grad(loss_fn, has_aux=True)(list(trainable), non_trainable)
    loss, y_pred, non_trainable, metrics_vars = aux

    def trial_loss(flat):
        return loss_fn(unflatten(flat, variables), non_trainable_before)[1][0]

    optimizer_vars = list(optimizer_vars)
    own = _positions(model.optimizer.variables, dim_reduce.state_variables())
    basis = optimizer_vars[_positions(model.optimizer.variables, [dim_reduce.basis])[0]]
    new_weights, new_state, accepted = dim_reduce.step(
        basis, [optimizer_vars[p] for p in own], flatten(trainable), flatten(grads), loss, trial_loss
    )
    for pos, value in zip(own, new_state):
        optimizer_vars[pos] = value
    counters = _positions(model.optimizer.variables, [dim_reduce.accepted_steps, dim_reduce.iterations])
    optimizer_vars[counters[0]] = optimizer_vars[counters[0]] + ops.cast(accepted, "int32")
    optimizer_vars[counters[1]] = optimizer_vars[counters[1]] + 1
    logs, metrics_vars = model._update_metrics_variables(metrics_vars, loss, x, y, y_pred, sample_weight)
    logs = {**logs, "line_search_accepted": ops.cast(accepted, "float32")}
    return logs, (unflatten(new_weights, variables), non_trainable, optimizer_vars, metrics_vars)


def assign_where(triples):
    for variable, keep_new, old in triples:
        variable.assign(ops.where(keep_new, variable.value, old))


def static_value(x):
    """The Python value of `x` outside `jit`, else None."""
    try:
        return int(x)
    except (TypeError, jax.errors.ConcretizationTypeError):
        return None


# Eager use only (an optimizer's stateful `apply` outside `jit`); inside the
# jitted step Keras calls `stateless_apply`, which takes `ops.cond` instead.


def all_replicas(flag):
    return flag


def apply_if(flag, fn, args):
    if bool(flag):
        fn(*args)


def apply(fn, args):
    return fn(*args)


def replica_layout():
    """`(replicas in sync, replicas on this worker)`: Keras' fit on this
    backend steps one program; AdaSum sees a single replica."""
    return 1, 1


def worker_role():
    """`(is_chief, workers)`: process 0 of a multi-process JAX run (where it
    computes DimReduce's basis and the other processes read it)."""
    return jax.process_index() == 0, jax.process_count()
