"""Save / load / resume with `model.save("m.keras")` + `keras.saving.load_model`."""

import keras
import numpy as np
import pytest

import keras_boost as boost
from conftest import dense_graph
from conftest import regression_data
from conftest import to_numpy


def compiled(model_cls, **kwargs):
    model = model_cls(*dense_graph(), **kwargs)
    schedule = keras.optimizers.schedules.PiecewiseConstantDecay([6], [0.05, 0.01])
    model.compile(optimizer=boost.wrap(keras.optimizers.Adam(schedule), "O0"), loss="mse")
    return model


def fit(model, epochs):
    x, y = regression_data()
    return model.fit(x, y, batch_size=8, epochs=epochs, shuffle=False, verbose=0)


@pytest.mark.parametrize(
    "model_cls, kwargs",
    [
        (keras.Model, {}),
        (boost.BoostModel, {}),
        (boost.BoostModel, {"loss_scale": boost.DynamicLossScale(initial_scale=8.0, scale_window=3)}),
    ],
    ids=["keras.Model+wrap", "BoostModel", "BoostModel+loss_scale"],
)
def test_save_load_resume_is_exact(tmp_path, model_cls, kwargs):
    reference = compiled(model_cls, **kwargs)
    fit(reference, epochs=3)  # crosses the schedule boundary mid-way

    model = compiled(model_cls, **kwargs)
    fit(model, epochs=1)
    path = tmp_path / "m.keras"
    model.save(path)
    restored = keras.saving.load_model(path)  # no custom_objects needed

    assert isinstance(restored, model_cls)
    assert isinstance(restored.optimizer, boost.BoostOptimizer)
    assert restored.optimizer.boost_config == model.optimizer.boost_config
    for a, b in zip(to_numpy(model.weights), to_numpy(restored.weights)):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(to_numpy(model.optimizer.variables), to_numpy(restored.optimizer.variables)):
        np.testing.assert_array_equal(a, b)
    if model_cls is boost.BoostModel:
        assert restored.loss_scale == model.loss_scale
        assert restored.boost_level == "O0"

    fit(restored, epochs=2)
    assert int(restored.optimizer.iterations) == int(reference.optimizer.iterations) == 12
    for a, b in zip(to_numpy(reference.weights), to_numpy(restored.weights)):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_mixed_float16_save_load_keeps_optimizer_state(tmp_path, restore_policy):
    keras.config.set_dtype_policy("mixed_float16")
    model = compiled(boost.BoostModel)
    fit(model, epochs=1)
    model.save(tmp_path / "m.keras")
    restored = keras.saving.load_model(tmp_path / "m.keras")
    assert len(restored.optimizer.variables) == len(model.optimizer.variables)
    for a, b in zip(to_numpy(model.optimizer.variables), to_numpy(restored.optimizer.variables)):
        np.testing.assert_array_equal(a, b)
    fit(restored, epochs=1)
    assert int(restored.optimizer.iterations) == 8
