"""Cross-replica overflow on ONE replica, under MirroredStrategy (4 CPUs).

Run in a fresh process (the logical devices must be configured before any TF
op): ``python mirrored_overflow.py OUT_DIR``. Writes ``OUT_DIR/report.json``
and ``OUT_DIR/clean_weights.npz`` (distributed vs single-device weights after
the clean steps), which ``tests/test_distribute_tf.py`` asserts on; the
script itself only fails on setup errors.

Steps:
1. BoostModel(loss_scale="dynamic"), SGD(momentum), mse, in the scope of
   MirroredStrategy(CPU:0..3); two clean steps of global batch 8 (so the
   momentum slots exist and are non-zero). Compared with the same model,
   same initial weights, trained on one device without a strategy.
2. Snapshot of every weight and optimizer variable (every replica's copy).
3. One step whose only non-finite samples are the last 2 of the global batch,
   which land on replica 3 (checked by distributing the same dataset).
4. Control: stock keras.Model + LossScaleOptimizer, same setup.
"""

import json
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

N_REPLICAS = 4
PER_REPLICA = 2
GLOBAL_BATCH = N_REPLICAS * PER_REPLICA
BAD_REPLICA = 3

cpus = tf.config.list_physical_devices("CPU")
tf.config.set_logical_device_configuration(
    cpus[0], [tf.config.LogicalDeviceConfiguration()] * N_REPLICAS
)

import keras  # noqa: E402

import keras_boost  # noqa: E402

DEVICES = [f"/CPU:{i}" for i in range(N_REPLICAS)]


def build(model_cls, batch_norm=True, **kwargs):
    keras.utils.set_random_seed(0)
    inputs = keras.Input((4,))
    h = keras.layers.Dense(8)(inputs)
    # Synchronized BN: global-batch statistics, so the distributed run equals
    # the single-device one, and its moving statistics (updated in the
    # forward pass) must also survive an overflowing step.
    if batch_norm:
        h = keras.layers.BatchNormalization(synchronized=True, momentum=0.5)(h)
    h = keras.layers.Activation("tanh")(h)
    outputs = keras.layers.Dense(2)(h)
    return model_cls(inputs, outputs, **kwargs)


def compile_(model, wrap_lso=False):
    opt = keras.optimizers.SGD(learning_rate=0.05, momentum=0.9)
    if wrap_lso:
        opt = keras.optimizers.LossScaleOptimizer(opt)
    model.compile(optimizer=opt, loss="mse")


def dataset(x, y):
    return tf.data.Dataset.from_tensor_slices((x, y)).batch(GLOBAL_BATCH)


def clean_data():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(2 * GLOBAL_BATCH, 4)).astype("float32")
    y = rng.normal(size=(2 * GLOBAL_BATCH, 2)).astype("float32")
    return x, y


def bad_data():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(GLOBAL_BATCH, 4)).astype("float32")
    y = rng.normal(size=(GLOBAL_BATCH, 2)).astype("float32")
    bad = slice(BAD_REPLICA * PER_REPLICA, (BAD_REPLICA + 1) * PER_REPLICA)
    x[bad] = np.inf
    return x, y


def replica_copies(strategy, variable):
    """Every replica's copy of a Keras variable, as NumPy arrays."""
    value = variable.value if hasattr(variable, "value") else variable
    return [np.asarray(t.numpy()) for t in strategy.experimental_local_results(value)]


def scalar(variable):
    return keras.ops.convert_to_numpy(variable).item()


def state_of(strategy, model, skip=()):
    skip_ids = {id(v) for v in skip}
    weights = [v for v in model.weights if id(v) not in skip_ids]
    return {
        "weights": [(v.path, replica_copies(strategy, v)) for v in weights],
        "optimizer": [
            (v.path, replica_copies(strategy, v))
            for v in model.optimizer.variables
            if id(v) not in skip_ids
        ],
    }


def diff_report(before, after):
    """Names of the variables (any replica copy) that are not bit-identical."""
    changed = []
    for kind in ("weights", "optimizer"):
        for (name, old), (_, new) in zip(before[kind], after[kind]):
            if len(old) != len(new) or not all(np.array_equal(a, b) for a, b in zip(old, new)):
                changed.append(f"{kind}:{name}")
    return changed


def all_finite(state):
    return all(
        np.all(np.isfinite(c))
        for kind in ("weights", "optimizer")
        for _, copies in state[kind]
        for c in copies
    )


def replicas_of_bad_rows(strategy, ds):
    """Which replicas receive a non-finite x, as fit distributes `ds`."""

    @tf.function
    def probe(batch):
        x, _ = batch
        return tf.reduce_any(tf.logical_not(tf.math.is_finite(x)))

    batch = next(iter(strategy.experimental_distribute_dataset(ds)))
    flags = strategy.experimental_local_results(strategy.run(probe, args=(batch,)))
    return [i for i, f in enumerate(flags) if bool(f)]


def main(out_dir):
    strategy = tf.distribute.MirroredStrategy(DEVICES)
    assert strategy.num_replicas_in_sync == N_REPLICAS
    report = {}
    x_clean, y_clean = clean_data()
    x_bad, y_bad = bad_data()
    report["bad_rows_on_replicas"] = replicas_of_bad_rows(strategy, dataset(x_bad, y_bad))

    # 1. Clean steps, distributed vs one device.
    with strategy.scope():
        model = build(keras_boost.BoostModel, loss_scale="dynamic")
        compile_(model)
    init = [np.array(w) for w in model.get_weights()]
    hist = model.fit(dataset(x_clean, y_clean), epochs=1, shuffle=False, verbose=0)
    report["clean_overflow"] = [float(v) for v in hist.history["overflow"]]
    report["clean_loss"] = [float(v) for v in hist.history["loss"]]

    single = build(keras_boost.BoostModel, loss_scale="dynamic")
    compile_(single)
    single.set_weights(init)
    hist_single = single.fit(dataset(x_clean, y_clean), epochs=1, shuffle=False, verbose=0)
    report["single_loss"] = [float(v) for v in hist_single.history["loss"]]
    dist_w = model.get_weights()
    single_w = single.get_weights()
    np.savez(
        os.path.join(out_dir, "clean_weights.npz"),
        **{f"distributed_{i}": w for i, w in enumerate(dist_w)},
        **{f"single_{i}": w for i, w in enumerate(single_w)},
    )
    report["clean_moved"] = any(not np.array_equal(a, b) for a, b in zip(init, dist_w))
    report["clean_replicas_in_sync"] = all(
        all(np.array_equal(c[0], c_i) for c_i in c)
        for kind in ("weights", "optimizer")
        for _, c in state_of(strategy, model)[kind]
    )

    # 2./3. Snapshot, then the step with inf only on the bad replica.
    scaler = keras_boost.optimizers.find_in_chain(model.optimizer, keras_boost.optimizers.DynamicLossScaleOptimizer)
    scale_var, steps_var = scaler.dynamic_scale, scaler.good_steps
    before = state_of(strategy, model, skip=[scale_var, steps_var])
    report["scale_before"] = scalar(scale_var)
    report["good_steps_before"] = scalar(steps_var)
    report["momentum_nonzero_before"] = any(
        np.any(copies[0] != 0)
        for name, copies in before["optimizer"]
        if "momentum" in name
    )
    hist = model.fit(dataset(x_bad, y_bad), epochs=1, shuffle=False, verbose=0)
    after = state_of(strategy, model, skip=[scale_var, steps_var])
    report["changed_after_overflow"] = diff_report(before, after)
    report["n_compared"] = len(before["weights"]) + len(before["optimizer"])
    report["scale_after"] = scalar(scale_var)
    report["scale_after_all_replicas"] = [float(c) for c in replica_copies(strategy, scale_var)]
    report["good_steps_after"] = scalar(steps_var)
    report["overflow_logged"] = [float(v) for v in hist.history["overflow"]]
    report["loss_scale_logged"] = [float(v) for v in hist.history["loss_scale"]]

    # 4. Control: stock Keras + LossScaleOptimizer (reference doc P9).
    with strategy.scope():
        # No BN here: synchronized BN would spread the inf to replica 0,
        # which is the one replica Keras' LossScaleOptimizer checks.
        stock = build(keras.Model, batch_norm=False)
        compile_(stock, wrap_lso=True)
    stock.fit(dataset(x_clean, y_clean), epochs=1, shuffle=False, verbose=0)
    stock_before = state_of(strategy, stock)
    stock_scale_before = scalar(stock.optimizer.dynamic_scale)
    stock.fit(dataset(x_bad, y_bad), epochs=1, shuffle=False, verbose=0)
    stock_after = state_of(strategy, stock)
    report["stock_changed_after_overflow"] = diff_report(stock_before, stock_after)
    report["stock_weights_finite_after"] = all_finite(
        {"weights": stock_after["weights"], "optimizer": []}
    )
    report["stock_scale_before"] = stock_scale_before
    report["stock_scale_after"] = scalar(stock.optimizer.dynamic_scale)

    with open(os.path.join(out_dir, "report.json"), "w") as f:
        json.dump(report, f, indent=1)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main(sys.argv[1])
