"""CompressedAllReduce under MirroredStrategy against a NumPy reference.

``python mirrored_compressed.py OUT_DIR N`` (one process per replica count:
MirroredStrategies over different device counts cannot share a process)
writes ``OUT_DIR/compressed{N}.npz`` with ``<name>_got`` / ``<name>_want``
pairs. The reference: each replica's gradient as Keras hands it to the
optimizer (its local mean gradient / N), cast to the wire dtype with
ml_dtypes, summed in that dtype (rounded after every add), cast back,
applied by SGD.
"""

import os
import sys

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

cpus = tf.config.list_physical_devices("CPU")
tf.config.set_logical_device_configuration(cpus[0], [tf.config.LogicalDeviceConfiguration()] * 4)

import keras  # noqa: E402

import keras_boost as boost  # noqa: E402
from keras_boost.algorithms.compressed_all_reduce import wire_bytes  # noqa: E402

PER_REPLICA = 6
LR = 0.1
WIRE = {"bfloat16": ml_dtypes.bfloat16, "float16": np.float16}
results = {}


def graph():
    keras.utils.set_random_seed(0)
    inputs = keras.Input((5,))
    h = keras.layers.Dense(4, activation="tanh", name="d0")(inputs)
    return inputs, keras.layers.Dense(2, name="head")(h)


def data(steps, replicas, seed=0):
    rng = np.random.default_rng(seed)
    rows = steps * replicas * PER_REPLICA
    return rng.normal(size=(rows, 5)).astype("float32"), rng.normal(size=(rows, 2)).astype("float32")


def shard_grads(weights, x, y, replicas):
    """What each replica's optimizer receives: its local mean gradient / replicas."""
    ref = keras.Model(*graph())
    ref.set_weights(weights)
    out = []
    for r in range(replicas):
        xs, ys = x[r * PER_REPLICA:(r + 1) * PER_REPLICA], y[r * PER_REPLICA:(r + 1) * PER_REPLICA]
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((ref(xs) - ys) ** 2)
        out.append([g.numpy() / replicas for g in tape.gradient(loss, ref.trainable_variables)])
    return out


def run(strategy, n, x, y, steps, **kwargs):
    with strategy.scope():
        model = keras.Model(*graph())
        opt = boost.optimizers.CompressedAllReduce(keras.optimizers.SGD(LR), **kwargs)
        model.compile(optimizer=opt, loss="mse")
    w0 = model.get_weights()
    model.fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(n * PER_REPLICA), epochs=1,
              shuffle=False, verbose=0)
    return model, opt, w0


def flat(weights):
    return np.concatenate([np.ravel(w) for w in weights]).astype("float64")


def reference(w0, x, y, n, steps, dtype, error_feedback):
    wire = WIRE[dtype]
    weights = [w.copy() for w in w0]
    residual = [[np.zeros_like(w) for w in w0] for _ in range(n)]
    rows = n * PER_REPLICA
    for s in range(steps):
        grads = shard_grads(weights, x[s * rows:(s + 1) * rows], y[s * rows:(s + 1) * rows], n)
        sent = []
        for r in range(n):
            p = [g + e for g, e in zip(grads[r], residual[r])] if error_feedback else grads[r]
            c = [v.astype(wire) for v in p]
            if error_feedback:
                residual[r] = [v - q.astype("float32") for v, q in zip(p, c)]
            sent.append(c)
        total = [_sum_in(wire, [c[i] for c in sent]) for i in range(len(weights))]
        weights = [w - LR * t for w, t in zip(weights, total)]
    return weights


def _sum_in(wire, values):
    """Replica 0 + 1 + ... in the wire dtype, rounded after every add (as the
    collective's add_n over the 16-bit tensors does), back to float32."""
    total = values[0]
    for value in values[1:]:
        total = (total.astype("float32") + value.astype("float32")).astype(wire)
    return total.astype("float32")


def main(out_dir, n):
    strategy = tf.distribute.MirroredStrategy([f"/CPU:{i}" for i in range(n)])
    for dtype in ("bfloat16", "float16"):
        for error_feedback in (False, True):
            name = f"{dtype}_{'ef' if error_feedback else 'plain'}"
            x, y = data(3, n, seed=n)
            model, opt, w0 = run(strategy, n, x, y, 3, dtype=dtype, error_feedback=error_feedback)
            results[f"{name}_got"] = flat(model.get_weights())
            results[f"{name}_want"] = flat(reference(w0, x, y, n, 3, dtype, error_feedback))
            # The uncompressed update, to show the cast changed something.
            results[f"{name}_exact"] = flat(reference_f32(w0, x, y, n, 3))
            results[f"{name}_skipped"] = int(opt.skipped_steps.numpy())
    # float16 overflow: the step is skipped on every replica, weights unchanged.
    x, y = data(1, n, seed=1)
    y[:] = 1e6
    model, opt, w0 = run(strategy, n, x, y, 1, dtype="float16")
    results["overflow_got"] = flat(model.get_weights())
    results["overflow_want"] = flat(w0)
    results["overflow_skipped"] = int(opt.skipped_steps.numpy())
    # With error feedback: the overflowing first step is skipped and leaves the
    # residuals as they were, so the two later steps are the reference's.
    x, y = data(3, n, seed=2)
    rows = n * PER_REPLICA
    y[:rows] = 1e6
    model, opt, w0 = run(strategy, n, x, y, 3, dtype="float16", error_feedback=True)
    results["overflow_ef_got"] = flat(model.get_weights())
    results["overflow_ef_want"] = flat(reference(w0, x[rows:], y[rows:], n, 2, "float16", True))
    results["overflow_ef_skipped"] = int(opt.skipped_steps.numpy())
    results["wire_bytes_bf16"] = wire_bytes(model.trainable_variables, "bfloat16")
    results["wire_bytes_f32"] = wire_bytes(model.trainable_variables, "float32")
    np.savez(os.path.join(out_dir, f"compressed{n}.npz"), **results)


def reference_f32(w0, x, y, n, steps):
    weights = [w.copy() for w in w0]
    rows = n * PER_REPLICA
    for s in range(steps):
        grads = shard_grads(weights, x[s * rows:(s + 1) * rows], y[s * rows:(s + 1) * rows], n)
        weights = [w - LR * sum(g[i] for g in grads) for i, w in enumerate(weights)]
    return weights


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
