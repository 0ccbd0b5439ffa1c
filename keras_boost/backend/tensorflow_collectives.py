"""Collectives within groups of replicas, for AdaSum's halving/doubling exchange.

`tf.distribute`'s replica context offers collectives over *all* replicas
only (`all_reduce`, `all_gather`), which give every replica the same
result. AdaSum's halving/doubling exchange (`keras_boost.algorithms.adasum`) needs
two more: swapping a tensor with one partner, and summing over a block of
2**l replicas. Both are TensorFlow's collective ops (the ones the strategies
themselves use) on groups of our own:

- group keys are computed from the group's members and the replica count
  (every member derives the same key without talking to the others), far
  above the strategy's own keys (`CollectiveKeys` counts up from 1);
- instance keys come from a per-replica counter: every replica issues the
  same collectives in the same order, so its k-th collective has the same
  key everywhere;
- each device's collectives are ordered by an ordering token (a resource
  variable per device, as `CollectiveReplicaLauncher` does): without it,
  automatic control dependencies order all the replicas' collectives of one
  traced function in program order, and a replica waits for a partner
  whose collective is ordered after its own next one (a deadlock).

These work under MirroredStrategy and MultiWorkerMirroredStrategy, where
each replica's function is traced with its replica id known; TPUStrategy
traces one program for all replicas, so `static_rank` is None there and
AdaSum gathers instead.
"""

import threading

import tensorflow as tf
from tensorflow.python.framework import ops as tf_ops
from tensorflow.python.ops import collective_ops
from tensorflow.python.ops import resource_variable_ops

__all__ = ["block_sum", "pair_exchange", "static_rank"]

_GROUP_KEY_BASE = 0x41440000  # "AD": clear of the strategies' own group keys
_INSTANCE_KEY_BASE = 0x41440000
_MAX_REPLICAS = 1 << 12  # group-key room per level and kind

_lock = threading.Lock()
_tokens = {}
_instance_keys = {}


def static_rank():
    """This replica's id as a Python int while its function is traced, or None.

    None outside a multi-replica replica context, under TPUStrategy (one
    program for every replica) and whenever the id is not known at trace
    time.
    """
    ctx = tf.distribute.get_replica_context()
    if ctx is None or not tf.distribute.has_strategy() or ctx.num_replicas_in_sync == 1:
        return None
    if "TPU" in type(tf.distribute.get_strategy()).__name__:  # TPUStrategy and its V1 twin
        return None
    rank = tf.get_static_value(ctx.replica_id_in_sync_group)
    return None if rank is None else int(rank)


def _ordering_token():
    device = _current_device()
    with _lock:
        token = _tokens.get(device)
        if token is None:
            with tf_ops.init_scope(), tf.device(device):
                token = resource_variable_ops.ResourceVariable(0.0, trainable=False)
            _tokens[device] = token
    return token.handle


def _current_device():
    # The replica's device: the strategy traces each replica under its device scope.
    return tf.constant(0.0).device


def _next_instance_key(rank):
    with _lock:
        key = _instance_keys.get(rank, _INSTANCE_KEY_BASE)
        _instance_keys[rank] = key + 1
    return key


def _group_key(kind, level, first_member):
    # Members, level and kind, and the replica count: strategies over
    # different replica counts in one process get different keys.
    replicas = tf.distribute.get_replica_context().num_replicas_in_sync
    slot = replicas.bit_length() * 64 + 2 * level + kind
    return _GROUP_KEY_BASE + slot * _MAX_REPLICAS + first_member


def pair_exchange(tensor, rank, partner, level):
    """The tensor `partner` sends in the same call (both call it); replica context.

    The two replicas' tensors are gathered in a group of two; a marker
    element (the sender's rank) picks the partner's row whatever order the
    group has. Bytes: each side sends its tensor once (plus one float).
    """
    tensor = tf.convert_to_tensor(tensor, tf.float32)
    tagged = tf.concat([tf.reshape(tensor, [-1]), [float(rank)]], axis=0)
    gathered = collective_ops.all_gather_v2(
        tagged[tf.newaxis], group_size=2, group_key=_group_key(0, level, min(rank, partner)),
        instance_key=_next_instance_key(rank), ordering_token=_ordering_token(),
    )
    gathered = tf.reshape(gathered, [2, -1])
    theirs = tf.where(tf.equal(gathered[0, -1], float(rank)), gathered[1], gathered[0])
    return tf.reshape(theirs[:-1], tf.shape(tensor))


def block_sum(tensor, rank, level):
    """The SUM of `tensor` over the block of `2 * 2**level` replicas holding
    `rank` (replicas `b * size .. (b + 1) * size - 1`); replica context."""
    size = 2 ** (level + 1)
    first = (rank // size) * size
    return collective_ops.all_reduce_v2(
        tf.convert_to_tensor(tensor, tf.float32), group_size=size,
        group_key=_group_key(1, level, first), instance_key=_next_instance_key(rank),
        merge_op="Add", final_op="Id", ordering_token=_ordering_token(),
    )
