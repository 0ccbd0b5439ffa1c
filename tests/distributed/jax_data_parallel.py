"""BoostModel under keras.distribution.DataParallel on 4 host CPU devices (JAX).

``python jax_data_parallel.py OUT_DIR`` writes ``OUT_DIR/dp.npz``: the
weights after training with DataParallel (loss scaling and gradient freezing
on) and on one device from the same start.
"""

import os
import sys

os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
os.environ["KERAS_BACKEND"] = "jax"

import jax  # noqa: E402
import keras  # noqa: E402
import numpy as np  # noqa: E402

import keras_boost as boost  # noqa: E402
keras.config.disable_traceback_filtering()


def build():
    keras.utils.set_random_seed(0)
    inputs = keras.Input((4,))
    h = inputs
    for i in range(3):
        h = keras.layers.Dense(8, activation="tanh", name=f"dense{i}")(h)
    model = boost.BoostModel(inputs, keras.layers.Dense(2, name="head")(h), loss_scale="dynamic")
    groups = boost.GradientFreeze().split_parameters_groups(model, 4)
    model.compile(optimizer=boost.FreezeOptimizer(keras.optimizers.SGD(0.1, momentum=0.9), groups, [0, 2, 1, 3]),
                  loss="mse")
    return model


def main(out_dir):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 4)).astype("float32")
    y = rng.normal(size=(64, 2)).astype("float32")
    assert len(jax.devices()) == 4
    keras.distribution.set_distribution(keras.distribution.DataParallel(devices=jax.devices()))
    parallel = build()
    init = np.concatenate([w.ravel() for w in parallel.get_weights()])
    parallel.fit(x, y, batch_size=16, epochs=2, shuffle=False, verbose=0)
    keras.distribution.set_distribution(None)
    single = build()
    single.fit(x, y, batch_size=16, epochs=2, shuffle=False, verbose=0)
    flat = lambda m: np.concatenate([w.ravel() for w in m.get_weights()])  # noqa: E731
    np.savez(os.path.join(out_dir, "dp.npz"), init=init, parallel=flat(parallel), single=flat(single))


if __name__ == "__main__":
    main(sys.argv[1])
