"""O2's AdaSum at the learning rate tuned for the mean all-reduce (2 logical CPUs).

Run by ``tests/test_adasum_step_size.py`` in a fresh process:
``python mirrored_adasum_lr.py OUT_DIR``; writes ``OUT_DIR/step_size.npz``.

A linear model (no bias) on a fixed global batch whose two replica shards
use disjoint halves of the features, mirrored: replica 0 sees rows
``[X, 0]``, replica 1 rows ``[0, X]``, both with targets ``X u``. The local
gradients are then exactly orthogonal and of equal norm, the case where
AdaSum's unbounded rule is the SUM: twice the mean's step. With SGD momentum
0.9 a quadratic is stable while lr * curvature < 2 (1 + 0.9) = 3.8; the
learning rate is set so that the mean all-reduce sees 2.2 (Keras' mean of
the local losses halves each block's curvature), the unbounded sum 4.4
(divergent) and the bounded rule 4.4 / sqrt(2) = 3.1.

Fits, from zero weights, ``STEPS`` steps each: ``plain`` (a Keras model,
the mean all-reduce), ``o2`` (BoostModel at O2, AdaSum's default bound) and
``o2_unbounded`` (``adasum.norm_bound=False``: the rule before the bound).
LessBN and freezing are off: a one-layer linear model has no BatchNorm to
remove and nothing to freeze; this isolates AdaSum's step size. For each it
stores the global-batch loss before and after (``<name>_start``,
``<name>_end``) and the final kernel (``<name>_kernel``); ``o2_want`` is the
bounded run computed in NumPy (float64).
"""

import os
import sys

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

cpus = tf.config.list_physical_devices("CPU")
tf.config.set_logical_device_configuration(cpus[0], [tf.config.LogicalDeviceConfiguration()] * 2)

import keras  # noqa: E402

import keras_boost as boost  # noqa: E402

HALF, PER_REPLICA, STEPS, MOMENTUM = 8, 8, 30, 0.9
O2_ADASUM = {"boost": {"mode": "manual", "less_bn": False, "grad_freeze": False}}


def data():
    rng = np.random.default_rng(0)
    block = rng.normal(size=(PER_REPLICA, HALF))
    u = rng.normal(size=(HALF,))
    zeros = np.zeros_like(block)
    x = np.concatenate([np.concatenate([block, zeros], 1), np.concatenate([zeros, block], 1)])
    y = np.concatenate([block @ u, block @ u])[:, None]
    # Each local loss mean((x w - y)^2) has curvature (2 / B) X^T X in its block.
    curvature = np.linalg.eigvalsh(2.0 / PER_REPLICA * block.T @ block).max()
    return x.astype("float32"), y.astype("float32"), 4.4 / curvature


def numpy_bounded_run(x, y, lr):
    """SGD with momentum on the bounded AdaSum of the two local gradients."""
    w, velocity = np.zeros((2 * HALF, 1)), np.zeros((2 * HALF, 1))
    shards = [(x[:PER_REPLICA], y[:PER_REPLICA]), (x[PER_REPLICA:], y[PER_REPLICA:])]
    for _ in range(STEPS):
        g0, g1 = (2.0 / PER_REPLICA * xs.T @ (xs @ w - ys) for xs, ys in shards)
        # Orthogonal and of equal norm: the sum, scaled to the norm of one.
        combined = (g0 + g1) * np.sqrt(max((g0**2).sum(), (g1**2).sum()) / ((g0 + g1) ** 2).sum())
        velocity = MOMENTUM * velocity - lr * combined
        w = w + velocity
    return w


def main(out_dir):
    x, y, lr = data()
    strategy = tf.distribute.MirroredStrategy(["/CPU:0", "/CPU:1"])
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(2 * PER_REPLICA).repeat(STEPS)
    results = {"lr": lr, "o2_want": numpy_bounded_run(x.astype("float64"), y.astype("float64"), lr)}
    for name, config in (
        ("plain", None),
        ("o2", O2_ADASUM),
        ("o2_unbounded", {**O2_ADASUM, "adasum": {"norm_bound": False}}),
    ):
        with strategy.scope():
            inputs = keras.Input((2 * HALF,))
            model = keras.Model(inputs, keras.layers.Dense(1, use_bias=False, kernel_initializer="zeros")(inputs))
            if config is not None:
                model = boost.BoostModel.from_model(model, boost_level="O2", boost_config_dict=config)
                results[f"{name}_status"] = int(bool(model.check_adasum_enable()))
            model.compile(optimizer=keras.optimizers.SGD(lr, momentum=MOMENTUM), loss="mse")
        model.fit(dataset, epochs=1, verbose=0)
        kernel = model.get_weights()[0]
        results[f"{name}_kernel"] = kernel
        results[f"{name}_start"] = float(np.mean(y.astype("float64") ** 2))
        results[f"{name}_end"] = float(np.mean((x.astype("float64") @ kernel - y) ** 2))
    np.savez(os.path.join(out_dir, "step_size.npz"), **results)


if __name__ == "__main__":
    main(sys.argv[1])
