"""AdaSum under MirroredStrategy (8 logical CPUs) against a NumPy reference.

Run in a fresh process per replica count (MirroredStrategies over different
device counts cannot share a process: their collectives' group keys clash):
``python mirrored_adasum.py OUT_DIR N`` with N in 2, 3, 4, 8; writes
``OUT_DIR/adasum{N}.npz``. For every scenario it stores the weights after the
distributed run (``<name>_got``), the reference (``<name>_want``) and, where
it matters, the replica-copy spread (``<name>_spread``: max difference
between the copies of the mirrored variables) and ``<name>_skipped``.

References: each replica's local mean gradient is computed on one device
(a tape over that replica's shard of the global batch: MirroredStrategy
hands replica r the r-th consecutive slice of every global batch), combined
with the NumPy tree (``tests/adasum_reference.py``, bounded as AdaSum's
default ``norm_bound=True`` is) and applied with the
optimizer's formula in NumPy.
"""

import os
import sys

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

cpus = tf.config.list_physical_devices("CPU")
tf.config.set_logical_device_configuration(cpus[0], [tf.config.LogicalDeviceConfiguration()] * 8)

import keras  # noqa: E402

import keras_boost as boost  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from adasum_reference import np_tree  # noqa: E402

PER_REPLICA = 6
LR = 0.1
results = {}


def tree(values):
    """The NumPy tree as AdaSum's default (norm_bound=True) computes it."""
    return np_tree(values, norm_bound=True)


_strategies = {}


def strategy(n):
    # One strategy per process: two strategies' collectives share instance
    # keys (a TensorFlow limitation), whatever reduces with them.
    if n not in _strategies:
        _strategies[n] = tf.distribute.MirroredStrategy([f"/CPU:{i}" for i in range(n)])
    return _strategies[n]


def graph(seed=0):
    keras.utils.set_random_seed(seed)
    inputs = keras.Input((5,))
    h = keras.layers.Dense(4, activation="tanh", name="d0")(inputs)
    h = keras.layers.Dense(4, activation="tanh", name="d1")(h)
    return inputs, keras.layers.Dense(2, name="head")(h)


def data(n_batches, replicas, seed=0, identical=False):
    rng = np.random.default_rng(seed)
    rows = n_batches * replicas * PER_REPLICA
    x = rng.normal(size=(rows, 5)).astype("float32")
    y = rng.normal(size=(rows, 2)).astype("float32")
    if identical:  # every replica's shard of a batch is the same samples
        x = x.reshape(n_batches, replicas, PER_REPLICA, 5)[:, :1].repeat(replicas, 1).reshape(rows, 5)
        y = y.reshape(n_batches, replicas, PER_REPLICA, 2)[:, :1].repeat(replicas, 1).reshape(rows, 2)
    return x, y


def dataset(x, y, replicas):
    return tf.data.Dataset.from_tensor_slices((x, y)).batch(replicas * PER_REPLICA)


def shard_grads(weights, x, y, replicas, trained=None):
    """Per-replica local mean gradients (one device), for trained indices."""
    ref = keras.Model(*graph())
    ref.set_weights(weights)
    variables = ref.trainable_variables
    trained = list(range(len(variables))) if trained is None else trained
    out = []
    for r in range(replicas):
        xs, ys = x[r * PER_REPLICA:(r + 1) * PER_REPLICA], y[r * PER_REPLICA:(r + 1) * PER_REPLICA]
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((ref(xs) - ys) ** 2)
        grads = tape.gradient(loss, [variables[i] for i in trained])
        out.append([g.numpy().astype("float64") for g in grads])
    return out


def spread(model):
    worst = 0.0
    for v in model.trainable_variables:
        copies = [c.numpy() for c in v.value.values]
        worst = max(worst, max(float(np.abs(c - copies[0]).max()) for c in copies))
    return worst


def flat(weights):
    return np.concatenate([np.ravel(w) for w in weights])


def fit(model, x, y, replicas, **kwargs):
    model.fit(dataset(x, y, replicas), epochs=1, shuffle=False, verbose=0, **kwargs)


def record(name, model, want, skipped=None):
    results[f"{name}_got"] = flat(model.get_weights())
    results[f"{name}_want"] = flat(want)
    results[f"{name}_spread"] = spread(model)
    if skipped is not None:
        results[f"{name}_skipped"] = int(skipped.numpy())


def sgd_tree_step(weights, grads_per_replica):
    combined = [tree([g[i] for g in grads_per_replica]) for i in range(len(weights))]
    return [w - LR * c for w, c in zip(weights, combined)]


def tree_over_replicas(n):
    """The tree over per-replica local-mean gradients, different data per replica."""
    x, y = data(1, n, seed=n)
    with strategy(n).scope():
        model = keras.Model(*graph())
        opt = boost.AdaSum(keras.optimizers.SGD(LR))
        model.compile(optimizer=opt, loss="mse")
    w0 = model.get_weights()
    fit(model, x, y, n)
    record(f"tree{n}", model, sgd_tree_step(w0, shard_grads(w0, x, y, n)), opt.skipped_steps)
    results[f"tree{n}_exchange"] = opt.traced_exchange
    # The plain mean (what Keras would do), to show the two differ.
    mean = [np.mean([g[i] for g in shard_grads(w0, x, y, n)], 0) for i in range(len(w0))]
    results[f"tree{n}_mean"] = flat([w - LR * m for w, m in zip(w0, mean)])


def delta_mode_adam(n):
    """Delta mode: Adam's first step is -lr * g / (|g| + eps') elementwise per replica; the
    deltas are combined by the tree.
    """
    x, y = data(1, n, seed=11)
    with strategy(n).scope():
        model = keras.Model(*graph())
        model.compile(optimizer=boost.AdaSum(keras.optimizers.Adam(LR), reduce_on="delta"), loss="mse")
    w0 = model.get_weights()
    fit(model, x, y, n)
    # Keras' Adam puts epsilon outside the bias correction of v.
    eps = 1e-7 / np.sqrt(1 - 0.999)
    deltas = [[-LR * g / (np.abs(g) + eps) for g in grads] for grads in shard_grads(w0, x, y, n)]
    record("delta_adam", model, [w + tree([d[i] for d in deltas]) for i, w in enumerate(w0)])


def identical_replicas(n):
    """Identical data on every replica = the single-device run (3 Adam steps)."""
    for mode in ("grad", "delta"):
        x, y = data(3, n, seed=5, identical=True)
        with strategy(n).scope():
            model = keras.Model(*graph())
            model.compile(optimizer=boost.AdaSum(keras.optimizers.Adam(0.01), reduce_on=mode), loss="mse")
        single = keras.Model(*graph())
        single.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse")
        fit(model, x, y, n)
        one = x.reshape(3, n, PER_REPLICA, 5)[:, 0].reshape(-1, 5)
        fit(single, one, y.reshape(3, n, PER_REPLICA, 2)[:, 0].reshape(-1, 2), 1)
        record(f"identical_{mode}", model, single.get_weights())


def hierarchical_and_buckets(n):
    """Hierarchical: mean inside nodes of 2 replicas, AdaSum across the 2 nodes."""
    x, y = data(1, n, seed=7)
    with strategy(n).scope():
        model = keras.Model(*graph())
        opt = boost.AdaSum(keras.optimizers.SGD(LR), hierarchical=True, device_number=2)
        model.compile(optimizer=opt, loss="mse")
    w0 = model.get_weights()
    fit(model, x, y, n)
    grads = shard_grads(w0, x, y, n)
    nodes = [[(a + b) / 2 for a, b in zip(grads[r], grads[r + 1])] for r in (0, 2)]
    record("hierarchical", model, sgd_tree_step(w0, nodes))
    results["hierarchical_exchange"] = opt.traced_exchange
    # Fused buckets: gradient_split_groups changes the collectives, not the math.
    with strategy(n).scope():
        model = keras.Model(*graph())
        opt = boost.AdaSum(keras.optimizers.SGD(LR), gradient_split_groups=[1, 3])
        model.compile(optimizer=opt, loss="mse")
    model.set_weights(w0)
    fit(model, x, y, n)
    record("split", model, sgd_tree_step(w0, grads))
    results["split_exchange"] = opt.traced_exchange
    # The gather gives the same update (another order of float additions).
    with strategy(n).scope():
        model = keras.Model(*graph())
        opt = boost.AdaSum(keras.optimizers.SGD(LR), exchange="gather")
        model.compile(optimizer=opt, loss="mse")
    model.set_weights(w0)
    fit(model, x, y, n)
    record("gather", model, sgd_tree_step(w0, grads))
    results["gather_exchange"] = opt.traced_exchange


def non_finite_replica(n):
    """A non-finite input on replica 1 only, no loss scaling: the step is skipped everywhere,
    the weights stay bit-identical.
    """
    x, y = data(1, n, seed=8)
    x[PER_REPLICA + 2, 0] = np.inf
    with strategy(n).scope():
        model = keras.Model(*graph())
        opt = boost.AdaSum(keras.optimizers.SGD(LR, momentum=0.9))
        model.compile(optimizer=opt, loss="mse")
    w0 = model.get_weights()
    fit(model, x, y, n)
    record("nonfinite", model, w0, opt.skipped_steps)


def o2_with_freezing(n):
    """O2 with gradient freezing on 2 replicas (BoostModel drives the depths): each step
    combines the trained group's gradients only.
    """
    steps = 4
    rows = n * PER_REPLICA
    x, y = data(steps, n, seed=9)
    config = {
        "boost": {"mode": "manual", "less_bn": False, "grad_freeze": True, "adasum": True},
        "grad_freeze": {"param_groups": 3, "total_steps": steps, "freeze_p": 0.9, "seed": 3},
    }
    with strategy(n).scope():
        model = boost.BoostModel(*graph(), boost_level="O2", boost_config_dict=config)
        model.compile(optimizer=keras.optimizers.SGD(LR), loss="mse")
        status = model.check_adasum_enable()
    results["o2_status"] = int(bool(status))
    weights = model.get_weights()
    fit(model, x, y, n)
    freeze = boost.optimizers.find_in_chain(model.optimizer, boost.optimizers.FreezeOptimizer)
    depths = [freeze.depth_at(s) for s in range(steps)]
    results["o2_freeze_depths"] = np.array(depths)
    for s, depth in enumerate(depths):
        trained = freeze.trained_indices(depth)
        grads = shard_grads(weights, x[s * rows:(s + 1) * rows], y[s * rows:(s + 1) * rows], n, trained)
        for j, i in enumerate(trained):
            weights[i] = weights[i] - LR * tree([g[j] for g in grads])
    record("o2_freeze", model, weights)


def o2_with_accumulation(n):
    """O2 with accumulation (k = 2) on 2 replicas: one combine per update, of each replica's
    mean over its micro-batches.
    """
    config = {
        "boost": {"mode": "manual", "less_bn": False, "grad_freeze": False, "adasum": True,
                  "grad_accumulation": True},
        "grad_accumulation": {"grad_accumulation_step": 2},
    }
    rows = n * PER_REPLICA
    x, y = data(4, n, seed=10)
    with strategy(n).scope():
        model = boost.BoostModel(*graph(), boost_level="O2", boost_config_dict=config)
        model.compile(optimizer=keras.optimizers.SGD(LR), loss="mse")
    weights = model.get_weights()
    fit(model, x, y, n)
    for update in range(2):
        micro = [
            shard_grads(weights, x[m * rows:(m + 1) * rows], y[m * rows:(m + 1) * rows], n)
            for m in (2 * update, 2 * update + 1)
        ]
        local = [[(a + b) / 2 for a, b in zip(micro[0][r], micro[1][r])] for r in range(n)]
        weights = sgd_tree_step(weights, local)
    record("o2_accumulation", model, weights)


def o2_with_loss_scaling(n):
    """O2 with dynamic loss scaling: an overflow on replica 1 skips the step."""
    x, y = data(1, n, seed=12)
    x[PER_REPLICA + 1, 3] = np.inf
    config = {"boost": {"mode": "manual", "less_bn": False, "grad_freeze": False, "adasum": True}}
    with strategy(n).scope():
        model = boost.BoostModel(*graph(), boost_level="O2", boost_config_dict=config, loss_scale="dynamic")
        model.compile(optimizer=keras.optimizers.SGD(LR), loss="mse")
    w0 = model.get_weights()
    fit(model, x, y, n)
    record("o2_loss_scale_overflow", model, w0)
    results["o2_loss_scale"] = float(boost.optimizers.find_in_chain(model.optimizer, boost.optimizers.DynamicLossScaleOptimizer).dynamic_scale.numpy())


SCENARIOS = {2: [tree_over_replicas, o2_with_freezing, o2_with_accumulation, o2_with_loss_scaling], 3: [tree_over_replicas],
             4: [tree_over_replicas, delta_mode_adam, identical_replicas, hierarchical_and_buckets, non_finite_replica],
             8: [tree_over_replicas]}

if __name__ == "__main__":
    n = int(sys.argv[2])
    for scenario in SCENARIOS[n]:
        scenario(n)
    np.savez(os.path.join(sys.argv[1], f"adasum{n}.npz"), **results)
