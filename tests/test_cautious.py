"""Cautious optimizers (C-AdamW): the mask against NumPy, the wrapper against a
NumPy C-AdamW and C-SGD-momentum, weight decay left unmasked, the mask
fraction, fit, saving and exact resume, and the config switch."""

import os
import subprocess
import sys

import keras
import numpy as np
import pytest

import keras_boost as boost
from keras_boost import ops as kb_ops
from keras_boost.optimizers import optimizer_chain

from conftest import requires_tensorflow


def to_np(x):
    return np.array(keras.ops.convert_to_numpy(x))


def numpy_mask(u, g, max_scale=1000.0):
    phi = (u * g > 0).astype(np.float64)
    return phi * min(1.0 / max(phi.mean(), 1e-12), max_scale)


# --- the math -----------------------------------------------------------------


def test_mask_matches_numpy():
    rng = np.random.default_rng(0)
    u, g = rng.normal(size=(2, 5, 7)).astype("float32")
    g[0, :3] = 0.0  # a zero gradient keeps nothing
    np.testing.assert_allclose(to_np(kb_ops.cautious_mask(u, g)), numpy_mask(u, g), rtol=1e-6)
    np.testing.assert_allclose(to_np(kb_ops.cautious_update(u, g)), u * numpy_mask(u, g), rtol=1e-6)
    np.testing.assert_array_equal(to_np(kb_ops.kept_coordinates(u, g)), (u * g > 0).astype("float32"))
    masked, kept = kb_ops.cautious_update(u, g, return_kept_fraction=True)
    np.testing.assert_allclose(to_np(masked), u * numpy_mask(u, g), rtol=1e-6)
    assert float(to_np(kept)) == pytest.approx((u * g > 0).mean())


def test_mask_sign_convention_and_floor():
    # `update` is the step subtracted: it agrees where it has the gradient's sign.
    np.testing.assert_allclose(to_np(kb_ops.cautious_mask(np.array([0.1, -0.2, 0.3, 0.4]), np.ones(4))),
                               [4 / 3, 0, 4 / 3, 4 / 3], rtol=1e-6)
    # Nothing agrees: the floor of the rescaling keeps the mask at zero (no division by 0).
    np.testing.assert_array_equal(to_np(kb_ops.cautious_mask(-np.ones(3), np.ones(3))), np.zeros(3))
    assert keras.backend.standardize_dtype(
        kb_ops.cautious_update(keras.ops.ones((3,), "float16"), np.ones(3)).dtype) == "float16"


# --- the wrapper against NumPy ------------------------------------------------


def variables():
    rng = np.random.default_rng(1)
    kernel = keras.Variable(rng.normal(size=(4, 3)).astype("float32"), name="kernel")
    bias = keras.Variable(rng.normal(size=(3,)).astype("float32"), name="bias")
    return [kernel, bias]


def gradient_steps(n=6, seed=2):
    rng = np.random.default_rng(seed)
    return [[rng.normal(size=(4, 3)).astype("float32"), rng.normal(size=(3,)).astype("float32")]
            for _ in range(n)]


def run(optimizer, steps, vs):
    for grads in steps:
        optimizer.apply([keras.ops.convert_to_tensor(g) for g in grads], vs)
    return [to_np(v) for v in vs]


def test_cautious_adamw_matches_numpy_with_unmasked_decay_and_moments():
    lr, wd, b1, b2, eps = 0.05, 0.1, 0.9, 0.999, 1e-7
    vs = variables()
    theta = [to_np(v).astype(np.float64) for v in vs]
    inner = keras.optimizers.AdamW(lr, weight_decay=wd, beta_1=b1, beta_2=b2, epsilon=eps)
    inner.exclude_from_weight_decay(var_names=["bias"])
    opt = boost.CautiousOptimizer(inner)
    steps = gradient_steps()
    m = [np.zeros_like(t) for t in theta]
    v = [np.zeros_like(t) for t in theta]
    fractions = []
    for t, grads in enumerate(steps, start=1):
        masked = total = 0
        for i, g in enumerate(grads):
            g = g.astype(np.float64)
            if i == 0:  # the bias is excluded from weight decay
                theta[i] = theta[i] - theta[i] * wd * lr
            m[i] += (g - m[i]) * (1 - b1)
            v[i] += (g * g - v[i]) * (1 - b2)
            alpha = lr * np.sqrt(1 - b2**t) / (1 - b1**t)
            u = m[i] * alpha / (np.sqrt(v[i]) + eps)
            phi = numpy_mask(u, g)
            theta[i] = theta[i] - u * phi
            masked += int((phi == 0).sum())
            total += phi.size
        fractions.append(masked / total)
        opt.apply([keras.ops.convert_to_tensor(g) for g in grads], vs)
        for var, expected in zip(vs, theta):
            # float32 against float64 over six steps, the rescaling amplifying.
            np.testing.assert_allclose(to_np(var), expected, rtol=1e-5, atol=1e-5)
        assert opt.masked_fraction == pytest.approx(fractions[-1], abs=1e-6)
    assert max(fractions) > 0.2  # the mask fired
    # The moments are the plain AdamW's: masking touches only the step taken.
    moments = {var.path: to_np(var) for var in inner.variables}
    momentum = [moments[p] for p in sorted(moments) if "momentum" in p]
    velocity = [moments[p] for p in sorted(moments) if "velocity" in p]
    for got, expected in zip(momentum + velocity, sorted_like(vs, m) + sorted_like(vs, v)):
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-7)


def sorted_like(vs, values):
    """`values` (one per variable) in the order of the variables' slot paths."""
    order = sorted(range(len(vs)), key=lambda i: vs[i].name)
    return [values[i] for i in order]


def test_cautious_sgd_momentum_matches_numpy():
    lr, mom = 0.1, 0.9
    vs = variables()
    theta = [to_np(v).astype(np.float64) for v in vs]
    opt = boost.CautiousOptimizer(keras.optimizers.SGD(lr, momentum=mom))
    velocity = [np.zeros_like(t) for t in theta]
    for grads in gradient_steps(5, seed=3):
        for i, g in enumerate(grads):
            velocity[i] = mom * velocity[i] - lr * g
            u = -velocity[i]  # the step subtracted
            theta[i] = theta[i] - u * numpy_mask(u, g)
        opt.apply([keras.ops.convert_to_tensor(g) for g in grads], vs)
        for var, expected in zip(vs, theta):
            np.testing.assert_allclose(to_np(var), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("max_scale", [1.0, 1.5])
def test_max_scale_caps_the_rescaling(max_scale):
    # SGD with momentum: u = -velocity; the kept coordinates are scaled by
    # min(1 / mean(kept), max_scale) (1.0: they take the plain step).
    lr, mom = 0.1, 0.9
    vs = variables()
    theta = [to_np(v).astype(np.float64) for v in vs]
    opt = boost.CautiousOptimizer(keras.optimizers.SGD(lr, momentum=mom), max_scale=max_scale)
    velocity = [np.zeros_like(t) for t in theta]
    scales = []
    for grads in gradient_steps(5, seed=3):
        for i, g in enumerate(grads):
            velocity[i] = mom * velocity[i] - lr * g
            u = -velocity[i]
            scales.append(1.0 / max((u * g > 0).mean(), 1e-12))
            theta[i] = theta[i] - u * numpy_mask(u, g, max_scale)
        opt.apply([keras.ops.convert_to_tensor(g) for g in grads], vs)
        for var, expected in zip(vs, theta):
            np.testing.assert_allclose(to_np(var), expected, rtol=1e-5, atol=1e-6)
    assert max(scales) > max_scale  # the cap acted


@pytest.mark.parametrize("bad", [0.5, 0.0, float("inf"), True, "2"])
def test_max_scale_refuses_bad_values(bad):
    with pytest.raises(ValueError, match="max_scale must be a finite number >= 1.0"):
        boost.CautiousOptimizer(keras.optimizers.SGD(0.1), max_scale=bad)


def test_cautious_lion_matches_numpy():
    lr, wd, b1, b2 = 0.01, 0.5, 0.9, 0.99
    vs = variables()
    theta = [to_np(v).astype(np.float64) for v in vs]
    opt = boost.CautiousOptimizer(keras.optimizers.Lion(lr, beta_1=b1, beta_2=b2, weight_decay=wd))
    m = [np.zeros_like(t) for t in theta]
    for grads in gradient_steps(5, seed=6):
        for i, g in enumerate(grads):
            theta[i] = theta[i] - theta[i] * wd * lr
            u = lr * np.sign(b1 * m[i] + (1 - b1) * g)
            theta[i] = theta[i] - u * numpy_mask(u, g)
            m[i] = b2 * m[i] + (1 - b2) * g
        opt.apply([keras.ops.convert_to_tensor(g) for g in grads], vs)
        for var, expected in zip(vs, theta):
            np.testing.assert_allclose(to_np(var), expected, rtol=1e-5, atol=1e-6)
    assert opt.masked_fraction > 0.0


def test_mask_fraction_counts_the_disagreeing_coordinates():
    v = keras.Variable(np.zeros(4, "float32"))
    opt = boost.CautiousOptimizer(keras.optimizers.SGD(0.1, momentum=0.9))
    opt.apply([keras.ops.ones((4,))], [v])
    assert opt.masked_fraction == 0.0
    # Momentum still steps downhill where the gradient turned: those two are masked,
    # the two kept ones doubled (1 / mean(phi) = 2).
    before = to_np(v)
    opt.apply([keras.ops.convert_to_tensor(np.array([-0.5, -0.5, 1.0, 1.0], "float32"))], [v])
    assert opt.masked_fraction == pytest.approx(0.5)
    plain_step = 0.9 * 0.1 + 0.1 * 1.0  # SGD-momentum's step on the agreeing ones
    np.testing.assert_allclose(to_np(v), before - np.array([0, 0, 2 * plain_step, 2 * plain_step]),
                               rtol=1e-5)
    assert "50% of coordinates masked" in opt.summary()


def test_all_agreeing_is_the_inner_optimizer_exactly():
    # Plain SGD (with decoupled decay) always steps against the gradient.
    steps = gradient_steps(3, seed=4)
    plain = run(keras.optimizers.SGD(0.1, weight_decay=0.05), steps, variables())
    opt = boost.CautiousOptimizer(keras.optimizers.SGD(0.1, weight_decay=0.05))
    cautious = run(opt, steps, variables())
    for a, b in zip(plain, cautious):
        np.testing.assert_array_equal(a, b)
    assert opt.masked_fraction == 0.0


def test_weight_decay_follows_the_learning_rate_schedule():
    schedule = keras.optimizers.schedules.ExponentialDecay(0.1, decay_steps=1, decay_rate=0.5)
    steps = gradient_steps(3, seed=5)
    plain = run(keras.optimizers.SGD(schedule, weight_decay=0.3), steps, variables())
    cautious = run(boost.CautiousOptimizer(keras.optimizers.SGD(schedule, weight_decay=0.3)), steps, variables())
    for a, b in zip(plain, cautious):
        np.testing.assert_array_equal(a, b)


def test_refuses_an_inner_ema_or_accumulation():
    with pytest.raises(ValueError, match="use_ema"):
        boost.CautiousOptimizer(keras.optimizers.AdamW(use_ema=True))
    with pytest.raises(ValueError, match="GradientAccumulation"):
        boost.CautiousOptimizer(keras.optimizers.Adam(gradient_accumulation_steps=2))


@pytest.mark.skipif(keras.backend.backend() == "jax",
                    reason="Keras' LossScaleOptimizer.apply runs only statelessly on JAX")
def test_a_step_the_inner_optimizer_skips_leaves_the_weights():
    v = keras.Variable(np.ones(4, "float32"), name="w")
    inner = keras.optimizers.LossScaleOptimizer(keras.optimizers.AdamW(0.1, weight_decay=0.5))
    opt = boost.CautiousOptimizer(inner)
    opt.apply([keras.ops.convert_to_tensor(np.array([1.0, -1.0, 1.0, 1.0], "float32"))], [v])
    before, fraction = to_np(v), opt.masked_fraction
    # An overflow: the loss-scale optimizer skips the step, decay included.
    opt.apply([keras.ops.convert_to_tensor(np.array([np.inf, -1.0, 1.0, 1.0], "float32"))], [v])
    np.testing.assert_array_equal(to_np(v), before)
    assert opt.masked_fraction == fraction


# --- in fit, saved and resumed ------------------------------------------------


def small_model(seed=0):
    init = keras.initializers.GlorotUniform(seed=seed)
    tokens = keras.Input((6,), dtype="int32")
    h = keras.layers.Embedding(20, 8, embeddings_initializer=init, name="emb")(tokens)
    h = keras.layers.GlobalAveragePooling1D()(h)
    h = keras.layers.Dense(16, activation="relu", kernel_initializer=init, name="d1")(h)
    return keras.Model(tokens, keras.layers.Dense(3, kernel_initializer=init, name="d2")(h))


def data(n=64):
    rng = np.random.default_rng(0)
    return rng.integers(0, 20, size=(n, 6)).astype("int32"), rng.integers(0, 3, size=(n,))


def compiled(optimizer):
    model = small_model()
    model.compile(optimizer=optimizer, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def test_fit_trains_the_mask_fires_and_a_reloaded_model_resumes_exactly(tmp_path):
    x, y = data()
    opt = boost.CautiousOptimizer(keras.optimizers.AdamW(3e-3, weight_decay=0.01))
    model = compiled(opt)
    losses = model.fit(x, y, batch_size=16, epochs=2, verbose=0, shuffle=False).history["loss"]
    assert np.isfinite(losses).all() and losses[-1] < losses[0]
    assert int(opt.iterations) == 8
    assert 0.0 < opt.masked_fraction < 1.0
    path = os.path.join(tmp_path, "cautious.keras")
    model.save(path)
    model.fit(x, y, batch_size=16, epochs=1, verbose=0, shuffle=False)  # the continuous run

    loaded = keras.saving.load_model(path)
    reloaded = loaded.optimizer
    assert isinstance(reloaded, boost.CautiousOptimizer)
    assert isinstance(reloaded.inner_optimizer, keras.optimizers.AdamW)
    assert reloaded.inner_optimizer.weight_decay == pytest.approx(0.01)
    assert int(reloaded.iterations) == 8
    loaded.fit(x, y, batch_size=16, epochs=1, verbose=0, shuffle=False)
    for a, b in zip(model.get_weights(), loaded.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    assert reloaded.masked_fraction == pytest.approx(opt.masked_fraction, abs=1e-6)


def test_config_round_trip():
    opt = boost.CautiousOptimizer(keras.optimizers.Lion(1e-4, weight_decay=0.1), max_scale=2.0, name="c")
    again = boost.CautiousOptimizer.from_config(opt.get_config())
    assert again.name == "c" and isinstance(again.inner_optimizer, keras.optimizers.Lion)
    assert again.max_scale == 2.0
    assert again.inner_optimizer.weight_decay == pytest.approx(0.1)
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(opt))
    assert isinstance(restored, boost.CautiousOptimizer)


# --- the config switch ----------------------------------------------------------


def test_off_at_every_level():
    for level in ("O0", "O1", "O2"):
        assert boost.config.resolve_config(level)["boost"]["cautious"] is False
        chain = optimizer_chain(boost.wrap(keras.optimizers.AdamW(), level))
        assert not any(isinstance(o, boost.CautiousOptimizer) for o in chain)


def test_config_section_reaches_the_optimizer():
    config = {"boost": {"mode": "manual", "cautious": True}, "cautious": {"max_scale": 1}}
    chain = optimizer_chain(boost.wrap(keras.optimizers.AdamW(), "O0", config))
    assert [o.max_scale for o in chain if isinstance(o, boost.CautiousOptimizer)] == [1.0]
    with pytest.raises(ValueError, match=r"cautious.max_scale must be in \[1.0, inf\)"):
        boost.wrap(keras.optimizers.AdamW(), "O0", {**config, "cautious": {"max_scale": 0.5}})


def test_switch_puts_it_innermost():
    config = {"boost": {"mode": "manual", "cautious": True}, "less_bn": {"gc_flag": True}}
    user = keras.optimizers.AdamW(1e-3)
    chain = optimizer_chain(boost.wrap(user, "O1", config))
    names = [type(o).__name__ for o in chain]
    assert names[-3:] == ["GradientCentralization", "CautiousOptimizer", "AdamW"]
    assert chain[-1] is user
    with pytest.raises(ValueError, match="already contains a CautiousOptimizer"):
        boost.wrap(boost.CautiousOptimizer(keras.optimizers.AdamW()), "O0", {"boost": {"mode": "manual",
                                                                                       "cautious": True}})


def test_boost_model_with_the_switch_trains_and_says_so():
    x, y = data()
    model = boost.BoostModel.from_model(small_model(), boost_level="O0",
                                        boost_config_dict={"boost": {"mode": "manual", "cautious": True}})
    model.compile(optimizer=keras.optimizers.AdamW(3e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(x, y, batch_size=16, epochs=2, verbose=0)
    from keras_boost.optimizers import find_in_chain
    cautious = find_in_chain(model.optimizer, boost.CautiousOptimizer)
    assert cautious is not None and 0.0 < cautious.masked_fraction < 1.0
    assert "cautious masking:" in model.boost_summary()


# --- under tf.distribute ----------------------------------------------------------


@requires_tensorflow
@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="a tf.distribute test: the tensorflow lane")
@pytest.mark.slow
def test_mirrored_masks_with_the_summed_gradient(tmp_path):
    # Keras' TF optimizers sum the replicas' gradients inside `apply`; a mask
    # built from each replica's own gradient drove the replicas apart (0.2).
    script = os.path.join(os.path.dirname(__file__), "distributed", "mirrored_cautious.py")
    env = {**os.environ, "KERAS_BACKEND": "tensorflow", "TF_CPP_MIN_LOG_LEVEL": "2",
           "CUDA_VISIBLE_DEVICES": "", "PYTHONWARNINGS": "ignore"}
    env.pop("TF_CONFIG", None)
    # The checked-out package, as in this process (pytest's `pythonpath`).
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    proc = subprocess.run([sys.executable, script, str(tmp_path)], env=env, capture_output=True, timeout=300)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-4000:]
    arrays = dict(np.load(tmp_path / "cautious.npz"))
    for mode in ("plain", "boost"):
        np.testing.assert_allclose(arrays[f"{mode}_distributed"], arrays[f"{mode}_single"], rtol=1e-5, atol=1e-6)
        assert not np.allclose(arrays[f"{mode}_init"], arrays[f"{mode}_distributed"])
        assert float(arrays[f"{mode}_spread"]) == 0.0, f"{mode}: replicas out of sync"
        assert 0.0 < float(arrays[f"{mode}_masked_fraction"]) < 1.0
