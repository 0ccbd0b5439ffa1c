"""TensorFlow seams: GradientTape, tf.distribute collectives, MWMS fixes, the fused batch norm,
DimReduce's global-batch sums and worker roles."""

import contextlib
import threading

import tensorflow as tf
from keras import ops
from keras import tree

from keras_boost import keras_private
from keras_boost.backend import tensorflow_collectives

__all__ = [
    "all_gather_stacked",
    "all_reduce_sum",
    "all_replicas",
    "apply",
    "apply_if",
    "assign_each",
    "assign_where",
    "distributed_logs",
    "first_local_batch",
    "forward_without_grad",
    "training_batch_norm",
    "global_batch_sum",
    "in_replica_context",
    "is_chief",
    "is_multi_worker",
    "local_gradients",
    "logs_for_multi_worker",
    "loss_and_grads",
    "replica_layout",
    "run_on_replicas",
    "static_value",
    "symbolic_build_batch",
    "worker_role",
]


def loss_and_grads(model, x, y, sample_weight, trained, optimizer):
    """Forward, loss, `optimizer.scale_loss`, gradients of `trained` only."""
    with tf.GradientTape() as tape:
        y_pred = model(x, **keras_private.training_kwargs(model, True))
        loss = keras_private.compute_loss(model, x, y, y_pred, sample_weight)
        # The tracker shows the per-replica-unscaled loss, as Keras does.
        keras_private.loss_tracker(model).update_state(
            keras_private.unscale_loss_for_distribution(loss),
            sample_weight=tf.shape(next(i for i in tree.flatten(x) if i is not None))[0],
        )
        scaled = optimizer.scale_loss(loss)
    return y_pred, tape.gradient(scaled, trained)


def forward_without_grad(model, x):
    """`model(x)` in inference mode, outside the gradient."""
    return tree.map_structure(tf.stop_gradient, model(x, **keras_private.training_kwargs(model, False)))


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
    ) and keras_private.in_multi_worker_mode(strategy)


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


def distributed_logs(model, logs):
    """`logs` of a train or test step of `model`, in the form Keras can
    reduce under its strategy (`logs_for_multi_worker` across workers)."""
    return logs_for_multi_worker(logs) if is_multi_worker(model.distribute_strategy) else logs


def symbolic_build_batch(model, iterator):
    """`(strategy, batch)` to build `model` from before `fit` across workers
    (this worker's first local batch, see `first_local_batch`), else None
    (Keras' own build)."""
    strategy = keras_private.distribute_strategy(model)
    if iterator is None or strategy is None or not is_multi_worker(strategy):
        return None
    for _, _, it in iterator:
        return strategy, first_local_batch(strategy, next(it))
    return None


def apply(fn, args):
    return fn(*args)


# --- DimReduce under tf.distribute ------------------------------------------


def global_batch_sum(tensors):
    """The SUM over replicas of per-replica losses (and their gradients).

    Keras divides a mean-reduced loss by `num_replicas_in_sync` on each
    replica (`keras.losses.Loss`, and the added losses), so that the SUM of
    the per-replica losses is the loss of the global batch (the mean over
    replicas of their local means; equal replica batches make it the mean
    over the concatenated batch), and the SUM of their gradients its
    gradient, which is what Keras' optimizers all-reduce. One all-reduce
    for the whole list; every replica gets the same result. Identity on one
    replica.

    Example:

    ```python
    loss, flat_grad = global_batch_sum([loss, flatten(grads)])
    ```
    """
    ctx = tf.distribute.get_replica_context()
    if ctx is None or ctx.num_replicas_in_sync == 1:
        return list(tensors)
    return ctx.all_reduce(tf.distribute.ReduceOp.SUM, [tf.convert_to_tensor(t) for t in tensors])


def is_chief(cluster, task_type, task_id):
    """Whether `(task_type, task_id)` is the chief of the cluster dict
    `{"worker": [...], "chief": [...]}`: the "chief" task if the cluster has
    one, else worker 0 (TensorFlow's rule)."""
    if task_type == "chief":
        return True
    return "chief" not in cluster and task_type == "worker" and int(task_id or 0) == 0


def worker_role():
    """`(is_chief, workers)` of the strategy in scope: `(True, 1)` unless it
    is a MultiWorkerMirroredStrategy across several workers (where the chief
    computes DimReduce's basis and the other workers read it)."""
    strategy = tf.distribute.get_strategy()
    if not is_multi_worker(strategy):
        return True, 1
    resolver = strategy.cluster_resolver
    cluster = resolver.cluster_spec().as_dict()
    workers = len(cluster.get("chief", [])) + len(cluster.get("worker", []))
    return is_chief(cluster, resolver.task_type, resolver.task_id), workers


def assign_where(triples):
    """For each `(variable, keep_new, old)`: the variable keeps its value where
    `keep_new` holds, else gets `old` back (legal under tf.distribute)."""
    assign_each([(v, ops.where(keep_new, v.value, old)) for v, keep_new, old in triples])


def assign_each(pairs):
    """Assigns each `(variable, value)`; in replica context every replica's
    copy of a distributed variable gets that replica's value."""
    ctx = tf.distribute.get_replica_context()
    if ctx is None or not tf.distribute.has_strategy():
        for variable, value in pairs:  # cross-replica context, or no strategy
            variable.assign(value)
        return
    variables = [p[0] for p in pairs]

    # Distributed variables are updated in cross-replica context.
    def cross_replica(strategy, values):
        for variable, value in zip(variables, values):
            strategy.extended.update(
                variable.value, lambda v, x: v.assign(x), args=(value,), group=False
            )

    ctx.merge_call(cross_replica, args=([p[1] for p in pairs],))


# --- replica collectives (AdaSum) --------------------------------------------


def replica_layout():
    """`(replicas in sync, replicas on this worker)` of the current strategy."""
    strategy = tf.distribute.get_strategy()
    replicas = strategy.num_replicas_in_sync
    try:
        local = len(strategy.extended.worker_devices)
    except (AttributeError, NotImplementedError, RuntimeError):
        local = replicas
    return replicas, max(1, min(local, replicas))


def in_replica_context():
    ctx = tf.distribute.get_replica_context()
    return ctx is not None and tf.distribute.has_strategy()


def all_gather_stacked(tensors):
    """Each replica's copy of each tensor, stacked: `(replicas, *shape)`.

    A public replica-context collective (`ReplicaContext.all_gather`), so the
    same code runs on Mirrored, MultiWorkerMirrored and TPU strategies; all
    replicas issue the same gathers in the same order.
    """
    ctx = tf.distribute.get_replica_context()
    n = ctx.num_replicas_in_sync
    tensors = [tf.convert_to_tensor(t) for t in tensors]  # IndexedSlices -> dense
    gathered = ctx.all_gather([t[tf.newaxis] for t in tensors], axis=0)
    return [tf.reshape(g, [n, *t.shape]) for g, t in zip(gathered, tensors)]


# AdaSum's halving/doubling exchange: collectives within groups of replicas.
halving_rank = tensorflow_collectives.static_rank
pair_exchange = tensorflow_collectives.pair_exchange
block_sum = tensorflow_collectives.block_sum


def all_reduce_sum(tensors):
    """The SUM over replicas of each tensor, in its own dtype (replica context)."""
    ctx = tf.distribute.get_replica_context()
    return ctx.all_reduce(tf.distribute.ReduceOp.SUM, [tf.convert_to_tensor(t) for t in tensors])


_local_gradients_lock = threading.Lock()
_local_gradients_users = {}


@contextlib.contextmanager
def local_gradients(optimizer):
    """While tracing, `optimizer` (a Keras TF optimizer) applies the gradients
    it is given without its SUM all-reduce (the caller combined them).

    Keras' TF optimizers all-reduce inside `apply`
    (`TFOptimizer._all_reduce_sum_gradients`, private, stable since Keras
    3.5, exercised by the AdaSum tests); the attribute is set on this
    instance only while some replica is inside. MirroredStrategy traces the
    replicas in concurrent threads, hence the count under a lock.
    """
    if not keras_private.has_gradient_all_reduce(optimizer):
        raise TypeError(
            f"{type(optimizer).__name__} is not a Keras TensorFlow optimizer: its "
            "gradient all-reduce cannot be replaced."
        )
    key = id(optimizer)
    with _local_gradients_lock:
        if _local_gradients_users.get(key, 0) == 0:
            keras_private.replace_gradient_all_reduce(optimizer, list)
        _local_gradients_users[key] = _local_gradients_users.get(key, 0) + 1
    try:
        yield
    finally:
        with _local_gradients_lock:
            _local_gradients_users[key] -= 1
            if _local_gradients_users[key] == 0:
                del _local_gradients_users[key]
                keras_private.restore_gradient_all_reduce(optimizer)


def run_on_replicas(fn, args, variable):
    """Runs `fn(*args)` eagerly on every replica of `variable`'s strategy.

    A tf.function around `strategy.run`: the replica functions then trace
    into one graph and may all-reduce (e.g. an optimizer's apply).
    """
    value = getattr(variable, "value", variable)
    strategy = keras_private.distribute_strategy(value) or tf.distribute.get_strategy()
    with strategy.scope():
        tf.function(lambda: strategy.run(fn, args=args))()


def static_value(x):
    """The Python value of `x` when known without running a graph, else None."""
    value = tf.get_static_value(x)
    return None if value is None else int(value)


def training_batch_norm(x, gamma, beta, epsilon):
    """Training-mode batch norm of a channels-last 4-D float32 `x` in one
    `FusedBatchNormV3` op (and one `FusedBatchNormGradV3` backward).

    Returns `(y, batch mean, biased batch variance)`: the op reports the
    unbiased (Bessel-corrected) variance, which Keras' moving statistics do
    not use.
    """
    empty = tf.constant([], tf.float32)
    y, mean, unbiased, _, _, _ = tf.raw_ops.FusedBatchNormV3(
        x=x, scale=gamma, offset=beta, mean=empty, variance=empty, epsilon=epsilon,
        exponential_avg_factor=1.0, data_format="NHWC", is_training=True,
    )
    count = tf.cast(tf.size(x) // tf.shape(x)[-1], tf.float32)
    return y, mean, unbiased * ((count - 1.0) / tf.maximum(count, 1.0))
