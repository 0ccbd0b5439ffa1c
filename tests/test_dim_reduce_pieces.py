"""DimReduce's building blocks: trajectory snapshots, PCA, BFGS and Armijo math.

(The stage-2 train step is tested in test_dim_reduce.py, on several replicas
in test_distribute_tf.py.)
"""

import json
import os

import keras
import numpy as np
import pytest

import keras_boost as boost
from conftest import dense_graph
from conftest import regression_data
from keras_boost.algorithms import dim_reduce as dr
from keras_boost.algorithms.dim_reduce import trajectory_pca


def np_(x):
    return np.asarray(keras.ops.convert_to_numpy(x))


# --- PCA ------------------------------------------------------------------------


def test_pca_basis_is_orthonormal_and_equals_numpy_svd_up_to_sign():
    rng = np.random.default_rng(0)
    samples = rng.normal(size=(12, 200)).cumsum(axis=0).astype("float32")  # a random walk
    basis = trajectory_pca(samples, 4)
    assert basis.shape == (4, 200) and basis.dtype == np.float32
    np.testing.assert_allclose(basis @ basis.T, np.eye(4), atol=1e-5)
    centred = samples.astype("float64") - samples.mean(0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    for row, ref in zip(basis, vt[:4]):
        assert min(np.abs(row - ref).max(), np.abs(row + ref).max()) < 1e-4
        assert row[np.argmax(np.abs(row))] > 0  # sign rule: the largest entry is positive


def test_pca_needs_more_snapshots_than_components():
    samples = np.random.default_rng(1).normal(size=(4, 30))
    with pytest.raises(ValueError, match="needs at least 5 weight snapshots"):
        trajectory_pca(samples, 4)
    with pytest.raises(ValueError, match="spans fewer than 3 directions"):
        trajectory_pca(np.repeat(samples[:2], 3, axis=0), 3)
    with pytest.raises(ValueError, match="2-D array"):
        trajectory_pca(samples[0], 1)


# --- BFGS and Armijo ------------------------------------------------------------


def np_bfgs(h, s, y):
    rho = 1.0 / (y @ s)
    left = np.eye(len(s)) - rho * np.outer(s, y)
    return left @ h @ left.T + rho * np.outer(s, s)


def test_bfgs_inverse_update_matches_numpy_and_the_secant_condition():
    rng = np.random.default_rng(2)
    a = rng.normal(size=(5, 5))
    h = a @ a.T + np.eye(5)
    s = rng.normal(size=5)
    y = s + 0.1 * rng.normal(size=5)  # y.s > 0
    h, s, y = (v.astype("float32") for v in (h, s, y))  # JAX computes in float32
    got = np_(dr.bfgs_inverse_update(h, s, y)).astype("float64")
    want = np_bfgs(*(v.astype("float64") for v in (h, s, y)))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got @ y, s, rtol=1e-4, atol=1e-4)  # H_new y = s


def test_bfgs_curvature_guard_keeps_the_matrix():
    h = np.eye(3)
    s = np.array([1.0, 0.0, 0.0])
    np.testing.assert_array_equal(np_(dr.bfgs_inverse_update(h, s, -s)), h)  # y.s < 0
    np.testing.assert_array_equal(np_(dr.bfgs_inverse_update(h, s, np.zeros(3))), h)


def test_armijo_rule():
    # slope -2, sigma 0.4, step 1: accepted iff loss_new < loss_old - 0.8.
    assert bool(np_(dr.armijo_accepts(0.1, 1.0, 0.4, 1.0, -2.0)))
    assert not bool(np_(dr.armijo_accepts(0.3, 1.0, 0.4, 1.0, -2.0)))
    assert not bool(np_(dr.armijo_accepts(0.2, 1.0, 0.4, 1.0, -2.0)))  # equality is a reject
    # A shorter step has a weaker bar: 0.5 fails at step 1 (bar 0.2), passes at 0.55 (bar 0.56).
    assert not bool(np_(dr.armijo_accepts(0.5, 1.0, 0.4, 1.0, -2.0)))
    assert bool(np_(dr.armijo_accepts(0.5, 1.0, 0.4, 0.55, -2.0)))


def test_subspace_bfgs_beats_sgd_on_a_convex_quadratic():
    """Stage 1: SGD iterates of a quadratic whose curvature lives in 5
    directions (condition number 100); their PCA finds that subspace; BFGS
    with Armijo backtracking there needs far fewer steps than SGD."""
    rng = np.random.default_rng(3)
    n, k = 60, 5
    q, _ = np.linalg.qr(rng.normal(size=(n, k)))
    curvatures = np.linspace(1.0, 100.0, k)
    hessian = q @ np.diag(curvatures) @ q.T
    w_star = rng.normal(size=n)
    w0 = w_star + q @ rng.normal(size=k)

    def f(w):
        return 0.5 * (w - w_star) @ hessian @ (w - w_star)

    def grad(w):
        return hessian @ (w - w_star)

    # lr < 1 / max curvature: no direction is solved exactly in one step
    # (the trajectory keeps all 5).
    lr, w, trajectory = 1.0 / 150.0, w0.copy(), []
    for _ in range(10):
        w = w - lr * grad(w)
        trajectory.append(w.copy())
    basis = trajectory_pca(np.array(trajectory), k).astype("float64")
    start, tol = w.copy(), 1e-6 * f(w0)

    sgd_steps, w = 0, start.copy()
    while f(w) > tol and sgd_steps < 100_000:
        w, sgd_steps = w - lr * grad(w), sgd_steps + 1

    w, h, g_last, s, bfgs_steps = start.copy(), np.eye(k), None, None, 0
    while f(w) > tol and bfgs_steps < 1000:
        g_k = np_(dr.project(basis, grad(w)))
        if g_last is not None:
            h = np_(dr.bfgs_inverse_update(h, s, g_k - g_last))
        d_k = -h @ g_k
        direction = np_(dr.back_project(basis, d_k))
        step = next(
            (r for r in 0.55 ** np.arange(20)
             if bool(np_(dr.armijo_accepts(f(w + r * direction), f(w), 0.4, r, g_k @ d_k)))),
            0.0,
        )
        w, s, g_last, bfgs_steps = w + step * direction, step * d_k, g_k, bfgs_steps + 1
    assert f(w) <= tol
    assert bfgs_steps * 20 < sgd_steps, (bfgs_steps, sgd_steps)


# --- WeightTrajectory -----------------------------------------------------------


def fit_with_trajectory(directory, epochs=3, **kwargs):
    model = keras.Model(*dense_graph(batch_norm=False))
    model.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse")
    x, y = regression_data()
    model.fit(x, y, batch_size=8, epochs=epochs, verbose=0,
              callbacks=[boost.callbacks.WeightTrajectory(directory, **kwargs)])
    return model


def test_weight_trajectory_saves_and_loads_snapshots(tmp_path):
    model = fit_with_trajectory(tmp_path / "traj", epochs=3)
    samples, manifest = boost.callbacks.load_trajectory(tmp_path / "traj", model)
    assert samples.shape == (3, sum(int(np.prod(v.shape)) for v in model.trainable_variables))
    final = np.concatenate([np.ravel(np_(v.value)) for v in model.trainable_variables])
    np.testing.assert_array_equal(samples[-1], final)
    assert not np.array_equal(samples[0], samples[1])
    assert [s["tag"] for s in manifest["snapshots"]] == ["epoch 1", "epoch 2", "epoch 3"]
    assert not [f for f in os.listdir(tmp_path / "traj") if f.startswith(".tmp-")]
    # A second run appends to the same trajectory.
    fit_with_trajectory(tmp_path / "traj", epochs=1)
    assert boost.callbacks.load_trajectory(tmp_path / "traj")[0].shape[0] == 4


def test_weight_trajectory_every_n_steps_and_start_epoch(tmp_path):
    fit_with_trajectory(tmp_path / "t", epochs=2, every=2, start_epoch=1)  # 4 steps per epoch
    manifest = json.loads((tmp_path / "t" / "manifest.json").read_text())
    assert [s["tag"] for s in manifest["snapshots"]] == ["step 6", "step 8"]


def test_weight_trajectory_refuses_another_model(tmp_path):
    fit_with_trajectory(tmp_path / "t", epochs=1)
    other = keras.Model(*dense_graph(batch_norm=False, units=6))
    with pytest.raises(ValueError, match="does not match the model at variable 0"):
        boost.callbacks.load_trajectory(tmp_path / "t", other)
    with pytest.raises(ValueError, match="holds no weight trajectory"):
        boost.callbacks.load_trajectory(tmp_path / "missing")
    with pytest.raises(ValueError, match="every must be 'epoch' or an int"):
        boost.callbacks.WeightTrajectory(tmp_path, every=0)
