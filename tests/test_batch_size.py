"""`boost.callbacks.AdaptiveBatchSize` (every backend) and the noise-scale estimator."""

import math

import keras
import numpy as np
import pytest

import keras_boost as boost
from conftest import dense_graph
from conftest import regression_data
from keras_boost.algorithms.batch_size import NoiseScale
from keras_boost.algorithms.batch_size import lr_factor
from keras_boost.algorithms.batch_size import simple_noise_scale

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


# --- the noise scale measured by GradientAccumulation -------------------------


def linear(k, lr=0.01):
    keras.utils.set_random_seed(0)
    inputs = keras.Input((16,))
    outputs = keras.layers.Dense(4, kernel_initializer="zeros")(inputs)
    model = keras.Model(inputs, outputs)
    opt = boost.GradientAccumulation(keras.optimizers.SGD(lr), max_accumulation_step=k)
    model.compile(optimizer=opt, loss="mse")
    return model, opt


def least_squares_data(n, noise, seed=1):
    """y = x @ W* + noise * N(0, 1): at W = 0, B_simple ~ 125 for noise 5 (Monte Carlo)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 16)).astype("float32")
    y = x @ np.full((16, 4), 0.5, "float32") + noise * rng.normal(size=(n, 4)).astype("float32")
    return x, y


def ema_of(measurements, decay=0.9):
    """B_simple of NoiseScale's EMA, recomputed from (step, k, small, big, _)."""
    g2 = trace = None
    for _, k, small, big, _ in measurements:
        _, g, t = simple_noise_scale(small, big, B, k * B)
        g2 = g if g2 is None else decay * g2 + (1 - decay) * g
        trace = t if trace is None else decay * trace + (1 - decay) * t
    return trace / g2 if g2 > 0 else math.inf


def test_auto_noise_scale_raises_k_when_the_labels_are_noisy():
    x, y = least_squares_data(96, noise=5.0)  # 12 micro-batches of 8
    model, opt = linear(k=2)
    grow = boost.callbacks.AdaptiveBatchSize(noise_scale="auto", max_steps=4, micro_batch=B, lr_rule=None)
    model.fit(x, y, batch_size=B, epochs=1, shuffle=False, verbose=0, callbacks=[grow])
    assert opt.measure_gradient_norms  # switched on by the callback
    # The first window (k=2, b_big=16) measures B_simple > 8 * 3: k goes to the cap.
    assert grow.measurements[0][:2] == (2, 2)
    assert 4 * B < grow.measurements[0][4] < math.inf
    assert [(s, k) for s, _, k, _ in grow.history] == [(2, 4)]
    assert opt.max_accumulation_step == 4
    # Later windows are fed with their own k (b_big = 4 * 8): windows close at 6 and 10.
    assert [(s, k) for s, k, *_ in grow.measurements] == [(2, 2), (6, 4), (10, 4)]
    assert grow.noise_scale.value == pytest.approx(ema_of(grow.measurements), rel=1e-6)
    assert grow.noise_scale.count == 3


def test_auto_noise_scale_keeps_k_for_a_noise_free_gradient():
    x, y = least_squares_data(8, noise=5.0)
    x, y = np.tile(x, (8, 1)), np.tile(y, (8, 1))  # every micro-batch is the same 8 rows
    model, opt = linear(k=2)
    grow = boost.callbacks.AdaptiveBatchSize(noise_scale="auto", max_steps=8, micro_batch=B)
    model.fit(x, y, batch_size=B, epochs=1, shuffle=False, verbose=0, callbacks=[grow])
    assert len(grow.measurements) == 4  # every window of 2 fed
    for _, k, small, big, _ in grow.measurements:
        assert k == 2 and big > 0
        assert small == pytest.approx(big, rel=1e-5)  # tr(Sigma) ~ 0
    assert abs(grow.noise_scale.value) < 1e-3
    assert grow.history == [] and opt.max_accumulation_step == 2


def test_noise_scale_mode_starts_measuring_at_k_two():
    x, y = least_squares_data(32, noise=0.0)
    model, opt = linear(k=1, lr=0.01)
    grow = boost.callbacks.AdaptiveBatchSize(noise_scale="auto", max_steps=2, micro_batch=B)
    model.fit(x, y, batch_size=B, epochs=1, shuffle=False, verbose=0, callbacks=[grow])
    assert grow.history == [(0, 0, 2, pytest.approx(0.02))]  # k=1 measures nothing: 2, linear LR rule
    assert [k for _, k, *_ in grow.measurements] == [2, 2]


def test_noise_scale_feeding_survives_save_and_load(tmp_path):
    x, y = least_squares_data(32, noise=5.0)
    model, opt = linear(k=2)
    grow = boost.callbacks.AdaptiveBatchSize(noise_scale=NoiseScale(B, 2 * B), max_steps=2, micro_batch=B)
    model.fit(x, y, batch_size=B, epochs=1, shuffle=False, verbose=0, callbacks=[grow])
    assert grow.noise_scale.count == 2
    model.save(tmp_path / "m.keras")
    restored = keras.saving.load_model(tmp_path / "m.keras")
    ga = restored.optimizer
    assert isinstance(ga, boost.GradientAccumulation) and ga.measure_gradient_norms
    assert ga.gradient_norms() == opt.gradient_norms()
    for a, b in zip(restored.get_weights(), model.get_weights()):
        np.testing.assert_array_equal(a, b)
    # A new fit feeds the same estimator, not the window it already saw.
    restored.fit(x, y, batch_size=B, epochs=1, shuffle=False, verbose=0, callbacks=[grow])
    assert grow.noise_scale.count == 4 and ga.gradient_norms().windows == 4


def test_noise_scale_errors():
    with pytest.raises(TypeError, match=r"noise_scale must be one of None, 'auto', a NoiseScale, got 'Auto'"):
        boost.callbacks.AdaptiveBatchSize(noise_scale="Auto", max_steps=4, micro_batch=B)
    with pytest.raises(ValueError, match=r"max_steps >= 2 .* got max_steps=1"):
        boost.callbacks.AdaptiveBatchSize(noise_scale="auto", max_steps=1, micro_batch=B)
    with pytest.raises(ValueError, match=r"micro_batch must be an int >= 1 .* got 0"):
        boost.callbacks.AdaptiveBatchSize(noise_scale="auto", max_steps=4, micro_batch=0)
    with pytest.raises(ValueError, match=r"max_steps=4, micro_batch=None"):
        boost.callbacks.AdaptiveBatchSize(noise_scale="auto", max_steps=4)


def test_noise_scale_update_takes_per_measurement_sizes():
    ns = NoiseScale(8, 16, decay=0.5)
    g2, trace = 0.5, 12.0
    ns.update(g2 + trace / 8, g2 + trace / 16)
    ns.update(g2 + trace / 8, g2 + trace / 64, b_small=8, b_big=64)
    assert ns.value == pytest.approx(trace / g2)
    assert (ns.g2, ns.trace) == pytest.approx((g2, trace))


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
