"""GradientAccumulation under MirroredStrategy (4 logical CPUs).

Run in a fresh process (the logical devices must be configured before any TF
op): ``python accumulation_mirrored.py OUT_DIR``. Writes
``OUT_DIR/report.json`` and ``OUT_DIR/weights.npz``, which
``tests/test_accumulation_distributed.py`` asserts on; the script itself only
fails on setup errors.

Micro-batches are global batches of 8 (2 rows per replica); k = 4, so the
effective batch is 32.

Scenario "keras" (plain keras.Model + GradientAccumulation(SGD, momentum,
PiecewiseConstantDecay, weight decay)):
1. fit 2 epochs of 6 micro-batches (windows straddle the epoch boundary:
   3 updates), then fit 2 more micro-batches with FlushGradientAccumulation
   (a 4th update, divisor 2). Compared with ONE device, no strategy, plain
   SGD on the same rows in batches of 32, 32, 32, 16.
2. Every replica's copy of every weight and optimizer variable is compared.
3. All-reduces are counted at run time, two ways, on every replica:
   - the inner optimizer's gradient all-reduce hook
     (`_all_reduce_sum_gradients`, where Keras sums gradients over replicas);
   - every `tf.distribute.ReplicaContext.all_reduce` call (any collective
     issued from replica context, whoever issues it).
   The same counts for stock Keras (plain SGD, no accumulation) serve as the
   control: 1 all-reduce per step.

Scenario "save": model.save in the middle of a window (the replicas' partial
sums differ), keras.saving.load_model under the strategy, resume: equals the
uninterrupted run.

Scenario "measure": `measure_gradient_norms=True`: the per-replica squared
norms of the last window against NumPy-side gradients of each replica's rows,
with the same all-reduce counts and weights as scenario "keras".

Scenario "boost" (BoostModel with dynamic loss scaling + the grad_accumulation
config through boost.wrap): the step's cross-replica cond nests the
wrapper's. Same data as 1 (without the flush); compared with the same
single-device reference after 3 updates.
"""

import json
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

N_REPLICAS = 4
MICRO = 8  # global micro-batch
K = 4

cpus = tf.config.list_physical_devices("CPU")
tf.config.set_logical_device_configuration(
    cpus[0], [tf.config.LogicalDeviceConfiguration()] * N_REPLICAS
)

import keras  # noqa: E402

import keras_boost as boost  # noqa: E402
from keras_boost.algorithms.accumulation import find_gradient_accumulation  # noqa: E402

DEVICES = [f"/CPU:{i}" for i in range(N_REPLICAS)]
ACCUMULATE = {
    "boost": {"mode": "manual", "grad_accumulation": True},
    "grad_accumulation": {"grad_accumulation_step": K},
}

# --- all-reduce counting -----------------------------------------------------

_COUNTERS = []  # (name, keras.Variable) of the current model


def _bump(name):
    for key, variable in _COUNTERS:
        if key == name:
            variable.assign_add(1)


_original_all_reduce = tf.distribute.ReplicaContext.all_reduce


def _counted_all_reduce(self, reduce_op, value, options=None):
    _bump("replica_ctx_all_reduce")
    return _original_all_reduce(self, reduce_op, value, options)


tf.distribute.ReplicaContext.all_reduce = _counted_all_reduce


def install_counters(inner_optimizer):
    """Counters (replica-local, aggregation "none") incremented at run time."""
    _COUNTERS.clear()
    for name in ("gradient_all_reduce", "replica_ctx_all_reduce"):
        _COUNTERS.append(
            (name, keras.Variable(0, dtype="int32", trainable=False, aggregation="none", name=name))
        )
    original = inner_optimizer._all_reduce_sum_gradients

    def counted(grads_and_vars):
        _bump("gradient_all_reduce")
        return original(grads_and_vars)

    inner_optimizer._all_reduce_sum_gradients = counted


def read_counters(strategy):
    return {name: replica_copies(strategy, v) for name, v in _COUNTERS}


# --- helpers ------------------------------------------------------------------


def build(model_cls=keras.Model, **kwargs):
    keras.utils.set_random_seed(0)
    init = keras.initializers.GlorotUniform(seed=0)
    inputs = keras.Input((5,))
    h = keras.layers.Dense(8, activation="tanh", kernel_initializer=init)(inputs)
    outputs = keras.layers.Dense(3, kernel_initializer=init)(h)
    return model_cls(inputs, outputs, **kwargs)


def sgd():
    return keras.optimizers.SGD(
        keras.optimizers.schedules.PiecewiseConstantDecay([2], [0.1, 0.02]),
        momentum=0.9,
        weight_decay=1e-2,
    )


def data():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(8 * MICRO, 5)).astype("float32")
    y = rng.normal(size=(8 * MICRO, 3)).astype("float32")
    return (x[: 6 * MICRO], y[: 6 * MICRO]), (x[6 * MICRO :], y[6 * MICRO :])


def dataset(x, y, batch):
    return tf.data.Dataset.from_tensor_slices((x, y)).batch(batch)


def replica_copies(strategy, variable):
    value = variable.value if hasattr(variable, "value") else variable
    return [np.asarray(t.numpy()).tolist() for t in strategy.experimental_local_results(value)]


def in_sync(strategy, variables):
    out = []
    for v in variables:
        value = v.value if hasattr(v, "value") else v
        copies = [np.asarray(t.numpy()) for t in strategy.experimental_local_results(value)]
        out.append(len(copies) == N_REPLICAS and all(np.array_equal(copies[0], c) for c in copies))
    return all(out)


class CountBatches(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.n = 0

    def on_train_batch_end(self, batch, logs=None):
        self.n += 1


def main(out_dir):
    strategy = tf.distribute.MirroredStrategy(DEVICES)
    assert strategy.num_replicas_in_sync == N_REPLICAS
    (x1, y1), (x2, y2) = data()
    report, arrays = {}, {}

    # Single-device reference: batches of 32 over the same stream of rows.
    x_all = np.concatenate([x1, x1, x2])
    y_all = np.concatenate([y1, y1, y2])
    reference = build()
    reference.compile(optimizer=sgd(), loss="mse")
    init = [np.array(w) for w in reference.get_weights()]
    reference.fit(dataset(x_all[: 12 * MICRO], y_all[: 12 * MICRO], K * MICRO), verbose=0)
    arrays.update({f"reference3_{i}": w for i, w in enumerate(reference.get_weights())})
    reference.fit(dataset(x_all[12 * MICRO :], y_all[12 * MICRO :], K * MICRO), verbose=0)
    arrays.update({f"reference4_{i}": w for i, w in enumerate(reference.get_weights())})
    report["reference_iterations"] = int(reference.optimizer.iterations.numpy())

    # 1-3. keras.Model + GradientAccumulation under MirroredStrategy.
    with strategy.scope():
        model = build()
        opt = boost.GradientAccumulation(sgd(), K)
        model.compile(optimizer=opt, loss="mse")
        opt.build(model.trainable_variables)
        install_counters(opt.inner_optimizer)
    assert all(np.array_equal(a, b) for a, b in zip(init, model.get_weights()))
    batches = CountBatches()
    hist = model.fit(dataset(x1, y1, MICRO), epochs=2, verbose=0, callbacks=[batches])
    report["keras_micro_steps"] = batches.n
    report["keras_iterations_after_2_epochs"] = int(opt.iterations.numpy())
    report["keras_micro_step_after_2_epochs"] = int(opt.micro_step.numpy())
    report["keras_counts_after_2_epochs"] = read_counters(strategy)
    report["keras_loss_history"] = [float(v) for v in hist.history["loss"]]
    arrays.update({f"keras3_{i}": w for i, w in enumerate(model.get_weights())})
    report["keras_in_sync_after_2_epochs"] = in_sync(
        strategy, model.weights + opt.inner_optimizer.variables
    )
    model.fit(dataset(x2, y2, MICRO), verbose=0, callbacks=[boost.FlushGradientAccumulation()])
    report["keras_iterations_after_flush"] = int(opt.iterations.numpy())
    report["keras_micro_step_after_flush"] = int(opt.micro_step.numpy())
    report["keras_counts_after_flush"] = read_counters(strategy)
    report["keras_accumulators_zero"] = all(
        all(np.all(np.asarray(c) == 0) for c in replica_copies(strategy, a))
        for a in opt.accumulators
    )
    report["keras_in_sync_after_flush"] = in_sync(strategy, model.weights + opt.variables)
    arrays.update({f"keras4_{i}": w for i, w in enumerate(model.get_weights())})

    # Control: stock Keras, no accumulation, same counters.
    with strategy.scope():
        stock = build()
        stock.compile(optimizer=keras.optimizers.SGD(0.1, momentum=0.9), loss="mse")
        stock.optimizer.build(stock.trainable_variables)
        install_counters(stock.optimizer)
    batches = CountBatches()
    stock.fit(dataset(x1, y1, MICRO), epochs=2, verbose=0, callbacks=[batches])
    report["stock_micro_steps"] = batches.n
    report["stock_counts"] = read_counters(strategy)

    # Scenario "boost": BoostModel + dynamic loss scaling + wrap(config).
    with strategy.scope():
        bmodel = build(boost.BoostModel, boost_config_dict=ACCUMULATE, loss_scale="dynamic")
        bopt = boost.wrap(sgd(), "O0", ACCUMULATE)
        bmodel.compile(optimizer=bopt, loss="mse")
        bopt.build(bmodel.trainable_variables)
        ga = find_gradient_accumulation(bopt)
        install_counters(ga.inner_optimizer)
    hist = bmodel.fit(dataset(x1, y1, MICRO), epochs=2, verbose=0)
    report["boost_iterations"] = int(bopt.iterations.numpy())
    report["boost_micro_step"] = int(ga.micro_step.numpy())
    report["boost_counts"] = read_counters(strategy)
    report["boost_overflow"] = [float(v) for v in hist.history["overflow"]]
    trainable = [np.array(keras.ops.convert_to_numpy(w)) for w in bmodel.trainable_weights]
    arrays.update({f"boost3_{i}": w for i, w in enumerate(trainable)})
    report["boost_in_sync"] = in_sync(strategy, bmodel.weights + bopt.variables)

    # Scenario "save": save in the middle of a window, load under the
    # strategy, resume; equals the uninterrupted run (reference3).
    with strategy.scope():
        smodel = build()
        smodel.compile(optimizer=boost.GradientAccumulation(sgd(), K), loss="mse")
    smodel.fit(dataset(x1, y1, MICRO), verbose=0)
    report["save_micro_step"] = int(smodel.optimizer.micro_step.numpy())
    report["save_replicas_differ"] = not in_sync(strategy, smodel.optimizer.accumulators)
    path = os.path.join(out_dir, "mid_window.keras")
    smodel.save(path)
    with strategy.scope():
        restored = keras.saving.load_model(path)
    report["restored_micro_step"] = int(restored.optimizer.micro_step.numpy())
    restored.fit(dataset(x1, y1, MICRO), verbose=0)
    report["restored_iterations"] = int(restored.optimizer.iterations.numpy())
    arrays.update({f"restored3_{i}": w for i, w in enumerate(restored.get_weights())})

    # Scenario "measure": measure_gradient_norms=True under the strategy. Each
    # replica measures its local gradients (no collective added); compared
    # with replica r's rows of window 3 at the reference's weights after 2
    # updates (Keras splits each global batch of 8 into 4 consecutive pairs).
    with strategy.scope():
        mmodel = build()
        mopt = boost.GradientAccumulation(sgd(), K, measure_gradient_norms=True)
        mmodel.compile(optimizer=mopt, loss="mse")
        mopt.build(mmodel.trainable_variables)
        install_counters(mopt.inner_optimizer)
    mmodel.fit(dataset(x1, y1, MICRO), epochs=2, verbose=0)
    report["measure_counts"] = read_counters(strategy)
    report["measure_norms"] = mopt.gradient_norms()._asdict()
    report["measure_replica_norms"] = {
        name: replica_copies(strategy, v)
        for name, v in zip(["small", "big", "steps", "windows"], mopt._norm_variables[2:])
    }
    arrays.update({f"measure3_{i}": w for i, w in enumerate(mmodel.get_weights())})
    at_window3 = build()
    at_window3.compile(optimizer=sgd(), loss="mse")
    at_window3.fit(dataset(x_all[: 8 * MICRO], y_all[: 8 * MICRO], K * MICRO), verbose=0)
    local = MICRO // N_REPLICAS
    expected = {"small": [], "big": []}
    for r in range(N_REPLICAS):
        grads = []
        for i in range(K):  # window 3 = micro-batches 2..5 of the second epoch over x1
            start = (2 + i) * MICRO + r * local
            xb, yb = x1[start : start + local], y1[start : start + local]
            with tf.GradientTape() as tape:
                loss = keras.losses.MeanSquaredError()(yb, at_window3(xb))
            g = tape.gradient(loss, at_window3.trainable_variables)
            grads.append(np.concatenate([np.ravel(v.numpy()) for v in g]).astype("float64"))
        grads = np.array(grads)
        expected["small"].append(float(np.mean(np.sum(grads**2, axis=1))))
        expected["big"].append(float(np.sum(grads.mean(axis=0) ** 2)))
    report["measure_expected"] = expected

    np.savez(os.path.join(out_dir, "weights.npz"), **arrays)
    with open(os.path.join(out_dir, "report.json"), "w") as f:
        json.dump(report, f, indent=1)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main(sys.argv[1])
