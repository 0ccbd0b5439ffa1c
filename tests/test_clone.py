"""`keras.models.clone_model(boost_model)`: the copy keeps the class, level,
config and loss scale, and a compiled one is compiled the same way."""

import keras
import numpy as np

import keras_boost as boost
from conftest import dense_graph
from conftest import regression_data

CONFIG = {"boost": {"mode": "manual", "less_bn": False},
          "grad_freeze": {"param_groups": 2, "total_steps": 40, "seed": 1}}
SCALE = boost.DynamicLossScale(initial_scale=8.0, scale_window=3)


def boost_model():
    return boost.BoostModel(*dense_graph(), boost_level="O1", boost_config_dict=CONFIG, loss_scale=SCALE,
                            name="net")


def assert_same_settings(clone, model):
    assert type(clone) is boost.BoostModel and clone is not model
    assert clone.boost_level == "O1" and clone.boost_config == model.boost_config
    assert clone.loss_scale == SCALE and clone.name == "net"
    assert not set(map(id, clone.weights)) & set(map(id, model.weights))  # new layers


def test_clone_keeps_class_level_config_and_loss_scale():
    model = boost_model()
    clone = keras.models.clone_model(model)
    assert_same_settings(clone, model)
    clone.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse")
    x, y = regression_data(n=8)
    logs = clone.fit(x, y, epochs=1, verbose=0).history
    assert {"freeze_depth", "loss_scale", "overflow"} <= set(logs)


def test_clone_of_a_compiled_model_is_compiled_the_same_and_trains():
    model = boost_model()
    model.compile(optimizer=keras.optimizers.SGD(0.01, momentum=0.9), loss="mse")
    x, y = regression_data(n=8)
    model.fit(x, y, epochs=1, verbose=0)
    clone = keras.models.clone_model(model)
    assert_same_settings(clone, model)
    assert clone.optimizer.boost_config == model.optimizer.boost_config
    assert clone.optimizer is not model.optimizer
    clone.set_weights(model.get_weights())
    history = clone.fit(x, y, epochs=1, verbose=0).history
    assert np.isfinite(history["loss"]).all()


def test_a_new_model_around_a_boost_model_has_its_own_settings():
    # model(x) on Keras tensors runs the graph too: that is a new model
    # around it, built with the arguments it is given (defaults here).
    model = boost_model()
    inputs = keras.Input((5,))
    wrapper = boost.BoostModel(inputs, model(inputs))
    assert wrapper.boost_level == "O0" and wrapper.loss_scale is None


def test_a_copy_in_another_precision_records_its_own():
    # with_precision clones with a clone_function that changes the layers'
    # dtype policy: the copy keeps the level and the compiled chain, and its
    # config says what it computes in.
    model = boost_model()
    model.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse")
    fast = boost.precision.with_precision(model, "mixed_bfloat16")
    assert type(fast) is boost.BoostModel and fast.boost_level == "O1"
    assert fast.boost_config["common"]["precision"] == "mixed_bfloat16" and fast.precision_choice is None
    assert model.boost_config["common"]["precision"] is None
    x, y = regression_data(n=8)
    assert np.isfinite(fast.fit(x, y, epochs=1, verbose=0).history["loss"]).all()
