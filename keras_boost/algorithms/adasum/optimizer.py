"""`AdaSum`: combines the replicas' updates with the AdaSum rule.

Data-parallel training sums (averages) the replicas' gradients. AdaSum
(Maleki et al., MLSys 2021) combines them per variable with
`keras_boost.algorithms.adasum` over a binary tree of replicas instead: orthogonal
updates add, parallel ones average, so a large global batch keeps the
progress of its parts. Level O2 switches it on.

Under `tf.distribute` (MirroredStrategy, MultiWorkerMirroredStrategy,
TPUStrategy) this wrapper takes over the gradient all-reduce of the wrapped
optimizer, in replica context:

1. each replica's input is its local mean gradient: Keras pre-scales every
   loss by 1 / replicas, which is undone here, so identical replicas give
   exactly the single-device update;
2. the tree is computed per bucket of variables (`gradient_split_groups`;
   one bucket by default) in one of two ways (`exchange_pattern()`):
   - for 2**k replicas under Mirrored / MultiWorkerMirrored (not
     hierarchical): Horovod's halving/doubling exchange
     (`keras_boost.algorithms.adasum.halving_doubling`; pair and block collectives
     in `keras_boost.backend.tensorflow_collectives`): each level swaps
     halves with a partner and combines them, the last gathers the pieces.
     Every replica sends about S (its S gradient values once) and receives
     as much again: a ring all-reduce's bytes;
   - otherwise (other counts, hierarchical mode, TPUStrategy, or
     `exchange="gather"`): the inputs are gathered from all replicas
     (`ReplicaContext.all_gather`) and every replica reduces the same tree
     locally; each receives (n - 1) S;
   either way every replica ends with the same result;
3. the wrapped optimizer applies the combined gradient without its own
   all-reduce (`reduce_on="grad"`), or - `reduce_on="delta"`, Horovod's and
   MindSpore's way for adaptive optimizers - every replica first takes its
   own optimizer step on its local gradient, with its own optimizer state,
   and the weight deltas of those steps are combined and applied.

Step size: AdaSum gives the mean for parallel inputs but the sum for
orthogonal ones, N times the mean's step, so at a learning rate tuned for the
mean all-reduce (Keras' default) noisy, nearly orthogonal replica gradients
act like an up to N times larger rate (MobileNetV2 on 2 replicas of 32
images: 1.9-2.0 times; `docs/methods/adasum.md`). `norm_bound=True` (the
default) scales every pairwise combination down, when it is longer, to the
norm of its longer input, so the update is never longer than the longest
replica's: sqrt(N) times the mean's for orthogonal inputs of equal norm
(N times unbounded); parallel or opposite inputs, whose AdaSum is their mean,
pass unchanged, and identical replicas still give exactly the
single-replica update. The three dot
products the rule computes give the combination's norm, so the bound costs
no communication. `norm_bound=False` is Horovod's unbounded rule; Horovod
then advises a learning rate of about 2-2.5 times the best single-worker
rate, not the rate scaled by the number of workers.

A step in which any replica's gradient is not finite is skipped on every
replica (weights and optimizer state unchanged) and counted in
`skipped_steps`; the finite flag is one scalar all-reduce.

On one replica (no strategy, or Keras' JAX and torch `fit`, which step one
program) AdaSum is the identity: the wrapper passes the gradients through
and warns once.
"""

import contextlib
import math
import warnings

import keras
import numpy as np
from keras import ops

from keras_boost import keras_private
from keras_boost import backend as kb_backend
from keras_boost import config as config_lib
from keras_boost.errors import NoEffectWarning
from keras_boost.algorithms.adasum.reduce import adasum_tree
from keras_boost.algorithms.adasum.reduce import bit_reversed
from keras_boost.algorithms.adasum.reduce import group_mean
from keras_boost.algorithms.adasum.reduce import halving_doubling
from keras_boost.algorithms.adasum.reduce import halving_levels
from keras_boost.algorithms.adasum.reduce import run_collectives
from keras_boost.algorithms.loss_scaling import all_finite
from keras_boost.algorithms.adasum.combiner import ReplicaCombiner
from keras_boost.algorithms.status import AlgorithmStatus

__all__ = [
    "AdaSum",
    "adasum_status",
    "bytes_sent_per_replica",
    "EXCHANGES",
    "model_adasum_status",
    "REDUCE_ON",
    "replica_plan",
]

REDUCE_ON = ("grad", "delta")
EXCHANGES = ("auto", "gather")


def replica_plan(replicas, local_replicas, hierarchical=False, device_number=None):
    """Checks an AdaSum layout; returns `(group_size, groups)`.

    `groups` inputs enter the AdaSum tree, each the plain mean of
    `group_size` consecutive replicas (1 unless `hierarchical`).
    `device_number` is the number of replicas per node (MindSpore's name);
    `None` or `"auto"` takes this worker's replica count.
    """
    if device_number in (None, "auto"):
        device_number = local_replicas
    if device_number > replicas or replicas % device_number:
        raise ValueError(
            f"device_number={device_number} does not fit the strategy's {replicas} "
            f"replica(s) ({local_replicas} on this worker): it must divide the replica "
            "count; leave it unset ('auto') to take the replicas per worker."
        )
    group_size = device_number if hierarchical else 1
    return group_size, replicas // group_size


def adasum_status(replicas, local_replicas, hierarchical=False, device_number=None):
    """The `AlgorithmStatus` of a replica layout (see `replica_plan`)."""
    if replicas == 1:
        return AlgorithmStatus(False, (
            "one replica: AdaSum is the identity (it combines replicas under a "
            "tf.distribute strategy with several replicas on the tensorflow backend; "
            f"backend here: {keras.backend.backend()!r})"
        ))
    try:
        group_size, groups = replica_plan(replicas, local_replicas, hierarchical, device_number)
    except ValueError as error:
        return AlgorithmStatus(False, str(error))
    if groups == 1:
        return AlgorithmStatus(False, (
            f"hierarchical with device_number={group_size} puts all {replicas} replicas in "
            "one node: the update is their plain mean, AdaSum has nothing to combine"
        ))
    inputs = f"{groups} node means of {group_size} replicas" if group_size > 1 else f"{groups} replicas"
    return AlgorithmStatus(True, f"AdaSum over {inputs}")


def _check_reduce_on(reduce_on):
    if reduce_on not in REDUCE_ON:
        raise ValueError(
            f"reduce_on must be one of {list(REDUCE_ON)} ('grad': combine the gradients; "
            f"'delta': combine the weight deltas of local steps), got {reduce_on!r}."
        )
    return reduce_on


def bytes_sent_per_replica(num_values, replicas, pattern, num_tensors=1, width=4):
    """Bytes one replica sends per combine, for `num_values` gradient values.

    The standard cost models (bandwidth term only):

    - `"ring_all_reduce"` (Keras' mean, `CompressedAllReduce`): reduce-scatter
      then all-gather, `2 (n - 1) / n * S`;
    - `"all_gather"` (AdaSum's gather): `(n - 1) * S` in a ring all-gather;
    - `"halving_doubling"` (AdaSum for 2**k replicas): halves of the current
      vector at each level, `(1 - 1 / n) * S`, plus a ring all-reduce of three
      float32 dot products per tensor within each level's block, plus the
      final gather of the chunks, `(1 - 1 / n) * S`: a ring all-reduce's
      bytes plus the dot products;

    where `S = num_values * width` (float32: 4; one float32 marker per pair
    exchange is included).

    Example:

    ```python
    bytes_sent_per_replica(1_000_000, 8, "halving_doubling") / bytes_sent_per_replica(
        1_000_000, 8, "ring_all_reduce")                      # ~1.0
    bytes_sent_per_replica(1_000_000, 8, "all_gather") / ...  # 4.0
    ```
    """
    n, size = int(replicas), int(num_values) * int(width)
    if pattern == "ring_all_reduce":
        return 2 * (n - 1) * size // n
    if pattern == "all_gather":
        return (n - 1) * size
    if pattern == "halving_doubling":
        levels = halving_levels(n)
        padded = -(-int(num_values) // n) * n * int(width)
        sent = sum(padded // 2 ** (level + 1) + 4 for level in range(levels))
        dot_bytes = 3 * (int(num_tensors) + 1) * 4  # a.b, a.a, b.b per tensor (+ padding)
        dots = sum(2 * (2 ** (level + 1) - 1) * dot_bytes // 2 ** (level + 1) for level in range(levels))
        return sent + dots + (n - 1) * padded // n
    raise ValueError(
        f"Unknown pattern {pattern!r}; valid: 'ring_all_reduce', 'all_gather', 'halving_doubling'."
    )


@keras.saving.register_keras_serializable(package="keras_boost")
class AdaSum(ReplicaCombiner):
    """Combines the per-replica updates with AdaSum instead of their mean.

    Args:
        optimizer: the `keras.optimizers.Optimizer` to wrap (plain Keras
            optimizers and keras_boost wrappers alike).
        reduce_on: `"grad"` (combine gradients; one optimizer state shared
            by all replicas) or `"delta"` (each replica steps its own
            optimizer state on its local gradient; the weight deltas are
            combined, as Horovod and MindSpore do for Adam/LAMB).
        hierarchical: `False`: AdaSum over all replicas. `True`: the plain
            mean inside each node of `device_number` replicas, AdaSum across
            nodes (MindSpore's layout).
        device_number: replicas per node; `None` or `"auto"` takes the
            replicas per worker of the strategy. It must divide the replica
            count (checked when the optimizer is built).
        gradient_split_groups: `None` (one fused collective for all
            variables) or increasing split indices into the variable list,
            e.g. `[40, 80]` gathers variables 0-39, 40-79 and 80+ in three
            collectives.
        exchange: `"auto"` (the halving/doubling exchange where it can
            run, else the gather) or `"gather"` (always the gather; the
            same result up to the order of float additions).
        norm_bound: `True` (default): each pairwise combination is scaled
            down, when it is longer, to the norm of its longer input, so the
            combined update is never longer than the longest replica's
            (sqrt(N) times the mean's for orthogonal inputs of equal norm,
            where the unbounded rule reaches N times). `False`: Horovod's
            unbounded rule (then use Horovod's learning rate, about 2-2.5
            times the best single-worker one, not a rate tuned for the
            mean all-reduce).
        name: optional name.

    Example:

    ```python
    strategy = tf.distribute.MirroredStrategy()
    with strategy.scope():
        model = make_model()
        model.compile(optimizer=boost.AdaSum(keras.optimizers.SGD(0.1)),
                      loss="sparse_categorical_crossentropy")
    model.fit(dataset, epochs=3)
    ```
    """

    single_replica_effect = (
        "AdaSum is the identity there: the gradients are applied unchanged. It combines "
        "replicas under MirroredStrategy, MultiWorkerMirroredStrategy or TPUStrategy on the "
        "tensorflow backend."
    )

    def __init__(
        self, optimizer, reduce_on="grad", hierarchical=False, device_number=None,
        gradient_split_groups=None, exchange="auto", norm_bound=True, name=None, **kwargs,
    ):
        super().__init__(optimizer, name=name or "adasum", **kwargs)
        self.reduce_on = _check_reduce_on(reduce_on)
        if exchange not in EXCHANGES:
            raise ValueError(f"exchange must be one of {list(EXCHANGES)}, got {exchange!r}.")
        self.exchange = exchange
        if not isinstance(norm_bound, bool):
            raise TypeError(f"norm_bound must be True or False, got {norm_bound!r}.")
        self.norm_bound = norm_bound
        if not isinstance(hierarchical, bool):
            raise TypeError(f"hierarchical must be True or False, got {hierarchical!r}.")
        self.hierarchical = hierarchical
        if device_number is not None:
            device_number = config_lib.check_value("common", "device_number", device_number)
        self.device_number = None if device_number == "auto" else device_number
        self.gradient_split_groups = config_lib.check_value(
            "common", "gradient_split_groups", gradient_split_groups
        )

    # --- state -------------------------------------------------------------

    def _build_own(self, var_list):
        super()._build_own(var_list)
        n = len(var_list)
        if self.gradient_split_groups and self.gradient_split_groups[-1] >= n:
            raise ValueError(
                f"gradient_split_groups={self.gradient_split_groups} splits a list of {n} "
                f"variables: every split index must be below {n}."
            )
        replicas, _, groups = self.layout()  # validates device_number
        if replicas > 1 and groups == 1:
            warnings.warn(f"AdaSum {self.name!r}: {self.status().reason}.", NoEffectWarning, stacklevel=5)

    def status(self):
        """The `AlgorithmStatus` under the current strategy."""
        replicas, local = kb_backend.current().replica_layout()
        return adasum_status(replicas, local, self.hierarchical, self.device_number)

    def layout(self):
        """`(replicas, group_size, groups)` under the current strategy."""
        replicas, local = kb_backend.current().replica_layout()
        group_size, groups = replica_plan(replicas, local, self.hierarchical, self.device_number)
        return replicas, group_size, groups

    # --- the combine ---------------------------------------------------------

    def _buckets(self, positions):
        """Positions grouped by `gradient_split_groups` (one fused gather each)."""
        edges = list(self.gradient_split_groups or [])
        buckets = [[] for _ in range(len(edges) + 1)]
        for p in positions:
            buckets[sum(p >= e for e in edges)].append(p)
        return [b for b in buckets if b]

    def combine(self, tensors):
        """AdaSum over replicas of each tensor (None passes); replica context."""
        seam = kb_backend.current()
        _, group_size, _ = self.layout()
        rank = self._halving_rank()
        # What the last traced step used (tests and benchmarks read it).
        self.traced_exchange = "all_gather" if rank is None else "halving_doubling"
        out = list(tensors)
        present = [i for i, t in enumerate(tensors) if t is not None]
        for bucket in self._buckets(present):
            flat = ops.concatenate(
                [ops.reshape(ops.cast(tensors[i], "float32"), (-1,)) for i in bucket]
            )
            sizes = [math.prod(tuple(tensors[i].shape)) for i in bucket]
            starts = [sum(sizes[:j]) for j in range(len(sizes))]
            if rank is not None:
                combined = self._halving_doubling(flat, sizes, rank)
                pieces = [combined[start : start + size] for start, size in zip(starts, sizes)]
            else:
                gathered = seam.all_gather_stacked([flat])[0]  # (replicas, total)
                if group_size > 1:
                    gathered = group_mean(gathered, group_size)
                pieces = [
                    adasum_tree(gathered[:, start : start + size], self.norm_bound)
                    for start, size in zip(starts, sizes)
                ]
            for i, piece in zip(bucket, pieces):
                out[i] = ops.cast(ops.reshape(piece, tuple(tensors[i].shape)), tensors[i].dtype)
        return out

    def exchange_pattern(self):
        """How `combine` moves the gradients under the current strategy:
        `"halving_doubling"` (2**k replicas on Mirrored / MultiWorkerMirrored,
        not hierarchical, `exchange="auto"`: each replica sends and receives
        about a ring all-reduce's bytes), `"all_gather"` (every replica
        receives every gradient: n / 2 times that), or None on one replica.
        Call it where `combine` runs (replica context) for the exact answer;
        elsewhere it tells from the replica count and options alone (after a
        step, `traced_exchange` holds what the traced step used)."""
        replicas, group_size, _ = self.layout()
        if replicas == 1:
            return None
        if self.exchange == "gather" or group_size > 1 or replicas & (replicas - 1):
            return "all_gather"
        seam = kb_backend.current()
        if seam.in_replica_context() and seam.halving_rank() is None:
            return "all_gather"  # TPUStrategy: one program for every replica
        return "halving_doubling"

    def _halving_rank(self):
        if self.exchange_pattern() != "halving_doubling":
            return None
        return kb_backend.current().halving_rank()

    def _halving_doubling(self, flat, sizes, rank):
        """AdaSum of `flat` (one bucket, per-tensor `sizes`) by the
        halving/doubling exchange (`keras_boost.algorithms.adasum`)."""
        seam = kb_backend.current()
        replicas, _, _ = self.layout()
        levels = halving_levels(replicas)
        total = sum(sizes)
        pad = (-total) % replicas  # every level halves the vector
        ids = np.repeat(np.arange(len(sizes) + 1, dtype="int32"), [*sizes, pad])
        x = ops.concatenate([flat, ops.zeros((pad,), "float32")]) if pad else flat
        chunk = run_collectives(
            halving_doubling(x, ops.convert_to_tensor(ids), len(sizes) + 1, rank, replicas, self.norm_bound),
            exchange=lambda t, level: seam.pair_exchange(t, rank, rank ^ (2**level), level),
            block_sum=lambda t, level: seam.block_sum(t, rank, level),
        )
        chunks = seam.all_gather_stacked([chunk])[0]  # (replicas, len / replicas), by replica id
        ordered = ops.concatenate([chunks[bit_reversed(p, levels)] for p in range(replicas)], axis=0)
        return ordered[:total]

    # --- updates -------------------------------------------------------------

    def _apply(self, grads, trainable_variables):
        if trainable_variables is None:
            trainable_variables = keras_private.optimizer_trained_variables(self)
        trainable_variables = list(trainable_variables)
        seam = kb_backend.current()
        replicas, _, _ = self.layout()
        if replicas == 1 or not seam.in_replica_context():
            self._warn_single_replica()
            self.inner_optimizer.apply(grads, trainable_variables)
            return
        # Local mean gradients: undo Keras' 1 / replicas loss pre-scaling.
        local = [None if g is None else g * ops.cast(replicas, g.dtype) for g in grads]
        finite = seam.all_replicas(all_finite(local))
        step = self._grad_step if self.reduce_on == "grad" else self._delta_step
        seam.apply_if(finite, step, (local, trainable_variables))
        self.skipped_steps.assign_add(1 - ops.cast(finite, "int32"))

    def _grad_step(self, local, variables):
        combined = self.combine(local)
        with kb_backend.current().local_gradients(self._innermost()):
            self.inner_optimizer.apply(combined, variables)

    def _delta_step(self, local, variables):
        seam = kb_backend.current()
        # The replicas agree on the weights here; each steps its own copy.
        starts = [ops.copy(v.value) for v in variables]
        with seam.local_gradients(self._innermost()):
            self.inner_optimizer.apply(local, variables)
        deltas = [
            None if g is None else v.value - s for g, v, s in zip(local, variables, starts)
        ]
        combined = self.combine(deltas)
        seam.assign_each([
            (v, s + c) for v, s, c in zip(variables, starts, combined) if c is not None
        ])

    # --- serialization -------------------------------------------------------

    def get_config(self):
        config = super().get_config()
        config.update(
            reduce_on=self.reduce_on,
            exchange=self.exchange,
            norm_bound=self.norm_bound,
            hierarchical=self.hierarchical,
            device_number=self.device_number,
            gradient_split_groups=self.gradient_split_groups,
        )
        return config


def model_adasum_status(model):
    """The `AlgorithmStatus` of AdaSum for a `BoostModel` under its strategy
    (`BoostModel.check_adasum_enable`)."""
    config = model.boost_config
    if not config["boost"]["adasum"]:
        return AlgorithmStatus(False, f"adasum is off in this model's config (level {model.boost_level!r})")
    tf_backend = keras.backend.backend() == "tensorflow"
    with model.distribute_strategy.scope() if tf_backend else contextlib.nullcontext():
        replicas, local = kb_backend.current().replica_layout()
    return adasum_status(replicas, local, config["adasum"]["hierarchical"], config["common"]["device_number"])
