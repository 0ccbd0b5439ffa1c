"""AdaBelief, AdaBound and LARS: 20 steps against NumPy implementations of
their papers' update rules, on every backend; serialization; bad input."""

import keras
import numpy as np
import pytest

import keras_boost as boost
from conftest import dense_graph
from conftest import regression_data
from conftest import to_numpy

STEPS = 20


def np_adabelief(w, grads, lr=0.01, b1=0.9, b2=0.999, eps=1e-16, rectify=False):
    m, s = np.zeros_like(w), np.zeros_like(w)
    rho_inf = 2 / (1 - b2) - 1
    for t, g in enumerate(grads, start=1):
        m = b1 * m + (1 - b1) * g
        s = b2 * s + (1 - b2) * (g - m) ** 2 + eps
        m_hat = m / (1 - b1**t)
        adaptive = m_hat / (np.sqrt(s / (1 - b2**t)) + eps)
        if not rectify:
            w = w - lr * adaptive
            continue
        rho_t = rho_inf - 2 * t * b2**t / (1 - b2**t)
        if rho_t > 4:
            r_t = np.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
            w = w - lr * r_t * adaptive
        else:
            w = w - lr * m_hat
    return w


def np_adabound(w, grads, lr=0.01, final_lr=0.1, b1=0.9, b2=0.999, gamma=1e-3, eps=1e-8):
    m, v = np.zeros_like(w), np.zeros_like(w)
    for t, g in enumerate(grads, start=1):
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g**2
        step_size = lr * np.sqrt(1 - b2**t) / (1 - b1**t)
        lower = final_lr * (1 - 1 / (gamma * t + 1))
        upper = final_lr * (1 + 1 / (gamma * t))
        w = w - np.clip(step_size / (np.sqrt(v) + eps), lower, upper) * m
    return w


def np_lars(w, grads, lr=0.1, momentum=0.9, eta=0.001, wd=1e-4, adapt=True):
    v = np.zeros_like(w)
    for g in grads:
        if adapt:
            wn, gn = np.linalg.norm(w), np.linalg.norm(g)
            local = eta * wn / (gn + wd * wn) if wn > 0 and gn > 0 else 1.0
            g = g + wd * w
        else:
            local = 1.0
        v = momentum * v + lr * local * g
        w = w - v
    return w


def run_optimizer(optimizer, w0, grads):
    variable = keras.Variable(w0.astype("float32"))
    for g in grads:
        optimizer.apply([keras.ops.convert_to_tensor(g.astype("float32"))], [variable])
    return to_numpy([variable])[0]


def gradients(shape, seed):
    rng = np.random.default_rng(seed)
    return rng.normal(size=shape), [rng.normal(size=shape) for _ in range(STEPS)]


@pytest.mark.parametrize("rectify", [False, True])
def test_adabelief_matches_numpy(rectify):
    w0, grads = gradients((4, 3), 0)
    got = run_optimizer(boost.AdaBelief(0.01, rectify=rectify), w0, grads)
    np.testing.assert_allclose(got, np_adabelief(w0, grads, rectify=rectify), rtol=2e-5, atol=2e-6)


def test_adabelief_rectification_starts_as_momentum_sgd():
    # rho_t <= 4 for the first steps: the update is lr * m_hat, not adaptive.
    w0, grads = gradients((5,), 1)
    got = run_optimizer(boost.AdaBelief(0.01, rectify=True), w0, grads[:1])
    np.testing.assert_allclose(got, w0 - 0.01 * grads[0], rtol=1e-6)


def test_adabound_matches_numpy_and_is_bounded():
    w0, grads = gradients((6,), 2)
    got = run_optimizer(boost.AdaBound(0.01, final_lr=0.1), w0, grads)
    np.testing.assert_allclose(got, np_adabound(w0, grads), rtol=2e-5, atol=2e-6)
    # A tiny second moment would give Adam a huge step; the upper bound clips it.
    w = run_optimizer(boost.AdaBound(1.0, final_lr=0.1, gamma=1.0), np.zeros(2), [np.array([1e-6, 1e-6])])
    np.testing.assert_allclose(w, -0.1 * (1 + 1 / 1.0) * 0.1e-6, rtol=1e-3)


def test_lars_matches_numpy_and_excludes_1d_variables():
    w0, grads = gradients((4, 3), 3)
    opt = boost.LARS(0.1, momentum=0.9, lars_weight_decay=1e-4)
    np.testing.assert_allclose(run_optimizer(opt, w0, grads), np_lars(w0, grads), rtol=2e-5, atol=2e-6)
    b0, bias_grads = gradients((3,), 4)
    opt = boost.LARS(0.1, momentum=0.9, lars_weight_decay=1e-4)
    np.testing.assert_allclose(
        run_optimizer(opt, b0, bias_grads), np_lars(b0, bias_grads, adapt=False), rtol=2e-5, atol=2e-6
    )
    opt = boost.LARS(0.1, momentum=0.9, lars_weight_decay=1e-4, exclude_1d=False)
    np.testing.assert_allclose(run_optimizer(opt, b0, bias_grads), np_lars(b0, bias_grads), rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize(
    "make",
    [lambda: boost.AdaBelief(1e-2, rectify=True), lambda: boost.AdaBound(1e-2, final_lr=0.05),
     lambda: boost.LARS(0.1, lars_weight_decay=1e-4)],
    ids=["adabelief", "adabound", "lars"],
)
def test_fit_save_load_resume(tmp_path, make):
    x, y = regression_data()
    model = keras.Model(*dense_graph(batch_norm=False))
    model.compile(optimizer=make(), loss="mse")
    history = model.fit(x, y, batch_size=8, epochs=3, verbose=0)
    assert history.history["loss"][-1] < history.history["loss"][0]
    model.save(tmp_path / "m.keras")
    restored = keras.saving.load_model(tmp_path / "m.keras")
    assert type(restored.optimizer) is type(model.optimizer)
    assert restored.optimizer.get_config() == model.optimizer.get_config()
    for a, b in zip(to_numpy(model.optimizer.variables), to_numpy(restored.optimizer.variables)):
        np.testing.assert_array_equal(a, b)
    restored.fit(x, y, batch_size=8, epochs=1, verbose=0)


def test_schedules_work_and_scale_adabound_bounds():
    schedule = keras.optimizers.schedules.ExponentialDecay(0.01, 10, 0.5)
    opt = boost.AdaBound(schedule, final_lr=0.1)
    w0, grads = gradients((3,), 5)
    got = run_optimizer(opt, w0, grads[:1])  # at step 0 the schedule gives its initial value
    np.testing.assert_allclose(got, np_adabound(w0, grads[:1]), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: boost.AdaBelief(0.0), "learning_rate must be > 0"),
        (lambda: boost.AdaBelief(beta_1=1.0), r"beta_1 must be a float in \[0, 1\)"),
        (lambda: boost.AdaBound(final_lr=-1.0), "final_lr must be a positive float"),
        (lambda: boost.AdaBound(beta_2=-0.1), "beta_2 must be a float"),
        (lambda: boost.LARS(-0.1), "learning_rate must be > 0"),
        (lambda: boost.LARS(momentum=1.5), "momentum must be a float"),
        (lambda: boost.LARS(lars_weight_decay=-1e-4), "lars_weight_decay must be a non-negative"),
    ],
)
def test_bad_arguments(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_boost_wrap_accepts_them():
    opt = boost.wrap(boost.LARS(0.1), "O0")
    assert isinstance(opt.inner_optimizer, boost.LARS)
