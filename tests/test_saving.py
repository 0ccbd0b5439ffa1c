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


O1_NO_SURGERY = {"boost": {"mode": "manual", "less_bn": False},
                 "grad_freeze": {"param_groups": 2, "freeze_type": 0, "freeze_p": 0.5}}


@pytest.mark.parametrize("level, config", [("O0", None), ("O1", O1_NO_SURGERY)])
def test_h5_checkpoint_of_a_boost_model_loads(tmp_path, level, config):
    model = boost.BoostModel(*dense_graph(), boost_level=level, boost_config_dict=config)
    # A loss object: Keras' own H5 loader cannot read back the string "mse".
    model.compile(optimizer=keras.optimizers.SGD(0.05), loss=keras.losses.MeanSquaredError())
    x, y = regression_data()
    path = str(tmp_path / "best.h5")
    model.fit(x, y, epochs=2, verbose=0, callbacks=[keras.callbacks.ModelCheckpoint(path)])
    restored = keras.saving.load_model(path)
    assert isinstance(restored, boost.BoostModel) and restored.boost_level == level
    np.testing.assert_array_equal(restored.predict(x, verbose=0), model.predict(x, verbose=0))
    assert isinstance(restored.optimizer, boost.BoostOptimizer)
    restored.fit(x, y, epochs=1, verbose=0)  # and it trains on


@pytest.mark.parametrize("loss_scale", [None, "dynamic"])
def test_weights_keep_the_plain_models_layout_both_ways(tmp_path, loss_scale):
    plain = keras.Model(*dense_graph(seed=1))
    boosted = boost.BoostModel(*dense_graph(seed=2), loss_scale=loss_scale)
    boosted.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse")
    boosted.fit(*regression_data(), epochs=1, verbose=0)
    assert [w.shape for w in boosted.get_weights()] == [w.shape for w in plain.get_weights()]
    plain.set_weights(boosted.get_weights())
    for a, b in zip(plain.get_weights(), boosted.get_weights()):
        np.testing.assert_array_equal(a, b)
    path = str(tmp_path / "w.weights.h5")
    plain.save_weights(path)
    fresh = boost.BoostModel(*dense_graph(seed=3), loss_scale=loss_scale)
    fresh.load_weights(path)
    for a, b in zip(fresh.get_weights(), plain.get_weights()):
        np.testing.assert_array_equal(a, b)
    boosted.save_weights(path)
    plain.load_weights(path)
    for a, b in zip(plain.get_weights(), boosted.get_weights()):
        np.testing.assert_array_equal(a, b)
