"""JAX seams: the stateless composer of BoostModel's train step.

JAX cannot mutate variables inside `jit`, so the step threads the state tuple
`(trainable, non_trainable, optimizer, metrics)` through; the step parts'
stateless forms (`keras_boost.algorithms.step_part`) read and write it
through a `StatelessStep`, in the same order as the stateful step.
"""

import functools

import jax
from keras import ops
from keras import StatelessScope

from keras_boost import keras_private
from keras_boost.algorithms.step_part import StatelessStep
from keras_boost.algorithms.step_part import prepared_batch
from keras_boost.algorithms.step_part import trained_variables
from keras_boost.algorithms.step_part import update_owner

__all__ = [
    "all_replicas",
    "apply",
    "apply_if",
    "assign_each",
    "assign_where",
    "distributed_logs",
    "replica_layout",
    "static_value",
    "symbolic_build_batch",
    "train_step",
    "worker_role",
]


def _positions(all_variables, wanted):
    ids = {id(v): i for i, v in enumerate(all_variables)}
    return [ids[id(v)] for v in wanted]


def _forward_without_grad(model, state, x):
    """`model(x)` in inference mode at the step's weights (`state`), outside the gradient."""
    trainable, non_trainable = state[0], state[1]
    y_pred, _ = model.stateless_call(trainable, non_trainable, x, **keras_private.training_kwargs(model, False))
    return jax.tree_util.tree_map(jax.lax.stop_gradient, y_pred)


def _loss_fn(model, state, x, y, sample_weight, trained_pos):
    """`loss_fn(trained_values, non_trainable) -> (scaled, (loss, y_pred,
    non_trainable, metrics))`, stateless, for `jax.value_and_grad`."""
    trainable, _, optimizer_vars, metrics_vars = state
    optimizer = model.optimizer

    def loss_fn(trained_values, non_trainable):
        values = list(trainable)
        for pos, value in zip(trained_pos, trained_values):
            values[pos] = value
        y_pred, non_trainable, losses = model.stateless_call(
            values, non_trainable, x, return_losses=True, **keras_private.training_kwargs(model, True)
        )
        with keras_private.losses_override(model, losses):
            loss, (_, non_trainable, new_metrics) = model.stateless_compute_loss(
                values, non_trainable, metrics_vars,
                x=x, y=y, y_pred=y_pred, sample_weight=sample_weight, training=True,
            )
        # The chain's scale_loss reads its loss scale from the state.
        with StatelessScope(state_mapping=list(zip(optimizer.variables, optimizer_vars))):
            scaled = optimizer.scale_loss(loss)
        return scaled, (loss, y_pred, non_trainable, new_metrics)

    return loss_fn


def train_step(model, state, data):
    """The stateless step, composed of the model's step parts."""
    parts = model._boost_step_parts()
    x, y, sample_weight = prepared_batch(parts, *keras_private.unpack_x_y_sample_weight(data),
                                         predict=functools.partial(_forward_without_grad, model, state))
    trained_pos = _positions(model.trainable_variables, trained_variables(parts, model.trainable_variables))
    loss_fn = _loss_fn(model, state, x, y, sample_weight, trained_pos)
    step = StatelessStep(model, x, y, sample_weight, state, trained_pos, loss_fn)
    (_, aux), trained_grads = jax.value_and_grad(loss_fn, has_aux=True)(
        [step.trainable[p] for p in trained_pos], step.non_trainable
    )
    step.loss, step.y_pred, step.non_trainable, metrics_vars = aux
    step.grads = [None] * len(step.trainable)
    for pos, grad in zip(trained_pos, trained_grads):
        step.grads[pos] = grad

    owner = update_owner(parts)
    with keras_private.learning_rate_read_once(model.optimizer):
        if owner is None:
            step.trainable, optimizer_values = model.optimizer.stateless_apply(
                step.optimizer_values, step.grads, step.trainable)
            step.optimizer_values, extra_logs = list(optimizer_values), {}
        else:
            extra_logs = owner.stateless_apply(step) or {}
    if step.finite is not None:
        # Forward-pass state (BatchNorm statistics) is kept only on finite steps.
        for pos in _positions(model.non_trainable_variables, owner.restored_state(model)):
            step.non_trainable[pos] = ops.where(step.finite, step.non_trainable[pos], step.before[pos])
    for part in parts:
        extra_logs.update(part.stateless_finish(step))
    logs, metrics_vars = keras_private.update_metrics_variables(
        model, metrics_vars, step.loss, x, y, step.y_pred, sample_weight
    )
    return {**logs, **extra_logs}, (step.trainable, step.non_trainable, step.optimizer_values, metrics_vars)


def assign_each(pairs):
    """Assigns each `(variable, value)`."""
    for variable, value in pairs:
        variable.assign(value)


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


def distributed_logs(model, logs):
    """`logs` as they are: Keras' fit on this backend steps one program."""
    return logs


def symbolic_build_batch(model, iterator):
    """None: Keras' own build before `fit`."""
    return None
