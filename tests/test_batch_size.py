"""`boost.callbacks.AdaptiveBatchSize` (every backend) and the noise-scale estimator."""

import math

import keras
import numpy as np
import pytest

import keras_boost as boost
from conftest import dense_graph
from conftest import regression_data
from keras_boost.callbacks.batch_size import NoiseScale
from keras_boost.callbacks.batch_size import lr_factor
from keras_boost.callbacks.batch_size import simple_noise_scale

B = 8  # micro-batch; 64 samples -> 8 micro-batches per epoch


def make(optimizer=None, k=1):
    keras.utils.set_random_seed(0)
    model = keras.Model(*dense_graph(batch_norm=False))
    opt = boost.GradientAccumulation(optimizer or keras.optimizers.SGD(0.1), max_accumulation_step=k)
    model.compile(optimizer=opt, loss="mse")
    return model, opt


def fit(model, callbacks, epochs=2):
    x, y = regression_data(n=64)
    model.fit(x, y, batch_size=B, epochs=epochs, shuffle=False, verbose=0, callbacks=callbacks)


def lr(model):
    return float(keras.ops.convert_to_numpy(model.optimizer.learning_rate))


def test_schedule_on_fractions_changes_steps_and_scales_lr_linearly():
    model, opt = make()
    grow = boost.callbacks.AdaptiveBatchSize({"0.5dur": 2, "0.75dur": 4}, lr_rule="linear")
    fit(model, [grow])
    assert [(step, epoch, k) for step, epoch, k, _ in grow.history] == [(8, 1, 2), (12, 1, 4)]
    np.testing.assert_allclose([h[3] for h in grow.history], [0.2, 0.4], rtol=1e-6)
    assert opt.max_accumulation_step == 4
    np.testing.assert_allclose(lr(model), 0.4, rtol=1e-6)
    # 8 updates at k=1, 2 at k=2, 1 at k=4: the traced step uses the new k.
    assert int(keras.ops.convert_to_numpy(opt.iterations)) == 11


def test_epoch_schedule_sqrt_rule_matches_a_manual_two_phase_run():
    model, opt = make(keras.optimizers.Adam(1e-2))
    grow = boost.callbacks.AdaptiveBatchSize({"1ep": 4}, lr_rule="sqrt")
    fit(model, [grow])
    assert [(s, e, k) for s, e, k, _ in grow.history] == [(8, 1, 4)]
    np.testing.assert_allclose(lr(model), 2e-2, rtol=1e-6)
    assert int(keras.ops.convert_to_numpy(opt.iterations)) == 8 + 2

    ref, ref_opt = make(keras.optimizers.Adam(1e-2))
    fit(ref, [], epochs=1)
    ref_opt.max_accumulation_step = 4
    ref.optimizer.learning_rate = 2e-2
    ref.make_train_function(force=True)
    x, y = regression_data(n=64)
    ref.fit(x, y, batch_size=B, epochs=2, initial_epoch=1, shuffle=False, verbose=0)
    for a, b in zip(model.get_weights(), ref.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_changes_wait_for_the_window_boundary_and_lr_rule_none():
    model, opt = make(k=3)  # windows of 3: boundaries at 0, 3, 6, 9, ...
    grow = boost.callbacks.AdaptiveBatchSize({1: 2}, lr_rule=None)
    fit(model, [grow])
    assert [(s, k) for s, _, k, _ in grow.history] == [(9, 2)]  # epoch 1 starts at 8, mid-window
    np.testing.assert_allclose(lr(model), 0.1, rtol=1e-6)
    assert grow.history[0][3] is None


def test_noise_scale_mode_grows_k_up_to_max_steps():
    noise = NoiseScale(b_small=8, b_big=64)
    noise.update(1.0 + 24.0 / 8, 1.0 + 24.0 / 64)  # |G|^2 = 1, tr(Sigma) = 24 -> B_simple = 24
    assert noise.value == pytest.approx(24.0)
    model, opt = make()
    grow = boost.callbacks.AdaptiveBatchSize(noise_scale=noise, max_steps=2, micro_batch=B)
    fit(model, [grow], epochs=1)
    assert [(s, k) for s, _, k, _ in grow.history] == [(0, 2)]  # ceil(24 / 8) = 3, capped at 2


def test_errors():
    with pytest.raises(ValueError, match="lr_rule must be one of"):
        boost.callbacks.AdaptiveBatchSize({1: 2}, lr_rule="cubic")
    with pytest.raises(ValueError, match=r"k=8 at '0.5dur', above max_steps=4"):
        boost.callbacks.AdaptiveBatchSize({"0.5dur": 8}, max_steps=4)
    with pytest.raises(ValueError, match="'100ba'"):
        boost.callbacks.AdaptiveBatchSize({"100ba": 2})
    with pytest.raises(ValueError, match="accumulation steps"):
        boost.callbacks.AdaptiveBatchSize({1: 0})
    with pytest.raises(ValueError, match="a schedule or a noise_scale"):
        boost.callbacks.AdaptiveBatchSize()
    plain = keras.Model(*dense_graph(batch_norm=False))
    plain.compile(optimizer="sgd", loss="mse")
    with pytest.raises(ValueError, match="boost.GradientAccumulation"):
        fit(plain, [boost.callbacks.AdaptiveBatchSize({1: 2})], epochs=1)
    model, _ = make(keras.optimizers.SGD(keras.optimizers.schedules.ExponentialDecay(0.1, 10, 0.5)))
    with pytest.raises(ValueError, match="ExponentialDecay"):
        fit(model, [boost.callbacks.AdaptiveBatchSize({1: 2})], epochs=1)


# --- the estimator (pure NumPy) ----------------------------------------------


def test_lr_factor():
    assert lr_factor("linear", 2, 8) == 4
    assert lr_factor("sqrt", 2, 8) == 2
    assert lr_factor(None, 2, 8) == 1


def test_simple_noise_scale_is_exact_on_expected_norms():
    g2, trace = 0.5, 12.0
    for b_small, b_big in ((4, 32), (16, 17)):
        b, g, t = simple_noise_scale(g2 + trace / b_small, g2 + trace / b_big, b_small, b_big)
        assert (b, g, t) == pytest.approx((trace / g2, g2, trace))
    assert simple_noise_scale(10.0, 1.0, 4, 32)[0] == math.inf  # |G|^2 estimate <= 0: noise dominates
    with pytest.raises(ValueError, match="b_small < b_big"):
        simple_noise_scale(1.0, 0.5, 32, 32)


def test_simple_noise_scale_against_monte_carlo():
    rng = np.random.default_rng(0)
    dim, b_small, b_big, reps = 20, 4, 64, 2000
    grad = rng.normal(size=dim) * 0.3
    scales = rng.uniform(0.5, 2.0, size=dim)  # per-example noise: diagonal Sigma
    true = float(np.sum(scales**2) / np.sum(grad**2))

    def batch_mean(b):
        return grad + (rng.normal(size=(reps, b, dim)) * scales).mean(axis=1)

    small = np.sum(batch_mean(b_small) ** 2, axis=1)
    big = np.sum(batch_mean(b_big) ** 2, axis=1)
    estimate, _, _ = simple_noise_scale(small, big, b_small, b_big)
    assert estimate == pytest.approx(true, rel=0.1)
    ema = NoiseScale(b_small, b_big, decay=0.5)
    for s, g in zip(small[:3], big[:3]):
        ema.update(s, g)
    _, g2s, trs = zip(*(simple_noise_scale(s, g, b_small, b_big) for s, g in zip(small[:3], big[:3])))
    g2 = 0.25 * g2s[0] + 0.25 * g2s[1] + 0.5 * g2s[2]
    tr = 0.25 * trs[0] + 0.25 * trs[1] + 0.5 * trs[2]
    assert ema.value == pytest.approx(tr / g2)
