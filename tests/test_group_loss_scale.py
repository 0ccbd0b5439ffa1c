"""Per-group loss scaling (MindSpore's GroupLossScaleManager / loss_scale_group)."""

import keras
import numpy as np
import pytest

import keras_boost as boost
from conftest import regression_data
from conftest import to_numpy
from keras_boost.layers import GroupLossScaleManager
from keras_boost.ops import update_group_scales

CONFIG = {"boost": {"mode": "manual", "loss_scale_group": True}}


def graph(manager, seed=0):
    init = keras.initializers.GlorotUniform(seed=seed)
    inputs = keras.Input((5,))
    x = manager(inputs, 0, 1)
    x = keras.layers.Dense(8, activation="tanh", kernel_initializer=init, name="body")(x)
    x = manager(x, 1, 2)
    outputs = keras.layers.Dense(3, kernel_initializer=init, name="head")(x)
    return inputs, manager(outputs, 2, 3)


def boosted(scales=(1.0, 2.0**10, 2.0**12, 1.0), **kwargs):
    manager = GroupLossScaleManager(list(scales[1:-1]), num_groups=2, name="gls")
    model = boost.BoostModel(*graph(manager), boost_level="O0", boost_config_dict=CONFIG, **kwargs)
    manager.loss_scale_groups = [["body"], ["head"]]
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    return model, manager


def plain():
    inputs = keras.Input((5,))
    init = keras.initializers.GlorotUniform(seed=0)
    x = keras.layers.Dense(8, activation="tanh", kernel_initializer=init, name="body")(inputs)
    model = keras.Model(inputs, keras.layers.Dense(3, kernel_initializer=init, name="head")(x))
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    return model


def test_update_rule_matches_mindspore_per_group():
    new = to_numpy([update_group_scales([1.0, 1024.0, 1024.0, 1.0], [True, False])])[0]
    np.testing.assert_allclose(new, [1.0, 1024.0 * 2 ** (1 / 1000), 1024.0 / 2**0.5, 1.0], rtol=1e-6)
    floor = to_numpy([update_group_scales([1.0, 1.0, 1.0], [False])])[0]
    np.testing.assert_array_equal(floor, [1.0, 1.0, 1.0])


def test_forward_is_the_identity_and_steps_equal_the_unscaled_ones():
    model, manager = boosted()
    reference = plain()
    reference.set_weights([w for w in model.get_weights() if w.shape != (4,)])
    x, y = regression_data(n=16)
    np.testing.assert_array_equal(model.predict(x, verbose=0), reference.predict(x, verbose=0))
    for _ in range(3):
        model.train_on_batch(x, y)
        reference.train_on_batch(x, y)
    # Unscaled by the scale each step used (MindSpore's updated-scale
    # division would be off by 0.07% per step).
    for a, b in zip([w for w in model.get_weights() if w.shape != (4,)], reference.get_weights()):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=1e-6)
    scales = keras.ops.convert_to_numpy(manager.scales)
    np.testing.assert_allclose(scales, [1, 2.0**10 * 2 ** (3 / 1000), 2.0**12 * 2 ** (3 / 1000), 1], rtol=1e-5)


def test_an_overflow_in_one_group_skips_the_step_and_shrinks_only_that_group():
    model, manager = boosted()
    x, y = regression_data(n=16)
    model.train_on_batch(x, y)  # build
    # The body's boundary multiplies the gradient by 3e38: it overflows
    # there, while the head's gradients (scale 1) stay finite. (An overflow
    # in a later group would flow back into every earlier one.)
    manager.scales.assign(np.array([1.0, 3e38, 1.0, 1.0], "float32"))
    before = [np.array(w) for w in model.get_weights() if w.shape != (4,)]
    logs = model.train_on_batch(x, 1e4 * y, return_dict=True)
    after = [np.array(w) for w in model.get_weights() if w.shape != (4,)]
    for a, b in zip(before, after):
        np.testing.assert_array_equal(a, b)  # skipped: bit-identical
    assert logs["overflow"] == 1.0
    scales = keras.ops.convert_to_numpy(manager.scales)
    np.testing.assert_allclose(scales, [1.0, 3e38 / 2**0.5, 2 ** (1 / 1000), 1.0], rtol=1e-6)


def test_bad_setups_are_refused_by_name():
    with pytest.raises(ValueError, match="exactly one boost.layers.GroupLossScaleManager"):
        inputs = keras.Input((5,))
        boost.BoostModel(inputs, keras.layers.Dense(2)(inputs), boost_config_dict=CONFIG)
    with pytest.raises(ValueError, match="replaces loss_scale='dynamic'"):
        boosted(loss_scale="dynamic")
    with pytest.raises(ValueError, match="num_groups must be an int >= 1, got 0"):
        GroupLossScaleManager(num_groups=0)
    with pytest.raises(ValueError, match="init_loss_scale must be"):
        GroupLossScaleManager([4.0], num_groups=2)
    model, manager = boosted()
    manager.loss_scale_groups = [["body"], []]
    with pytest.raises(ValueError, match="in no group.*head"):
        model.train_on_batch(*regression_data(n=4))


def test_saved_model_keeps_groups_and_scales(tmp_path):
    model, manager = boosted()
    x, y = regression_data(n=16)
    model.train_on_batch(x, y)
    path = str(tmp_path / "gls.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    restored = loaded.get_layer("gls")
    assert restored.loss_scale_groups == [["body"], ["head"]]
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(restored.scales),
                                  keras.ops.convert_to_numpy(manager.scales))
    loaded.train_on_batch(x, y)
    model.train_on_batch(x, y)
    for a, b in zip(loaded.get_weights(), model.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_an_optimizer_alone_says_it_cannot_scale_per_group():
    model = plain()
    model.compile(optimizer=boost.wrap(keras.optimizers.SGD(0.1), "O0", CONFIG), loss="mse")
    with pytest.warns(boost.NoEffectWarning, match="loss_scale_group"):
        model.train_on_batch(*regression_data(n=4))


def test_a_manager_outside_loss_scale_group_is_the_identity_and_says_so():
    # Without BoostModel's unscale a scaled gradient would reach the optimizer.
    manager = GroupLossScaleManager(2.0**10, num_groups=2)
    model = keras.Model(*graph(manager))
    reference = plain()
    reference.set_weights([w for w in model.get_weights() if w.shape != (4,)])
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    x, y = regression_data(n=16)
    with pytest.warns(boost.NoEffectWarning, match="identity"):
        model.train_on_batch(x, y)
    reference.train_on_batch(x, y)
    for a, b in zip([w for w in model.get_weights() if w.shape != (4,)], reference.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_float16_training_with_per_group_scales():
    # The setting the feature exists for: float16 compute, float32 scales.
    manager = GroupLossScaleManager(2.0**8, num_groups=2, name="gls16")
    inputs = keras.Input((5,))
    x = keras.layers.Dense(8, activation="tanh", dtype="mixed_float16", name="body")(manager(inputs, 0, 1))
    outputs = manager(keras.layers.Dense(3, dtype="mixed_float16", name="head")(manager(x, 1, 2)), 2, 3)
    model = boost.BoostModel(inputs, outputs, boost_config_dict=CONFIG)
    assert model.loss_scale is None  # the group scales replace the single one
    manager.loss_scale_groups = [["body"], ["head"]]
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    x, y = regression_data(n=16)
    before = [np.array(w) for w in model.get_weights()]
    history = model.fit(x, y, batch_size=8, epochs=2, verbose=0)
    assert np.isfinite(history.history["loss"]).all() and max(history.history["overflow"]) == 0.0
    assert any(np.abs(a - b).max() > 0 for a, b in zip(before, model.get_weights()))
    scales = keras.ops.convert_to_numpy(manager.scales)
    np.testing.assert_allclose(scales[1:-1], 2.0**8 * 2 ** (4 / 1000), rtol=1e-5)
