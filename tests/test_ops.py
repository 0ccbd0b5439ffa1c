"""Pure math in keras_boost.ops against NumPy references."""

import keras
import numpy as np
import pytest

from keras_boost import ops as kb_ops


def numpy_loss_scale(scale, good, finite, factor, window, floor):
    """Reference: DynamicLossScaleUpdateCell semantics, with a floor."""
    if not finite:
        return max(scale / factor, floor), 0
    good += 1
    if good >= window:
        return scale * factor, 0
    return scale, good


def test_update_loss_scale_matches_numpy_reference_over_a_random_sequence():
    rng = np.random.default_rng(0)
    finite_seq = rng.random(200) > 0.15
    ref, got = (1024.0, 0), (1024.0, 0)
    for finite in finite_seq:
        ref = numpy_loss_scale(*ref, bool(finite), 2.0, 3, 1.0)
        scale, good = kb_ops.update_loss_scale(got[0], got[1], bool(finite), 2.0, 3, 1.0)
        got = (float(scale), int(good))
        assert got == ref


@pytest.mark.parametrize(
    "grads, expected",
    [
        ([np.ones(3), np.zeros((2, 2))], True),
        ([np.ones(3), np.array([1.0, np.inf])], False),
        ([np.array([np.nan]), None], False),
        ([None], True),
    ],
)
def test_all_finite(grads, expected):
    grads = [None if g is None else keras.ops.convert_to_tensor(g, "float32") for g in grads]
    assert bool(kb_ops.all_finite(grads)) is expected


def test_unscale_divides_in_float32_and_keeps_dtype():
    g16 = keras.ops.convert_to_tensor(np.array([2048.0, 4096.0]), "float16")
    out = kb_ops.unscale([g16, None], 1024.0)
    assert out[1] is None
    assert keras.backend.standardize_dtype(out[0].dtype) == "float16"
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(out[0]), [2.0, 4.0])
