"""The pruning and fake-quantization math against NumPy."""

import keras
import numpy as np
import pytest
from keras import ops

from keras_boost.algorithms.pruning import sparsity
from keras_boost.algorithms.quantization import abs_max_dequantized
from keras_boost.algorithms.quantization import fake_quantize


def numpy_schedule(t, s_i, s_f, t0, end, power=3):
    progress = np.clip((t - t0) / (end - t0), 0.0, 1.0)
    return s_f + (s_i - s_f) * (1.0 - progress) ** power


@pytest.mark.parametrize("s_i,s_f,t0,end", [(0.0, 0.8, 0, 100), (0.1, 0.5, 20, 70), (0.0, 1.0, 5, 6)])
def test_polynomial_schedule_matches_zhu_gupta(s_i, s_f, t0, end):
    for t in [0, t0, t0 + 1, (t0 + end) // 2, end - 1, end, end + 50]:
        got = float(ops.convert_to_numpy(sparsity.polynomial_sparsity(t, s_i, s_f, t0, end)))
        assert got == pytest.approx(numpy_schedule(t, s_i, s_f, t0, end), abs=1e-6)


@pytest.mark.parametrize("s", [0.0, 0.25, 0.5, 0.8, 0.97, 1.0])
def test_magnitude_mask_prunes_exactly_the_smallest(s):
    rng = np.random.default_rng(0)
    w = rng.normal(size=(7, 9)).astype("float32")
    mask = np.array(ops.convert_to_numpy(sparsity.magnitude_mask(w, s)))
    k = int(round(s * w.size))
    assert int((mask == 0).sum()) == k
    order = np.argsort(np.abs(w).ravel())
    expected = np.ones(w.size, "float32")
    expected[order[:k]] = 0.0
    np.testing.assert_array_equal(mask.ravel(), expected)


def test_mask_keeps_already_pruned_weights_pruned():
    rng = np.random.default_rng(1)
    w = rng.normal(size=(64,)).astype("float32")
    m1 = np.array(ops.convert_to_numpy(sparsity.magnitude_mask(w, 0.3)))
    w2 = w * m1 + rng.normal(size=w.shape).astype("float32") * 0.01 * m1
    m2 = np.array(ops.convert_to_numpy(sparsity.magnitude_mask(w2, 0.6)))
    assert np.all(m2[m1 == 0] == 0)


def test_real_sparsity():
    assert sparsity.real_sparsity(np.array([[0.0, 1.0], [0.0, -2.0]], "float32")) == 0.5


def test_fake_quantize_matches_keras_abs_max_quantize():
    rng = np.random.default_rng(2)
    w = rng.normal(size=(12, 5)).astype("float32")
    q, scale = keras.quantizers.abs_max_quantize(w, axis=0, to_numpy=True)
    expected = np.array(ops.convert_to_numpy(q), "float32") / np.array(ops.convert_to_numpy(scale))
    got = np.array(ops.convert_to_numpy(abs_max_dequantized(w, axis=0)))
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(np.array(ops.convert_to_numpy(fake_quantize(w, axis=0))), expected, rtol=1e-6, atol=1e-7)


def test_fake_quantize_gradient_is_straight_through():
    # d/dw sum(c * fq(w)) = c with the straight-through estimator.
    w = keras.Variable(np.array([[0.3, -1.2], [0.01, 2.0]], "float32"))
    c = np.array([[1.0, 2.0], [3.0, 4.0]], "float32")
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(c * fake_quantize(w.value, axis=0))
        grad = tape.gradient(loss, w.value)
    elif backend == "jax":
        import jax

        grad = jax.grad(lambda v: (c * fake_quantize(v, axis=0)).sum())(w.value)
    else:
        import torch

        v = w.value.detach().clone().requires_grad_(True)
        (torch.tensor(c) * fake_quantize(v, axis=0)).sum().backward()
        grad = v.grad
    np.testing.assert_allclose(np.array(ops.convert_to_numpy(grad)), c)
