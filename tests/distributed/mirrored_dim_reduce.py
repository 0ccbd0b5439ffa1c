"""DimReduce stage 2 under MirroredStrategy on N logical CPUs.

Run in a fresh process (the logical devices must be configured before any TF
op): ``python mirrored_dim_reduce.py OUT_DIR N``. Writes
``OUT_DIR/dim_reduce{N}.npz``, which ``tests/test_distribute_tf.py`` asserts
on; the script itself only fails on setup errors.

Scenarios (each: 3 DimReduce steps, one global batch per step):

- "same": a dense tanh net (no BatchNormalization), the basis from the PCA
  of a stage-1 trajectory; every replica gets the SAME batch (a dataset
  from a function, whose consecutive elements go to the replicas in turn).
  Reference: one device, no strategy, that batch.
- "split": the same net, `fit` splits each global batch over the replicas
  (different data per replica). Reference: one device, the global batches.
- "armijo" (N = 2): least squares, the two replicas' halves of the batch
  scaled so that each replica's OWN Armijo test (its loss, the shared
  direction) decides differently from the test on the mean loss at some
  step. Reference: a NumPy implementation of the step on the mean loss.

Also recorded: how many times the PCA ran (once per process), whether every
replica's copy of the weights, the basis and the DimReduce state is
bit-identical, and `check_dim_reduce_enable()`.
"""

import os
import sys

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

N = int(sys.argv[2]) if len(sys.argv) > 2 else 2
cpus = tf.config.list_physical_devices("CPU")
tf.config.set_logical_device_configuration(cpus[0], [tf.config.LogicalDeviceConfiguration()] * N)

import keras  # noqa: E402

import keras_boost as boost  # noqa: E402
from keras_boost.algorithms.dim_reduce import optimizer as dim_reduce_module  # noqa: E402

STEPS = 3
LOCAL = 8  # rows per replica and step
RHO, GAMMA, ALPHA, SIGMA = 0.55, 0.9, 0.01, 0.4

PCA_CALLS = [0]
_pca = dim_reduce_module.trajectory_pca


def _counted_pca(*args, **kwargs):
    PCA_CALLS[0] += 1
    return _pca(*args, **kwargs)


dim_reduce_module.trajectory_pca = _counted_pca


def config(pca_mat_path, weight_load_dir=None, n_components=4):
    return {
        "boost": {"mode": "manual", "dim_reduce": True},
        "dim_reduce": {"pca_mat_path": pca_mat_path, "weight_load_dir": weight_load_dir,
                       "n_components": n_components, "rho": RHO, "gamma": GAMMA, "alpha": ALPHA,
                       "sigma": SIGMA},
    }


def dense_net(cls=keras.Model, **kwargs):
    init = keras.initializers.GlorotUniform(seed=0)
    inputs = keras.Input((5,))
    h = keras.layers.Dense(8, activation="tanh", kernel_initializer=init, name="d1")(inputs)
    return cls(inputs, keras.layers.Dense(3, kernel_initializer=init, name="d2")(h), **kwargs)


def stage_one(out_dir):
    """A short SGD run that leaves 8 snapshots; its final weights start stage 2."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 5)).astype("float32")
    y = rng.normal(size=(64, 3)).astype("float32")
    model = dense_net()
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    model.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0,
              callbacks=[boost.callbacks.WeightTrajectory(os.path.join(out_dir, "traj"), every=1)])
    return model.get_weights()


def stage_two(strategy, cfg, weights):
    with strategy.scope():
        model = dense_net(boost.BoostModel, boost_config_dict=cfg)
        model.set_weights(weights)
        model.compile(optimizer="sgd", loss="mse")
    return model


def flat(model):
    return np.concatenate([np.ravel(keras.ops.convert_to_numpy(v.value)) for v in model.trainable_variables])


def spread(strategy, variables):
    """Largest difference between any replica's copy and replica 0's."""
    worst = 0.0
    for v in variables:
        copies = [np.asarray(t.numpy(), dtype="float64")
                  for t in strategy.experimental_local_results(getattr(v, "value", v))]
        assert len(copies) == strategy.num_replicas_in_sync
        worst = max([worst] + [float(np.abs(c - copies[0]).max()) for c in copies])
    return worst


def the_dim_reduce(model):
    return boost.optimizers.find_in_chain(model.optimizer, boost.optimizers.DimReduce)


def dim_reduce_variables(model):
    dr = the_dim_reduce(model)
    return [dr.basis, *dr.state_variables(), dr.accepted_steps]


def every_replica_gets(strategy, batches):
    """A distributed dataset whose step s gives replica r `batches[s][r]`."""
    xs = np.stack([b[0] for step in batches for b in step])
    ys = np.stack([b[1] for step in batches for b in step])

    def dataset_fn(context):
        assert context.num_input_pipelines == 1
        return tf.data.Dataset.from_tensor_slices((xs, ys))

    return strategy.distribute_datasets_from_function(dataset_fn)


def dense_scenarios(out_dir, strategy, arrays):
    start = stage_one(out_dir)
    cfg = config(os.path.join(out_dir, "pca.npy"), os.path.join(out_dir, "traj"))
    rng = np.random.default_rng(1)
    x = rng.normal(size=(STEPS * N * LOCAL, 5)).astype("float32")
    y = rng.normal(size=(STEPS * N * LOCAL, 3)).astype("float32")

    # "same": every replica trains on the same local batch.
    model = stage_two(strategy, cfg, start)
    arrays["pca_calls_after_build"] = PCA_CALLS[0]
    status = model.check_dim_reduce_enable()
    arrays["status_enabled"] = bool(status)
    arrays["status_reason"] = status.reason
    local = [(x[s * LOCAL:(s + 1) * LOCAL], y[s * LOCAL:(s + 1) * LOCAL]) for s in range(STEPS)]
    history = model.fit(every_replica_gets(strategy, [[b] * N for b in local]), epochs=STEPS,
                        steps_per_epoch=1, verbose=0)
    arrays["same_got"] = flat(model)
    arrays["same_accepted"] = np.asarray(history.history["line_search_accepted"])
    arrays["same_spread"] = spread(strategy, model.trainable_variables + dim_reduce_variables(model))
    arrays["basis_file_equal"] = bool(np.array_equal(
        keras.ops.convert_to_numpy(the_dim_reduce(model).basis.value), np.load(cfg["dim_reduce"]["pca_mat_path"])))
    reference = stage_two(tf.distribute.get_strategy(), cfg, start)
    history = reference.fit(np.concatenate([b[0] for b in local]), np.concatenate([b[1] for b in local]),
                            batch_size=LOCAL, epochs=1, shuffle=False, verbose=0)
    arrays["same_want"] = flat(reference)
    arrays["same_want_accepted"] = int(the_dim_reduce(reference).accepted_steps.numpy())

    # "split": fit hands each replica its share of the global batch.
    model = stage_two(strategy, cfg, start)
    history = model.fit(x, y, batch_size=N * LOCAL, epochs=1, shuffle=False, verbose=0)
    arrays["split_got"] = flat(model)
    arrays["split_loss"] = np.asarray(history.history["loss"])
    arrays["split_spread"] = spread(strategy, model.trainable_variables + dim_reduce_variables(model))
    reference = stage_two(tf.distribute.get_strategy(), cfg, start)
    history = reference.fit(x, y, batch_size=N * LOCAL, epochs=1, shuffle=False, verbose=0)
    arrays["split_want"] = flat(reference)
    arrays["split_want_loss"] = np.asarray(history.history["loss"])
    arrays["split_accepted"] = int(the_dim_reduce(model).accepted_steps.numpy())
    arrays["split_want_accepted"] = int(the_dim_reduce(reference).accepted_steps.numpy())
    arrays["pca_calls"] = PCA_CALLS[0]


# --- the Armijo decision on the mean loss (NumPy reference) --------------------------


def np_steps(parts, basis, steps, trials=2):
    """MindSpore's step on the MEAN loss over `parts` (one (x, y) per replica);
    also each replica's own decision (its loss in the Armijo test, the shared
    direction). Returns `(w, steps taken, own decisions, smallest margin)`,
    the margin being the relative gap of the mean-loss tests to their bar
    (float32 rounding must not flip them)."""

    def loss(w, x, y):
        return float(np.mean((x @ w - y[:, 0]) ** 2))

    def grad(w, x, y):
        return 2 * x.T @ (x @ w - y[:, 0]) / len(x)

    def mean_loss(w):
        return float(np.mean([loss(w, *p) for p in parts]))

    k, n = basis.shape
    w, h, g_last, s, init, m = np.zeros(n), np.eye(k), np.zeros(k), np.zeros(k), False, np.zeros(n)
    taken, own, margins = [], [], []
    for _ in range(steps):
        g = np.mean([grad(w, *p) for p in parts], axis=0)
        g_k = basis @ g
        candidate = h
        if init:
            y_k = g_k - g_last
            if y_k @ s > 1e-20:
                rho = 1 / (y_k @ s)
                left = np.eye(k) - rho * np.outer(s, y_k)
                candidate = left @ h @ left.T + rho * np.outer(s, s)
        d_k = -candidate @ g_k
        d = basis.T @ d_k
        slope = g_k @ d_k

        def choose(f, margins=[]):
            for i in range(trials):
                r = RHO**i
                gap = f(w + r * d) - (f(w) + SIGMA * r * slope)
                margins.append(abs(gap) / abs(f(w)))
                if gap < 0:
                    return r
            return 0.0

        r = choose(mean_loss, margins)
        own.append([choose(lambda v, p=p: loss(v, *p)) for p in parts])
        taken.append(r)
        if r:
            h, g_last, s, init = candidate, g_k, r * d_k, True
        m = GAMMA * m + (g - basis.T @ g_k)
        w = w + r * d - ALPHA * m
    return w, np.asarray(taken), np.asarray(own), min(margins)


def armijo_scenario(out_dir, strategy, arrays):
    d, k, steps = 6, 3, 4
    q, _ = np.linalg.qr(np.random.default_rng(1).normal(size=(d, k)))
    basis = q.T.astype("float32")
    path = os.path.join(out_dir, "ls_basis.npy")
    np.save(path, basis)
    rng = np.random.default_rng(9)
    w_star = rng.normal(size=(d, 1))
    parts = []
    for scale in (0.5, 1.0):  # replica 0's rows small, replica 1's large
        xr = (scale * rng.normal(size=(LOCAL, d))).astype("float32")
        parts.append((xr, (xr @ w_star).astype("float32")))
    want, taken, own, margin = np_steps([(p[0].astype("float64"), p[1].astype("float64")) for p in parts],
                                        basis.astype("float64"), steps)
    with strategy.scope():
        inputs = keras.Input((d,))
        outputs = keras.layers.Dense(1, use_bias=False, kernel_initializer="zeros")(inputs)
        model = boost.BoostModel(inputs, outputs, boost_config_dict=config(path, n_components=k))
        model.compile(optimizer="sgd", loss="mse")
    history = model.fit(every_replica_gets(strategy, [parts] * steps), epochs=steps, steps_per_epoch=1,
                        verbose=0)
    arrays["armijo_got"] = flat(model)
    arrays["armijo_want"] = want
    arrays["armijo_accepted"] = np.asarray(history.history["line_search_accepted"])
    arrays["armijo_want_steps"] = taken
    arrays["armijo_own_steps"] = own
    arrays["armijo_margin"] = margin
    arrays["armijo_spread"] = spread(strategy, model.trainable_variables + dim_reduce_variables(model))


def main(out_dir):
    strategy = tf.distribute.MirroredStrategy([f"/CPU:{i}" for i in range(N)])
    assert strategy.num_replicas_in_sync == N
    arrays = {}
    dense_scenarios(out_dir, strategy, arrays)
    if N == 2:
        armijo_scenario(out_dir, strategy, arrays)
    np.savez(os.path.join(out_dir, f"dim_reduce{N}.npz"), **arrays)


if __name__ == "__main__":
    main(sys.argv[1])
