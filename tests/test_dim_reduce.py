"""DimReduce stage 2 in BoostModel's train step: a NumPy reference of the
step on least squares, a two-stage run on the embedded MNIST data, errors,
and the basis shared across workers (waiting for the chief's file)."""

import os
import threading
import time

import keras
import numpy as np
import pytest

import keras_boost as boost
from keras_boost import backend as kb_backend
from conftest import to_numpy
from keras_boost.atomic_write import atomic_write
from keras_boost.bench.workloads import mnist_data
from keras_boost.algorithms.dim_reduce import load_basis
from keras_boost.algorithms.dim_reduce import wait_for_basis

RHO, GAMMA, ALPHA, SIGMA = 0.55, 0.9, 0.01, 0.4


def least_squares(seed=0, n=64, d=6):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d)).astype("float32")
    y = (x @ rng.normal(size=(d, 1))).astype("float32")
    inputs = keras.Input((d,))
    model = keras.Model(inputs, keras.layers.Dense(1, use_bias=False, kernel_initializer="zeros")(inputs))
    return model, x, y


def np_dim_reduce(w, x, y, basis, steps, trials=2):
    """MindSpore's step (reference doc 7.3), with the rollback of a failed search."""
    def loss(w):
        return float(np.mean((x @ w - y[:, 0]) ** 2))

    def grad(w):
        return 2 * x.T @ (x @ w - y[:, 0]) / len(x)

    k = basis.shape[0]
    h, g_last, s, init, m = np.eye(k), np.zeros(k), np.zeros(k), False, np.zeros_like(w)
    for _ in range(steps):
        g = grad(w)
        g_k = basis @ g
        cand = h
        if init:
            yv = g_k - g_last
            c = yv @ s
            if c > 1e-20:
                rho = 1 / c
                left = np.eye(k) - rho * np.outer(s, yv)
                cand = left @ h @ left.T + rho * np.outer(s, s)
        d_k = -cand @ g_k
        d = basis.T @ d_k
        r = next((RHO**i for i in range(trials) if loss(w + RHO**i * d) < loss(w) + SIGMA * RHO**i * (g_k @ d_k)), 0.0)
        if r:
            h, g_last, s, init = cand, g_k, r * d_k, True
        m = GAMMA * m + (g - basis.T @ g_k)
        w = w + r * d - ALPHA * m
    return w


def test_stage_two_step_matches_numpy_reference(tmp_path):
    model, x, y = least_squares()
    q, _ = np.linalg.qr(np.random.default_rng(1).normal(size=(6, 3)))
    basis = q.T.astype("float32")  # 3 x 6, orthonormal rows
    np.save(tmp_path / "basis.npy", basis)
    config = {"boost": {"mode": "manual", "dim_reduce": True},
              "dim_reduce": {"pca_mat_path": str(tmp_path / "basis.npy"), "n_components": 3,
                             "rho": RHO, "gamma": GAMMA, "alpha": ALPHA, "sigma": SIGMA}}
    stage2 = boost.BoostModel.from_model(model, boost_config_dict=config)
    stage2.compile(optimizer="sgd", loss="mse")
    assert stage2.check_dim_reduce_enable()
    stage2.fit(x, y, batch_size=64, epochs=4, shuffle=False, verbose=0)  # 4 full-batch steps
    want = np_dim_reduce(np.zeros(6), x.astype("float64"), y.astype("float64"), basis.astype("float64"), 4)
    np.testing.assert_allclose(to_numpy(stage2.trainable_variables)[0][:, 0], want, rtol=1e-4, atol=1e-5)
    dim_reduce = boost.optimizers.find_in_chain(stage2.optimizer, boost.optimizers.DimReduce)
    assert int(dim_reduce.iterations.numpy()) == 4


def test_two_stage_run_on_mnist(tmp_path):
    (x, y), _ = mnist_data()
    x, y = x[:512], y[:512]
    keras.utils.set_random_seed(0)
    inputs = keras.Input((28, 28, 1))
    h = keras.layers.Conv2D(4, 3, strides=2, activation="relu")(inputs)
    h = keras.layers.BatchNormalization()(keras.layers.MaxPooling2D()(h))
    model = keras.Model(inputs, keras.layers.Dense(10)(keras.layers.Flatten()(h)))
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    model.compile(optimizer=keras.optimizers.SGD(0.05, momentum=0.9), loss=loss)
    model.fit(x, y, batch_size=64, epochs=3, verbose=0,
              callbacks=[boost.callbacks.WeightTrajectory(tmp_path / "traj", every=2)])
    config = {"boost": {"mode": "manual", "dim_reduce": True},
              "dim_reduce": {"weight_load_dir": str(tmp_path / "traj"), "n_components": 6}}
    stage2 = boost.BoostModel.from_model(model, boost_config_dict=config)
    stage2.compile(optimizer="sgd", loss=loss)
    history = stage2.fit(x, y, batch_size=64, epochs=3, verbose=0)
    # The training loss (what stage 2 minimizes; the inference loss also moves
    # with the BN statistics, still settling after so short a stage 1).
    assert history.history["loss"][-1] < history.history["loss"][0]
    assert set(history.history) >= {"loss", "line_search_accepted"}
    dim_reduce = boost.optimizers.find_in_chain(stage2.optimizer, boost.optimizers.DimReduce)
    assert int(dim_reduce.accepted_steps.numpy()) > 0
    assert (tmp_path / "traj" / "pca_mat.npy").exists()


def test_errors(tmp_path):
    model, x, y = least_squares()
    cfg = {"boost": {"mode": "manual", "dim_reduce": True}}
    stage2 = boost.BoostModel.from_model(model, boost_config_dict=cfg)
    status = stage2.check_dim_reduce_enable()
    assert not status and "no stage-1 basis" in status.reason
    with pytest.raises(ValueError, match="needs the stage-1 trajectory"):
        stage2.compile(optimizer="sgd", loss="mse")
    np.save(tmp_path / "wrong.npy", np.zeros((32, 5), "float32"))
    cfg["dim_reduce"] = {"pca_mat_path": str(tmp_path / "wrong.npy")}
    with pytest.raises(ValueError, match=r"shape \(32, 5\); this model needs at least \(32, 6\)"):
        boost.BoostModel.from_model(model, boost_config_dict=cfg).compile(optimizer="sgd", loss="mse")
    plain = keras.Model(model.inputs, model.outputs)
    np.save(tmp_path / "ok.npy", np.eye(6, dtype="float32")[:2])
    plain.compile(optimizer=boost.optimizers.DimReduce(keras.optimizers.SGD(), n_components=2,
                                                       pca_mat_path=str(tmp_path / "ok.npy")), loss="mse")
    with pytest.raises(RuntimeError, match="runs in BoostModel's train step"):
        plain.fit(x, y, verbose=0)
    assert not boost.BoostModel.from_model(model).check_dim_reduce_enable()


def test_accumulation_with_dim_reduce_is_switched_off_and_named():
    config = {"boost": {"mode": "manual", "dim_reduce": True, "grad_accumulation": True},
              "dim_reduce": {"weight_load_dir": "unused"}}
    with pytest.warns(boost.NoEffectWarning, match=r"dim_reduce is exclusive.*\['grad_accumulation'\]"):
        opt = boost.wrap(keras.optimizers.SGD(), "O0", config)
    assert isinstance(opt.inner_optimizer, boost.DimReduce)
    assert opt.boost_config["boost"]["grad_accumulation"] is False


# --- the basis across workers (no cluster needed) --------------------------------


def _write_later(path, array, delay):
    timer = threading.Timer(delay, lambda: atomic_write(str(path), lambda f: np.save(f, array)))
    timer.start()
    return timer


def test_a_worker_waits_for_the_basis_the_chief_writes(tmp_path):
    model, _, _ = least_squares()
    path = tmp_path / "shared.npy"
    basis = np.eye(6, dtype="float32")[:3]
    start = time.monotonic()  # before the timer starts: it writes 0.2 s after this at the earliest
    timer = _write_later(path, basis, 0.2)
    got = load_basis(3, str(path), variables=model.trainable_variables, chief=False, workers=2,
                     timeout=20, poll_interval=0.02)
    timer.join()
    assert 0.2 <= time.monotonic() - start < 10
    np.testing.assert_array_equal(got, basis)
    # An existing file is read at once, by the chief and the others alike.
    assert wait_for_basis(str(path), timeout=0) == str(path)


def test_a_worker_gives_up_after_the_timeout(tmp_path):
    model, _, _ = least_squares()
    path = tmp_path / "never.npy"
    start = time.monotonic()
    with pytest.raises(TimeoutError, match=r"timeout=0\.1 s for the basis pca_mat_path='.*never\.npy'"):
        load_basis(3, str(path), variables=model.trainable_variables, chief=False, workers=2,
                   timeout=0.1, poll_interval=0.02)
    assert time.monotonic() - start < 5
    assert not path.exists()


def test_several_workers_need_pca_mat_path(tmp_path):
    model, _, _ = least_squares()
    for chief in (True, False):
        with pytest.raises(ValueError, match="on 2 workers shares the basis through pca_mat_path"):
            load_basis(3, None, str(tmp_path), model.trainable_variables, chief=chief, workers=2)


def test_the_chief_writes_the_basis_atomically_where_asked(tmp_path):
    model, x, y = least_squares()
    directory = tmp_path / "traj"
    trajectory = boost.callbacks.WeightTrajectory(directory)
    trajectory.set_model(model)
    rng = np.random.default_rng(0)
    for i in range(5):
        model.trainable_variables[0].assign(rng.normal(size=(6, 1)).astype("float32"))
        trajectory.save_snapshot(f"s{i}")
    path = tmp_path / "basis_without_suffix"  # np.save(path) would have added .npy
    basis = load_basis(3, str(path), str(directory), model.trainable_variables, chief=True, workers=2)
    np.testing.assert_array_equal(np.load(path), basis)
    assert not [f for f in os.listdir(tmp_path) if f.startswith(".tmp-")]


def test_status_on_several_workers(tmp_path, monkeypatch):
    model, _, _ = least_squares()
    seam = kb_backend.current()
    cfg = {"boost": {"mode": "manual", "dim_reduce": True},
           "dim_reduce": {"weight_load_dir": str(tmp_path)}}
    monkeypatch.setattr(seam, "worker_role", lambda: (True, 2))
    status = boost.BoostModel.from_model(model, boost_config_dict=cfg).check_dim_reduce_enable()
    assert not status and "2 workers share the basis through pca_mat_path" in status.reason
    monkeypatch.setattr(seam, "worker_role", lambda: (False, 2))
    cfg["dim_reduce"] = {"pca_mat_path": str(tmp_path / "later.npy"), "timeout": 60}
    status = boost.BoostModel.from_model(model, boost_config_dict=cfg).check_dim_reduce_enable()
    assert status and "reads the basis the chief writes" in status.reason and "timeout=60" in status.reason


@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="TensorFlow's cluster roles")
def test_tensorflow_chief_rule():
    from keras_boost.backend import tensorflow_backend as tf_seam

    workers = {"worker": ["a:1", "b:2"]}
    assert tf_seam.is_chief(workers, "worker", 0)
    assert not tf_seam.is_chief(workers, "worker", 1)
    with_chief = {"chief": ["c:0"], "worker": ["a:1", "b:2"]}
    assert tf_seam.is_chief(with_chief, "chief", 0)
    assert not tf_seam.is_chief(with_chief, "worker", 0)
    assert tf_seam.worker_role() == (True, 1)  # no multi-worker strategy here


# --- arguments: one rule for DimReduce and the config's dim_reduce section ---------

BAD_ARGUMENTS = [
    ("n_components", 0, ValueError, r"n_components must be >= 1, got 0"),
    ("n_components", 2.0, TypeError, r"n_components must be an int"),
    ("rho", 1.0, ValueError, r"rho must be in \(0.0, 1.0\), got 1.0"),
    ("gamma", 1.0, ValueError, r"gamma must be in \[0.0, 1.0\)"),
    ("gamma", -0.1, ValueError, r"gamma must be in \[0.0, 1.0\)"),
    ("alpha", 0, ValueError, r"alpha must be in \(0.0, inf\)"),
    ("sigma", 0.0, ValueError, r"sigma must be in \(0.0, 1.0\)"),
    ("sigma", "0.4", TypeError, r"sigma must be a number"),
    ("timeout", 0, ValueError, r"timeout must be in \(0.0, inf\), got 0"),
    ("max_line_search", 0, ValueError, r"max_line_search must be >= 1"),
    ("pca_mat_path", 3, TypeError, r"pca_mat_path must be a path"),
]


@pytest.mark.parametrize("key, value, error, message", BAD_ARGUMENTS)
def test_bad_arguments_raise_in_the_optimizer_and_the_config(key, value, error, message):
    with pytest.raises(error, match=f"dim_reduce.{message}"):
        boost.optimizers.DimReduce(keras.optimizers.SGD(), **{key: value})
    with pytest.raises(error, match=f"dim_reduce.{message}"):
        boost.AutoBoost("O0", {"boost": {"mode": "manual", "dim_reduce": True}, "dim_reduce": {key: value}})


def test_gamma_zero_is_residual_sgd_without_momentum():
    assert boost.optimizers.DimReduce(keras.optimizers.SGD(), gamma=0.0).gamma == 0.0
    assert boost.AutoBoost("O0", {"boost": {"mode": "manual", "dim_reduce": True},
                                  "dim_reduce": {"gamma": 0}}).config["dim_reduce"]["gamma"] == 0.0
