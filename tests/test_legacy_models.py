"""Models saved by keras_boost 0.1.0 (before the algorithms moved into
`keras_boost/algorithms/`) load, predict as they did, and resume training,
on every backend. The files are made by `tests/data/make_legacy_models.py`."""

import pathlib

import keras
import numpy as np
import pytest

import keras_boost as boost
from conftest import to_numpy

LEGACY = pathlib.Path(__file__).parent / "data" / "legacy_0.1.0"
NAMES = ["o1_boost_model", "o0_loss_scale", "wrap_o1_accumulation"]


def data():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(32, 8, 8, 3)).astype("float32")
    y = rng.integers(0, 4, size=(32,)).astype("int32")
    return x, y


@pytest.mark.parametrize("name", NAMES)
def test_a_model_saved_by_the_previous_release_loads_and_resumes(name):
    expected = np.load(LEGACY / f"{name}.npz")
    model = keras.saving.load_model(LEGACY / f"{name}.keras")
    x, y = data()

    assert isinstance(model.optimizer, boost.BoostOptimizer)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(model(x[:4], training=False)), expected["predictions"],
        rtol=1e-5, atol=1e-6,
    )
    iterations = int(keras.ops.convert_to_numpy(model.optimizer.iterations))
    assert iterations == int(expected["iterations"])

    before = to_numpy(model.trainable_variables)
    model.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    accumulation = boost.optimizers.find_in_chain(model.optimizer, boost.GradientAccumulation)
    updates = 4 // (accumulation.max_accumulation_step if accumulation else 1)  # 4 batches
    assert int(keras.ops.convert_to_numpy(model.optimizer.iterations)) == iterations + updates
    after = to_numpy(model.trainable_variables)
    assert any(not np.array_equal(a, b) for a, b in zip(before, after))
    assert all(np.isfinite(a).all() for a in after)


def test_the_legacy_boost_models_keep_their_settings():
    o1 = keras.saving.load_model(LEGACY / "o1_boost_model.keras")
    assert isinstance(o1, boost.BoostModel) and o1.boost_level == "O1"
    assert isinstance(o1.layers[-1], boost.layers.NormalizedDense)
    assert boost.optimizers.find_in_chain(o1.optimizer, boost.FreezeOptimizer) is not None

    scaled = keras.saving.load_model(LEGACY / "o0_loss_scale.keras")
    assert scaled.loss_scale == boost.DynamicLossScale(initial_scale=2.0**10, scale_window=3)

    wrapped = keras.saving.load_model(LEGACY / "wrap_o1_accumulation.keras")
    accumulation = boost.optimizers.find_in_chain(wrapped.optimizer, boost.GradientAccumulation)
    assert accumulation is not None and accumulation.max_accumulation_step == 2
