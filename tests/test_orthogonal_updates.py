"""Orthogonalized (Muon-style) updates: the math against NumPy, the routing,
fit on every backend, save/load and exact resume, the config switch."""

import os
import tempfile
import warnings

import keras
import numpy as np
import pytest

import keras_boost as boost
from keras_boost.algorithms.orthogonal_updates import NS_COEFFICIENTS
from keras_boost.algorithms.orthogonal_updates import einsum_split
from keras_boost.algorithms.orthogonal_updates import orthogonalize
from keras_boost.optimizers import OrthogonalUpdates

L = keras.layers
BACKEND = keras.backend.backend()


# --- NumPy reference -----------------------------------------------------------


def numpy_newton_schulz(g, steps=5):
    a, b, c = NS_COEFFICIENTS
    x = np.asarray(g, np.float64)
    transposed = x.shape[0] > x.shape[1]
    if transposed:
        x = x.T
    x = x / (np.linalg.norm(x) + 1e-7)
    for _ in range(steps):
        s = x @ x.T
        x = a * x + (b * s + c * s @ s) @ x
    return x.T if transposed else x


class NumpyOrthogonal:
    """The wrapper's rule for one kernel, in NumPy (float64)."""

    def __init__(self, value, split, momentum=0.95, nesterov=True, rule="adam", sgd_momentum=0.0):
        self.w = np.asarray(value, np.float64)
        self.b = np.zeros_like(self.w)
        self.split, self.momentum, self.nesterov, self.rule = split, momentum, nesterov, rule
        self.sgd_momentum = sgd_momentum

    def step(self, g, lr, wd):
        g = np.asarray(g, np.float64)
        self.b = self.momentum * self.b + g
        d = g + self.momentum * self.b if self.nesterov else self.b
        rows = int(np.prod(self.w.shape[:self.split]))
        m = d.reshape(rows, -1)
        o = numpy_newton_schulz(m)
        if self.rule == "adam":
            o = o * 0.2 * np.sqrt(max(m.shape))
        else:
            o = o * np.linalg.norm(m) / np.linalg.norm(o) * (1 - self.momentum) / (1 - self.sgd_momentum)
        self.w = self.w - lr * wd * self.w - lr * o.reshape(self.w.shape)
        return self.w


def attention_model(seed=0, vocab=40, length=6, width=16):
    """Embedding, MultiHeadAttention, LayerNorm, a Dense FFN and an output Dense."""
    keras.utils.set_random_seed(seed)
    tokens = keras.Input((length,), dtype="int32")
    x = L.Embedding(vocab, width, name="embed")(tokens)
    x = L.LayerNormalization(name="ln")(x + L.MultiHeadAttention(2, 8, name="mha")(x, x))
    x = L.Dense(32, activation="relu", name="ffn_in")(x)
    x = L.Dense(width, name="ffn_out")(x)
    x = L.GlobalAveragePooling1D()(x)
    outputs = L.Dense(5, name="head")(x)
    return keras.Model(tokens, outputs)


def token_data(n=32, vocab=40, length=6, seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(0, vocab, (n, length)).astype("int32"), rng.integers(0, 5, (n,)).astype("int32")


ROUTED = {
    "mha/query/kernel": 1, "mha/key/kernel": 1, "mha/value/kernel": 1,
    "mha/attention_output/kernel": 2, "ffn_in/kernel": 1, "ffn_out/kernel": 1,
}


# --- math ------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(16, 48), (48, 16), (20, 20)])
def test_orthogonalize_is_keras_muon_and_numpy(shape):
    g = np.random.default_rng(1).normal(size=shape).astype("float32")
    got = keras.ops.convert_to_numpy(orthogonalize(g))
    np.testing.assert_allclose(got, numpy_newton_schulz(g), rtol=1e-4, atol=2e-5)
    muon = keras.optimizers.Muon()
    np.testing.assert_allclose(got, keras.ops.convert_to_numpy(muon.zeropower_via_newtonschulz5(g, 5)),
                               rtol=1e-6, atol=1e-6)
    singular = np.linalg.svd(got, compute_uv=False)
    assert 0.5 < singular.min() and singular.max() < 1.5


def test_einsum_split():
    assert einsum_split("abc,cde->abde") == 1   # MHA query/key/value
    assert einsum_split("abcd,cde->abe") == 2   # MHA output
    assert einsum_split("ab,bc->ac") == 1
    assert einsum_split("ab,cb->ac") == 0       # fan-out axis first
    assert einsum_split("...b,bc->...c") == 1


# --- the wrapper against NumPy --------------------------------------------------


@pytest.mark.parametrize("path", ["apply", "stateless"])
def test_steps_match_numpy_adamw(path):
    model = attention_model()
    variables = model.trainable_variables
    schedule = keras.optimizers.schedules.ExponentialDecay(0.02, decay_steps=1, decay_rate=0.5)
    opt = OrthogonalUpdates(keras.optimizers.AdamW(schedule, weight_decay=0.1), model=model)
    twin = keras.optimizers.AdamW(schedule, weight_decay=0.1)
    opt.build(variables)
    routes = dict(zip([v.path for v in variables], opt.routes))
    assert {p: r for p, r in routes.items() if r} == ROUTED
    rest = [v for v in variables if not routes[v.path]]
    rest_copies = [keras.Variable(v.numpy() if hasattr(v, "numpy") else keras.ops.convert_to_numpy(v))
                   for v in rest]
    twin.build(rest_copies)
    refs = {v.path: NumpyOrthogonal(keras.ops.convert_to_numpy(v), routes[v.path])
            for v in variables if routes[v.path]}
    rng = np.random.default_rng(2)
    for step in range(3):
        grads = [rng.normal(size=v.shape).astype("float32") for v in variables]
        if path == "apply":
            opt.apply(grads, variables)
        else:
            new_vars, new_opt = opt.stateless_apply(
                [v.value for v in opt.variables], grads, [v.value for v in variables])
            for v, value in zip(variables, new_vars):
                v.assign(value)
            for v, value in zip(opt.variables, new_opt):
                v.assign(value)
        # Tensors: Keras' torch optimizers take no NumPy gradients.
        twin.apply([keras.ops.convert_to_tensor(g) for g, v in zip(grads, variables) if not routes[v.path]],
                   rest_copies)
        lr = 0.02 * 0.5 ** step
        for v, g in zip(variables, grads):
            if routes[v.path]:
                expected = refs[v.path].step(g, lr, 0.1)
                np.testing.assert_allclose(keras.ops.convert_to_numpy(v), expected, rtol=1e-4, atol=1e-5,
                                           err_msg=f"{v.path} step {step}")
        for v, copy in zip(rest, rest_copies):
            np.testing.assert_allclose(keras.ops.convert_to_numpy(v), keras.ops.convert_to_numpy(copy),
                                       rtol=1e-5, atol=1e-6, err_msg=v.path)
    assert int(keras.ops.convert_to_numpy(opt.iterations)) == 3


def test_sgd_norm_rule_matches_numpy():
    model = attention_model()
    variables = model.trainable_variables
    opt = OrthogonalUpdates(keras.optimizers.SGD(0.05, momentum=0.9), model=model, nesterov=False)
    opt.build(variables)
    kernel = model.get_layer("ffn_in").kernel
    ref = NumpyOrthogonal(keras.ops.convert_to_numpy(kernel), 1, nesterov=False, rule="norm",
                          sgd_momentum=0.9)
    rng = np.random.default_rng(3)
    for _ in range(3):
        grads = [rng.normal(size=v.shape).astype("float32") for v in variables]
        opt.apply(grads, variables)
        expected = ref.step(grads[[v.path for v in variables].index(kernel.path)], 0.05, 0.0)
        np.testing.assert_allclose(keras.ops.convert_to_numpy(kernel), expected, rtol=1e-4, atol=1e-5)


# --- routing ---------------------------------------------------------------------


def test_routing_on_a_transformer():
    model = attention_model()
    opt = OrthogonalUpdates(keras.optimizers.Adam(), model=model)
    opt.build(model.trainable_variables)
    routed = dict(zip(opt.routed_paths(), [r for r in opt.routes if r]))
    assert routed == ROUTED
    # Embedding, biases (2-D in attention), LayerNorm and the head keep Adam.
    left = {v.path for v, r in zip(model.trainable_variables, opt.routes) if not r}
    assert {"embed/embeddings", "mha/query/bias", "ln/gamma", "head/kernel", "head/bias"} <= left
    assert "orthogonalized updates of 6 of" in opt.summary()


def test_routing_without_model_and_exclude():
    model = attention_model()
    opt = OrthogonalUpdates(keras.optimizers.Adam(), exclude="ffn_out")
    opt.build(model.trainable_variables)   # names only: same result, ffn_out excluded
    assert set(opt.routed_paths()) == set(ROUTED) - {"ffn_out/kernel"}
    conv = keras.Sequential([keras.Input((8, 8, 3)), L.Conv2D(4, 3), L.Conv2D(4, 3), L.Flatten(), L.Dense(2)])
    plain = OrthogonalUpdates(keras.optimizers.Adam(), model=conv)
    with pytest.warns(boost.NoEffectWarning, match="no variable is routed"):
        plain.build(conv.trainable_variables)
    with_conv = OrthogonalUpdates(keras.optimizers.Adam(), model=conv, conv_kernels=True)
    with_conv.build(conv.trainable_variables)
    assert [r for r in with_conv.routes if r] == [3, 3]


# --- fit, save, resume -------------------------------------------------------------


def compiled(model, **kwargs):
    opt = OrthogonalUpdates(keras.optimizers.AdamW(3e-3, weight_decay=0.01), **kwargs)
    model.compile(optimizer=opt, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return opt


def test_fit_learns_and_routes_from_the_compiled_model():
    x, y = token_data(64)
    model = attention_model()
    opt = compiled(model)
    history = model.fit(x, y, batch_size=16, epochs=6, verbose=0).history["loss"]
    assert history[-1] < history[0]
    assert set(opt.routed_paths()) == set(ROUTED)


def test_save_load_resume_is_exact():
    x, y = token_data(32)
    model = attention_model()
    compiled(model)
    model.fit(x[:16], y[:16], batch_size=8, epochs=1, verbose=0, shuffle=False)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "m.keras")
        model.save(path)
        loaded = keras.saving.load_model(path)
    assert isinstance(loaded.optimizer, OrthogonalUpdates)
    assert loaded.optimizer.routes == model.optimizer.routes
    for a, b in zip(model.optimizer.variables, loaded.optimizer.variables):
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(a), keras.ops.convert_to_numpy(b))
    model.fit(x[16:], y[16:], batch_size=8, epochs=1, verbose=0, shuffle=False)
    loaded.fit(x[16:], y[16:], batch_size=8, epochs=1, verbose=0, shuffle=False)
    for a, b in zip(model.weights, loaded.weights):
        np.testing.assert_allclose(keras.ops.convert_to_numpy(a), keras.ops.convert_to_numpy(b),
                                   rtol=1e-6, atol=1e-6)


def test_config_round_trip():
    opt = OrthogonalUpdates(keras.optimizers.SGD(0.1, momentum=0.9), momentum=0.9, nesterov=False,
                            rms_rule="norm", exclude=["head"], conv_kernels=True)
    again = OrthogonalUpdates.from_config(opt.get_config())
    assert again.get_config() == opt.get_config()
    assert again.inner_optimizer.momentum == 0.9 and again.momentum == 0.9
    with pytest.raises(ValueError, match="rms_rule"):
        OrthogonalUpdates(keras.optimizers.SGD(), rms_rule="sgd")


# --- the config switch --------------------------------------------------------------


def test_config_switch_is_off_by_default_and_in_the_chain_when_on():
    for level in ("O0", "O1", "O2"):
        assert boost.config.resolve_config(level)["boost"]["orthogonal_updates"] is False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        opt = boost.wrap(keras.optimizers.AdamW(1e-3), "O0",
                         {"boost": {"mode": "manual", "orthogonal_updates": True},
                          "orthogonal_updates": {"ns_steps": 4}})
    inner = boost.optimizers.find_in_chain(opt, OrthogonalUpdates)
    assert inner is not None and inner.ns_steps == 4
    # Through a BoostModel: the chain routes from the model, and fit's summary says so.
    x, y = token_data(16)
    model = boost.BoostModel.from_model(attention_model(), boost_level="O0", boost_config_dict={
        "boost": {"mode": "manual", "orthogonal_updates": True}})
    model.compile(optimizer=keras.optimizers.AdamW(1e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(x, y, batch_size=8, epochs=1, verbose=0)
    inner = boost.optimizers.find_in_chain(model.optimizer, OrthogonalUpdates)
    assert set(inner.routed_paths()) == set(ROUTED)
    assert "orthogonalized updates of 6 of" in model.boost_summary()
