"""boost.layers.NormalizedDense against the NumPy formula of MindSpore's FN head."""

import os
import re
import tempfile

import keras
import numpy as np
import pytest

import keras_boost as boost
from keras_boost.layers import NormalizedDense
from keras_boost.algorithms.less_bn import adacos_scale
from keras_boost.algorithms.less_bn import matched_scale


def numpy_fn(x, w, s, eps=1e-4):
    """MindSpore CommonHeadLastFN, with Keras' (in, out) kernel."""
    x = np.asarray(x, np.float64)
    w = np.asarray(w, np.float64)
    xn = x / np.sqrt(np.maximum((x**2).sum(-1, keepdims=True), eps))
    wn = w / np.sqrt(np.maximum((w**2).sum(0, keepdims=True), eps))
    return s * xn @ wn


def test_matches_numpy_including_clamped_norms():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(6, 12)).astype("float32")
    x[0] = 0.0  # zero row: clamped norm, output 0
    x[1] *= 1e-4  # tiny row: clamped at sqrt(1e-4)
    layer = NormalizedDense(5)
    layer.build((None, 12))
    w = rng.normal(size=(12, 5)).astype("float32")
    w[:, 2] *= 1e-4  # tiny column: clamped
    layer.kernel.assign(w)
    layer.scale.assign(2.5)
    got = keras.ops.convert_to_numpy(layer(x))
    np.testing.assert_allclose(got, numpy_fn(x, w, 2.5), rtol=1e-5, atol=1e-6)
    assert np.all(got[0] == 0.0)


def test_weights_scale_init_one_no_bias_and_gradients_finite_at_zero_input():
    layer = NormalizedDense(3)
    layer(np.ones((2, 4), "float32"))
    assert [w.path.split("/")[-1] for w in layer.trainable_weights] == ["kernel", "scale"]
    assert float(keras.ops.convert_to_numpy(layer.scale)) == 1.0
    model = keras.Sequential([keras.Input((4,)), layer])
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    model.fit(np.zeros((4, 4), "float32"), np.ones((4, 3), "float32"), verbose=0)
    assert all(np.isfinite(w).all() for w in model.get_weights())


def test_higher_rank_input_and_activation():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(2, 3, 8)).astype("float32")
    layer = NormalizedDense(4, activation="softmax")
    y = keras.ops.convert_to_numpy(layer(x))
    w = keras.ops.convert_to_numpy(layer.kernel)
    logits = numpy_fn(x, w, 1.0)
    ref = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-6)
    assert layer.compute_output_shape((None, 3, 8)) == (None, 3, 4)


def test_from_dense_copies_kernel_and_drops_bias():
    dense = keras.layers.Dense(4, activation="relu", name="head")
    dense.build((None, 6))
    dense.bias.assign(np.full(4, 3.0, "float32"))
    head = NormalizedDense.from_dense(dense)
    assert head.name == "head" and head.units == 4
    np.testing.assert_array_equal(
        keras.ops.convert_to_numpy(head.kernel), keras.ops.convert_to_numpy(dense.kernel)
    )
    assert keras.activations.serialize(head.activation) == "relu"
    with pytest.raises(TypeError, match="keras.layers.Dense"):
        NormalizedDense.from_dense(keras.layers.Flatten())
    with pytest.raises(ValueError, match="not built"):
        NormalizedDense.from_dense(keras.layers.Dense(2))


@pytest.mark.parametrize("units", [0, -1, 2.5, "3", True])
def test_bad_units(units):
    with pytest.raises(ValueError, match="units must be a positive int"):
        NormalizedDense(units)


def test_bad_epsilon():
    with pytest.raises(ValueError, match="epsilon must be a positive number"):
        NormalizedDense(2, epsilon=0)


def test_config_round_trip_and_model_save_load():
    layer = NormalizedDense(3, activation="softmax", epsilon=1e-3, initial_scale=4.5, name="fn")
    clone = NormalizedDense.from_config(layer.get_config())
    assert (clone.units, clone.epsilon, clone.name, clone.initial_scale) == (3, 1e-3, "fn", 4.5)
    clone.build((None, 5))
    assert float(keras.ops.convert_to_numpy(clone.scale)) == 4.5
    inputs = keras.Input((5,))
    model = keras.Model(inputs, layer(inputs))
    layer.scale.assign(1.7)
    x = np.random.default_rng(0).normal(size=(2, 5)).astype("float32")
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "fn.keras")
        model.save(path)
        loaded = keras.saving.load_model(path)  # registered: no custom_objects
    assert isinstance(loaded.layers[-1], NormalizedDense)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(loaded(x)), keras.ops.convert_to_numpy(model(x)), rtol=1e-6
    )


def test_kernel_regularizer_and_constraint_act_and_survive_save_load():
    layer = NormalizedDense(3, kernel_regularizer=keras.regularizers.L2(0.5),
                            kernel_constraint=keras.constraints.NonNeg(), name="fn")
    inputs = keras.Input((4,))
    model = keras.Model(inputs, layer(inputs))
    kernel = keras.ops.convert_to_numpy(layer.kernel).astype(np.float64)
    assert float(keras.ops.convert_to_numpy(model.losses[0])) == pytest.approx(0.5 * np.sum(kernel**2), rel=1e-5)
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    model.fit(np.ones((4, 4), "float32"), np.full((4, 3), -1.0, "float32"), epochs=2, verbose=0)
    assert keras.ops.convert_to_numpy(layer.kernel).min() >= 0  # the constraint ran
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "fn.keras")
        model.save(path)
        loaded = keras.saving.load_model(path).get_layer("fn")
    assert loaded.kernel_regularizer.get_config() == {"l2": pytest.approx(0.5)}
    assert isinstance(loaded.kernel_constraint, keras.constraints.NonNeg)


def test_from_dense_keeps_regularizers_constraint_dtype_and_trainable():
    dense = keras.layers.Dense(4, kernel_regularizer="l2", bias_regularizer="l1",
                               kernel_constraint="non_neg", activity_regularizer="l1",
                               dtype="mixed_bfloat16")
    dense.build((None, 6))
    head = NormalizedDense.from_dense(dense)
    assert head.kernel_regularizer is dense.kernel_regularizer
    assert head.kernel_constraint is dense.kernel_constraint
    assert head.activity_regularizer is dense.activity_regularizer
    assert head.dtype_policy.name == "mixed_bfloat16" and head.trainable is True
    assert len(head.losses) == 1  # the kernel's; the bias and its L1 are gone
    dense.trainable = False
    assert NormalizedDense.from_dense(dense).trainable is False


def test_exact_under_mixed_float16(restore_policy):
    keras.config.set_dtype_policy("mixed_float16")
    rng = np.random.default_rng(2)
    # Squares of 400 overflow float16 (max 65504): a float16 norm would be inf.
    x = (rng.normal(size=(4, 16)) * 400).astype("float32")
    layer = NormalizedDense(3)
    y = layer(x)
    assert layer.kernel.dtype == "float32" and layer.scale.dtype == "float32"
    assert keras.backend.standardize_dtype(y.dtype) == "float16"
    ref = numpy_fn(x.astype("float16").astype("float32"), keras.ops.convert_to_numpy(layer.kernel), 1.0)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(y).astype("float32"), ref, atol=2e-3)
    assert np.isfinite(keras.ops.convert_to_numpy(y)).all()


def test_gc_leaves_the_head_alone():
    layer = NormalizedDense(16)
    layer.build((None, 32))
    assert not boost.optimizers.should_centralize(layer.kernel)


# --- initial scale ------------------------------------------------------------------


def test_initial_scale_sets_the_trainable_scale_and_bounds_the_logits():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(64, 12)).astype("float32")
    layer = NormalizedDense(5, initial_scale=7.5)
    y = keras.ops.convert_to_numpy(layer(x))
    assert float(keras.ops.convert_to_numpy(layer.scale)) == 7.5
    assert any(w is layer.scale for w in layer.trainable_weights)
    np.testing.assert_allclose(y, numpy_fn(x, keras.ops.convert_to_numpy(layer.kernel), 7.5),
                               rtol=1e-5, atol=1e-5)
    assert np.abs(y).max() <= 7.5 * (1 + 1e-6)
    # The scale stays trainable: one SGD step moves it.
    model = keras.Sequential([keras.Input((12,)), layer])
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    model.fit(x, rng.normal(size=(64, 5)).astype("float32"), batch_size=64, verbose=0)
    assert float(keras.ops.convert_to_numpy(layer.scale)) != 7.5


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf"), "2", True, None])
def test_bad_initial_scale_names_the_value(bad):
    with pytest.raises(ValueError, match=re.escape(f"initial_scale must be a finite number > 0, "
                                                   f"got {bad!r}.")):
        NormalizedDense(2, initial_scale=bad)


def test_from_dense_takes_an_initial_scale():
    dense = keras.layers.Dense(4)
    dense.build((None, 6))
    assert float(keras.ops.convert_to_numpy(NormalizedDense.from_dense(dense).scale)) == 1.0
    head = NormalizedDense.from_dense(dense, initial_scale=3.0)
    assert head.initial_scale == 3.0
    assert float(keras.ops.convert_to_numpy(head.scale)) == 3.0
    with pytest.raises(ValueError, match="initial_scale must be a finite number > 0, got -3"):
        NormalizedDense.from_dense(dense, initial_scale=-3)


def numpy_matched_scale(w):
    """sqrt(d * mean_j ||w_j||^2), written independently of the layer code."""
    w = np.asarray(w, np.float64)
    d, units = w.shape
    return np.sqrt(d * sum(np.dot(w[:, j], w[:, j]) for j in range(units)) / units)


@pytest.mark.parametrize("d, units", [(64, 10), (32, 10), (256, 10), (128, 2)])
def test_matched_scale_gives_the_dense_logit_spread_on_random_inputs(d, units):
    dense = keras.layers.Dense(units, kernel_initializer=keras.initializers.GlorotUniform(seed=d))
    dense.build((None, d))
    kernel = keras.ops.convert_to_numpy(dense.kernel)
    s = matched_scale(dense.kernel)
    np.testing.assert_allclose(s, numpy_matched_scale(kernel), rtol=1e-6)
    # Glorot uniform: E ||w_j||^2 = 2 d / (d + units), so s is about d sqrt(2 / (d + units)).
    np.testing.assert_allclose(s, d * np.sqrt(2 / (d + units)), rtol=0.1)
    head = NormalizedDense.from_dense(dense, initial_scale=s)
    x = np.random.default_rng(0).normal(size=(8000, d)).astype("float32")
    y = keras.ops.convert_to_numpy(head(x))
    reference = x.astype(np.float64) @ kernel  # the Dense's logits (zero bias)
    # The promise: |logit| <= s, std equal to the Dense's (and to s / sqrt(d)).
    assert np.abs(y).max() <= s * (1 + 1e-6)
    np.testing.assert_allclose(y.std(), reference.std(), rtol=0.03)
    np.testing.assert_allclose(y.std(), s / np.sqrt(d), rtol=0.03)


def test_matched_scale_fallback_and_bad_kernels():
    assert matched_scale(np.zeros((8, 3), "float32")) == 1.0
    assert matched_scale(np.zeros((8, 3), "float32"), fallback=2.0) == 2.0
    bad_shape = re.escape("kernel must have shape (in, units), got shape (8,)")
    with pytest.raises(ValueError, match=bad_shape):
        matched_scale(np.ones(8))
    with pytest.raises(ValueError, match="fallback must be a finite number > 0, got 0"):
        matched_scale(np.zeros((8, 3)), fallback=0)


def test_adacos_scale():
    np.testing.assert_allclose(adacos_scale(10), np.sqrt(2) * np.log(9))
    np.testing.assert_allclose(adacos_scale(1000), np.sqrt(2) * np.log(999))
    assert adacos_scale(2) == adacos_scale(3) == 1.0  # sqrt(2) log(C - 1) < 1: floored
    with pytest.raises(ValueError, match="num_classes must be an int >= 2, got 1"):
        adacos_scale(1)
