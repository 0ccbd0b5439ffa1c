"""One worker of a 2-worker MultiWorkerMirroredStrategy DimReduce run on loopback.

Run by ``tests/test_distribute_tf.py`` in a fresh process with ``TF_CONFIG``
set: ``python mwms_dim_reduce_worker.py OUT_DIR`` (OUT_DIR shared by both
workers, as a shared filesystem would be).

- The chief (worker 0) trains stage 1 with a `WeightTrajectory`, then builds
  the stage-2 model, which computes the basis and writes `pca_mat_path`.
- Worker 1 builds its stage-2 model at once: the basis file is not there
  yet, so it waits for the chief's (up to `timeout`).
- Both run 3 DimReduce steps on global batches of 16 (each worker its share),
  then, as a reference, the same model on this process's one device without
  a strategy, on the same global batches.

Writes ``OUT_DIR/worker{index}.npz``: the final weights of both runs, how many
times this process ran the PCA, whether the basis file existed when it
started and when it compiled, and `check_dim_reduce_enable()`.
"""

import os
import sys

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from mwms_common import cluster_role  # noqa: E402 (this directory is on sys.path)
from mwms_common import ring_strategy  # noqa: E402 (this directory is on sys.path)
from mwms_common import sharded_by_data  # noqa: E402 (this directory is on sys.path)

GLOBAL_BATCH = 16
STEPS = 3


def make_dataset():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(STEPS * GLOBAL_BATCH, 5)).astype("float32")
    y = rng.normal(size=(STEPS * GLOBAL_BATCH, 3)).astype("float32")
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(GLOBAL_BATCH)
    return sharded_by_data(ds)


def main(out_dir):
    index, workers = cluster_role()
    strategy = ring_strategy(2)

    import keras

    import keras_boost as boost
    from keras_boost.algorithms.dim_reduce import optimizer as dim_reduce_module

    pca_calls = [0]
    pca = dim_reduce_module.trajectory_pca

    def counted_pca(*args, **kwargs):
        pca_calls[0] += 1
        return pca(*args, **kwargs)

    dim_reduce_module.trajectory_pca = counted_pca
    traj, path = os.path.join(out_dir, "traj"), os.path.join(out_dir, "shared_pca.npy")
    cfg = {"boost": {"mode": "manual", "dim_reduce": True},
           "dim_reduce": {"pca_mat_path": path, "weight_load_dir": traj, "n_components": 4,
                          "alpha": 0.01, "timeout": 120}}

    def dense_net(cls=keras.Model, **kwargs):
        init = keras.initializers.GlorotUniform(seed=0)
        inputs = keras.Input((5,))
        h = keras.layers.Dense(8, activation="tanh", kernel_initializer=init, name="d1")(inputs)
        return cls(inputs, keras.layers.Dense(3, kernel_initializer=init, name="d2")(h), **kwargs)

    results = {"basis_existed_at_start": os.path.exists(path)}
    if index == 0:  # stage 1, on the chief only (one device)
        rng = np.random.default_rng(0)
        x = rng.normal(size=(64, 5)).astype("float32")
        y = rng.normal(size=(64, 3)).astype("float32")
        stage1 = dense_net()
        stage1.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
        stage1.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0,
                   callbacks=[boost.callbacks.WeightTrajectory(traj, every=1)])

    with strategy.scope():
        model = dense_net(boost.BoostModel, boost_config_dict=cfg)
        status = model.check_dim_reduce_enable()
        results["status_enabled"] = bool(status)
        results["status_reason"] = status.reason
        results["basis_existed_before_compile"] = os.path.exists(path)
        model.compile(optimizer="sgd", loss="mse")  # the chief writes the basis / worker 1 waits
    results["pca_calls"] = pca_calls[0]
    history = model.fit(make_dataset(), epochs=1, verbose=0)
    results["loss"] = np.asarray(history.history["loss"])
    dim_reduce = boost.optimizers.find_in_chain(model.optimizer, boost.optimizers.DimReduce)
    results["accepted"] = int(dim_reduce.accepted_steps.numpy())
    results["distributed"] = np.concatenate([np.ravel(w) for w in model.get_weights()])

    single = dense_net(boost.BoostModel, boost_config_dict=cfg)
    single.compile(optimizer="sgd", loss="mse")
    history = single.fit(make_dataset(), epochs=1, verbose=0)
    results["single_loss"] = np.asarray(history.history["loss"])
    results["single"] = np.concatenate([np.ravel(w) for w in single.get_weights()])
    np.savez(os.path.join(out_dir, f"worker{index}.npz"), **results)
    print(f"worker {index} done", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
