"""TensorFlow seams: GradientTape, tf.distribute collectives, MWMS fixes."""

import tensorflow as tf
from keras import ops
from keras import tree
from keras.src.losses import loss as loss_module


def loss_and_grads(model, x, y, sample_weight, trained, optimizer):
    """Forward, loss, `optimizer.scale_loss`, gradients of `trained` only."""
    with tf.GradientTape() as tape:
        y_pred = model(x, training=True) if model._call_has_training_arg else model(x)
        loss = model._compute_loss(
            x=x, y=y, y_pred=y_pred, sample_weight=sample_weight, training=True
        )
        # The tracker shows the per-replica-unscaled loss, as Keras does.
        model._loss_tracker.update_state(
            loss_module.unscale_loss_for_distribution(loss),
            sample_weight=tf.shape(next(i for i in tree.flatten(x) if i is not None))[0],
        )
        scaled = optimizer.scale_loss(loss)
    return y_pred, tape.gradient(scaled, trained)


def all_replicas(flag):
    ctx = tf.distribute.get_replica_context()
    if ctx is None or ctx.num_replicas_in_sync == 1:
        return flag
    # SUM over replicas of a 0/1 "not finite" count (tf.distribute.ReduceOp has
    # only SUM and MEAN): one replica's overflow skips the step on all.
    not_finite = 1.0 - tf.cast(flag, tf.float32)
    return ctx.all_reduce(tf.distribute.ReduceOp.SUM, not_finite) < 0.5


def _branch_local(fn):
    """`fn` with its tensor arguments re-created inside the branch graph.

    Keras' optimizers all-reduce the gradients in `apply`; TensorFlow's
    all-reduce (a custom gradient) fails when some of its inputs were
    computed in the branch (e.g. centralized by GradientCentralization) and
    others are captured from outside it.
    """

    def local(*args):
        args = tree.map_structure(
            lambda a: tf.identity(a) if isinstance(a, tf.Tensor) else a, args
        )
        return fn(*args)

    return local


def apply_if(flag, fn, args):
    fn = _branch_local(fn)
    if tf.__internal__.distribute.strategy_supports_no_merge_call():
        ops.cond(flag, lambda: fn(*args), lambda: None)
        return

    # optimizer.apply calls merge_call, which is illegal inside a cond in
    # replica context: decide in cross-replica context (as LossScaleOptimizer
    # does), with a flag that all_replicas() already made identical.
    def cross_replica(strategy, flag, *args):
        flag = strategy.experimental_local_results(flag)[0]

        def run():
            strategy.extended.call_for_each_replica(fn, args=args)

        ops.cond(flag, run, lambda: None)

    tf.distribute.get_replica_context().merge_call(cross_replica, args=(flag, *args))


def is_multi_worker(strategy):
    return isinstance(
        strategy, tf.distribute.MultiWorkerMirroredStrategy
    ) and strategy.extended._in_multi_worker_mode()


def first_local_batch(strategy, batch):
    """Keras 3.15 builds from `strategy.reduce(MEAN, batch)`, which fails across
    workers (keras#20585); any replica's batch serves to build the model."""
    return tree.map_structure(
        lambda v: strategy.experimental_local_results(v)[0]
        if isinstance(v, tf.distribute.DistributedValues)
        else v,
        batch,
    )


def logs_for_multi_worker(logs):
    """Keras 3.15 reduces logs with `reduce(MEAN, v, axis=0)` across workers,
    which fails on scalars (keras#20585); a length-1 vector reduces to the
    mean over replicas."""
    return {k: ops.reshape(v, (1,)) for k, v in logs.items()}


def apply(fn, args):
    return fn(*args)


def assign_where(triples):
    """For each `(variable, keep_new, old)`: the variable keeps its value where
    `keep_new` holds, else gets `old` back (legal under tf.distribute)."""

    def assign(items):
        for variable, keep_new, old in items:
            variable.assign(ops.where(keep_new, variable.value, old))

    ctx = tf.distribute.get_replica_context()
    if ctx is None or not tf.distribute.has_strategy():
        assign(triples)  # cross-replica context, or no strategy at all
        return
    variables = [t[0] for t in triples]

    # Distributed variables are updated in cross-replica context, each
    # replica's copy from that replica's values (identical across replicas:
    # the gradients were all-reduced and the schedule is shared).
    def cross_replica(strategy, flags, olds):
        for variable, flag, old in zip(variables, flags, olds):
            strategy.extended.update(
                variable.value,
                lambda v, f, o: v.assign(tf.where(f, v, o)),
                args=(flag, old),
                group=False,
            )

    ctx.merge_call(cross_replica, args=([t[1] for t in triples], [t[2] for t in triples]))


def run_on_replicas(fn, args, variable):
    """Runs `fn(*args)` eagerly on every replica of `variable`'s strategy.

    A tf.function around `strategy.run`: the replica functions then trace
    into one graph and may all-reduce (e.g. an optimizer's apply).
    """
    value = getattr(variable, "value", variable)
    strategy = getattr(value, "_distribute_strategy", None) or tf.distribute.get_strategy()
    with strategy.scope():
        tf.function(lambda: strategy.run(fn, args=args))()


def static_value(x):
    """The Python value of `x` when known without running a graph, else None."""
    value = tf.get_static_value(x)
    return None if value is None else int(value)
