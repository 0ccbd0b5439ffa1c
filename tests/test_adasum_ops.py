"""The AdaSum rule and its tree against a NumPy reference (Maleki et al. 2021)."""

import keras
import numpy as np
import pytest

import keras_boost as boost
from keras_boost.algorithms.adasum import group_mean

from adasum_reference import np_adasum
from adasum_reference import np_tree


def np_(x):
    return np.asarray(keras.ops.convert_to_numpy(x))


def test_orthogonal_vectors_add():
    a, b = np.array([3.0, 0.0, 0.0], "float32"), np.array([0.0, -2.0, 1.0], "float32")
    np.testing.assert_allclose(np_(boost.ops.adasum(a, b)), a + b)


def test_identical_vectors_give_the_same_vector():
    a = np.array([1.0, -2.0, 0.5], "float32")
    np.testing.assert_allclose(np_(boost.ops.adasum(a, a)), a, rtol=1e-6)


def test_opposite_vectors_cancel():
    a = np.array([1.0, -2.0, 0.5], "float32")
    np.testing.assert_allclose(np_(boost.ops.adasum(a, -a)), np.zeros(3), atol=1e-6)


def test_zero_vector_contributes_nothing():
    a = np.array([1.0, -2.0, 0.5], "float32")
    zero = np.zeros(3, "float32")
    np.testing.assert_array_equal(np_(boost.ops.adasum(a, zero)), a)
    np.testing.assert_array_equal(np_(boost.ops.adasum(zero, a)), a)
    np.testing.assert_array_equal(np_(boost.ops.adasum(zero, zero)), zero)


def test_dot_products_run_over_the_whole_tensor():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(2, 4, 3)).astype("float32")
    got = np_(boost.ops.adasum(a, b))
    np.testing.assert_allclose(got, np_adasum(a, b), rtol=1e-5, atol=1e-6)
    # Per-row coefficients would differ: the reference is not row-separable.
    rows = np.stack([np_adasum(a[i], b[i]) for i in range(4)])
    assert not np.allclose(got, rows, atol=1e-3)


def test_general_pair_matches_reference_and_is_symmetric():
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(2, 50)).astype("float32")
    np.testing.assert_allclose(np_(boost.ops.adasum(a, b)), np_adasum(a, b), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np_(boost.ops.adasum(a, b)), np_(boost.ops.adasum(b, a)), rtol=1e-6)


def test_scaling_commutes():
    # AdaSum(c a, c b) = c AdaSum(a, b): why replicas' 1/N pre-scaling must be undone.
    rng = np.random.default_rng(2)
    a, b = rng.normal(size=(2, 20)).astype("float32")
    np.testing.assert_allclose(
        np_(boost.ops.adasum(4 * a, 4 * b)), 4 * np_(boost.ops.adasum(a, b)), rtol=1e-5
    )


def test_half_precision_is_computed_in_float32():
    # |a|^2 of these overflows float16 (> 65504); computed in float32 it does not.
    a = np.full(64, 40.0, "float16")
    b = np.zeros(64, "float16")
    b[0] = 40.0
    got = boost.ops.adasum(a, b)
    assert keras.backend.standardize_dtype(got.dtype) == "float16"
    np.testing.assert_allclose(np_(got).astype("float64"), np_adasum(a, b), rtol=2e-3)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 8])
def test_tree_matches_reference(n):
    rng = np.random.default_rng(n)
    tensors = list(rng.normal(size=(n, 3, 4)).astype("float32"))
    expected = np_tree(tensors)
    np.testing.assert_allclose(np_(boost.ops.adasum_reduce(tensors)), expected, rtol=1e-4, atol=1e-5)
    stacked = boost.ops.adasum_tree(np.stack(tensors))
    np.testing.assert_allclose(np_(stacked), expected, rtol=1e-4, atol=1e-5)


def test_tree_shape_is_the_documented_one():
    # For 3 inputs: (g0 + g1) then with g2 -- not g0 with (g1 + g2).
    rng = np.random.default_rng(3)
    g = list(rng.normal(size=(3, 6)).astype("float32"))
    got = np_(boost.ops.adasum_reduce(g))
    np.testing.assert_allclose(got, np_adasum(np_adasum(g[0], g[1]), g[2]), rtol=1e-5, atol=1e-6)
    assert not np.allclose(got, np_adasum(g[0], np_adasum(g[1], g[2])), atol=1e-4)


def test_tree_of_orthogonal_inputs_is_their_sum_and_of_identical_ones_is_one():
    eye = np.eye(8, dtype="float32")
    np.testing.assert_allclose(np_(boost.ops.adasum_tree(eye)), np.ones(8), rtol=1e-6)
    same = np.tile(np.arange(1.0, 5.0, dtype="float32"), (8, 1))
    np.testing.assert_allclose(np_(boost.ops.adasum_tree(same)), same[0], rtol=1e-6)


# --- norm_bound: no pairwise result longer than its longer input ------------------


@pytest.mark.parametrize("n", [2, 3, 4, 8])
def test_bounded_tree_matches_reference(n):
    rng = np.random.default_rng(10 + n)
    # Noise-dominated inputs sharing a common part: nearly orthogonal, the bound acts.
    tensors = list((rng.normal(size=(n, 3, 4)) + 0.3 * rng.normal(size=(3, 4))).astype("float32"))
    expected = np_tree(tensors, norm_bound=True)
    assert not np.allclose(expected, np_tree(tensors), atol=1e-3)  # the bound acted
    np.testing.assert_allclose(
        np_(boost.ops.adasum_reduce(tensors, norm_bound=True)), expected, rtol=1e-4, atol=1e-5
    )
    np.testing.assert_allclose(
        np_(boost.ops.adasum_tree(np.stack(tensors), norm_bound=True)), expected, rtol=1e-4, atol=1e-5
    )


def test_bound_caps_orthogonal_inputs_at_the_longest_one():
    # Unbounded, 8 orthogonal unit vectors give their sum (norm sqrt(8), 8x the
    # mean's norm); bounded, the same direction at the norm of one of them.
    eye = np.eye(8, dtype="float32")
    np.testing.assert_allclose(
        np_(boost.ops.adasum_tree(eye, norm_bound=True)), np.full(8, 8**-0.5), rtol=1e-6
    )
    np.testing.assert_allclose(
        np_(boost.ops.adasum(np.array([3.0, 0.0]), np.array([0.0, 4.0]), norm_bound=True)), [2.4, 3.2], rtol=1e-6
    )


def test_bound_leaves_identical_and_zero_inputs_exact():
    same = np.tile(np.array([0.1, -2.3, 7.0, 1e-3], "float32"), (8, 1))
    np.testing.assert_array_equal(np_(boost.ops.adasum_tree(same, norm_bound=True)), same[0])
    a, zero = same[0], np.zeros(4, "float32")
    np.testing.assert_array_equal(np_(boost.ops.adasum(a, zero, norm_bound=True)), a)
    np.testing.assert_array_equal(np_(boost.ops.adasum(zero, zero, norm_bound=True)), zero)


def test_bound_commutes_with_scaling():
    # Keeps the undoing of Keras' 1 / replicas pre-scaling valid.
    rng = np.random.default_rng(4)
    a, b = rng.normal(size=(2, 20)).astype("float32")
    np.testing.assert_allclose(
        np_(boost.ops.adasum(4 * a, 4 * b, norm_bound=True)),
        4 * np_(boost.ops.adasum(a, b, norm_bound=True)),
        rtol=1e-5,
    )


def test_group_mean():
    x = np.arange(12.0, dtype="float32").reshape(6, 2)
    np.testing.assert_allclose(np_(group_mean(x, 3)), [x[:3].mean(0), x[3:].mean(0)])
    with pytest.raises(ValueError, match="does not divide"):
        group_mean(x, 4)


def test_bad_input():
    with pytest.raises(ValueError, match="same shape"):
        boost.ops.adasum(np.ones(3), np.ones(4))
    with pytest.raises(ValueError, match="at least one tensor"):
        boost.ops.adasum_reduce([])
    with pytest.raises(ValueError, match="one shape"):
        boost.ops.adasum_reduce([np.ones(3), np.ones(4)])


# --- the halving/doubling exchange ----------------------------------------------


@pytest.mark.parametrize("norm_bound", [False, True])
@pytest.mark.parametrize("n", [1, 2, 4, 8])
def test_halving_doubling_equals_the_tree_per_tensor(n, norm_bound):
    from keras_boost.algorithms.adasum import simulate_halving_doubling

    # Three tensors of 3, 5 and 8 values, padded to a multiple of n; one
    # replica's gradient is zero (it must contribute nothing).
    rng = np.random.default_rng(n)
    sizes = [3, 5, 8]
    total = sum(sizes)
    pad = (-total) % n
    ids = np.repeat(np.arange(len(sizes) + 1), sizes + [pad]).astype("int32")
    stacked = rng.normal(size=(n, total + pad)).astype("float32")
    stacked[:, total:] = 0.0
    if n > 1:
        stacked[n - 1] = 0.0
    got = np_(simulate_halving_doubling(keras.ops.convert_to_tensor(stacked), ids, len(sizes) + 1, norm_bound))
    want = np.concatenate(
        [np_tree(list(stacked[:, ids == i].astype("float64")), norm_bound) for i in range(len(sizes))]
    )
    np.testing.assert_allclose(got[:total], want, rtol=1e-5, atol=1e-6)


def test_halving_doubling_pieces():
    from keras_boost.algorithms.adasum import bit_reversed
    from keras_boost.algorithms.adasum import halving_levels

    assert [halving_levels(n) for n in (1, 2, 4, 8, 16)] == [0, 1, 2, 3, 4]
    assert [bit_reversed(r, 3) for r in range(8)] == [0, 4, 2, 6, 1, 5, 3, 7]
    for bad in (0, 3, 6, True, 2.0):
        with pytest.raises(ValueError, match="power-of-two replica count"):
            halving_levels(bad)
