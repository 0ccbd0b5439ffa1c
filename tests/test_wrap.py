"""boost.wrap / BoostOptimizer / AutoBoost on Keras objects."""

import warnings

import keras
import numpy as np
import pytest

import keras_boost as boost
from conftest import dense_graph
from conftest import regression_data
from conftest import to_numpy


def train(optimizer, epochs=2, batch_norm=True):
    inputs, outputs = dense_graph(batch_norm=batch_norm)
    model = keras.Model(inputs, outputs)
    model.compile(optimizer=optimizer, loss="mse")
    x, y = regression_data()
    model.fit(x, y, batch_size=8, epochs=epochs, shuffle=False, verbose=0)
    return model


def sgd():
    return keras.optimizers.SGD(
        keras.optimizers.schedules.ExponentialDecay(0.1, 3, 0.5), momentum=0.9, weight_decay=1e-3
    )


def test_o0_wrap_is_an_exact_pass_through():
    plain = train(sgd())
    wrapped = train(boost.wrap(sgd(), "O0"))
    for a, b in zip(to_numpy(plain.weights), to_numpy(wrapped.weights)):
        np.testing.assert_array_equal(a, b)
    assert int(wrapped.optimizer.iterations) == int(plain.optimizer.iterations) == 8
    inner = wrapped.optimizer.inner_optimizer
    for a, b in zip(to_numpy(plain.optimizer.variables), to_numpy(inner.variables)):
        np.testing.assert_array_equal(a, b)


def test_learning_rate_and_iterations_pass_through():
    inner = keras.optimizers.SGD(0.5)
    opt = boost.wrap(inner)
    assert float(opt.learning_rate) == 0.5
    opt.learning_rate = 0.25
    assert float(inner.learning_rate) == 0.25
    model = train(opt, epochs=1)
    assert opt.iterations is inner.iterations
    assert int(model.optimizer.iterations) == 4


def test_learning_rate_scheduler_callback_reaches_inner_optimizer():
    inner = keras.optimizers.SGD(0.5)
    inputs, outputs = dense_graph()
    model = keras.Model(inputs, outputs)
    model.compile(optimizer=boost.wrap(inner), loss="mse")
    x, y = regression_data()
    model.fit(x, y, epochs=2, verbose=0,
              callbacks=[keras.callbacks.LearningRateScheduler(lambda e, lr: 0.1 / (e + 1))])
    assert float(inner.learning_rate) == pytest.approx(0.05)


@pytest.mark.parametrize("bad", ["adam", object(), None, keras.layers.Dense(2)])
def test_wrap_rejects_non_keras_optimizers(bad):
    with pytest.raises(TypeError, match="keras.optimizers.Optimizer"):
        boost.wrap(bad)


def test_wrap_bad_level():
    with pytest.raises(ValueError, match="Unknown boost level 'O9'"):
        boost.wrap(keras.optimizers.SGD(), "O9")


@pytest.mark.parametrize(
    "config, missing, warning",
    [({"boost": {"mode": "manual", "loss_scale_group": True}, "dim_reduce": {"rho": 0.5}},
      "loss_scale_group", boost.config.BoostConfigWarning),
     ({"boost": {"mode": "enable_all"}}, "dim_reduce", boost.NoEffectWarning)],
)
def test_unimplemented_algorithms_raise_not_implemented(monkeypatch, config, missing, warning):
    # Every algorithm exists now; the guard is kept for future ones.
    monkeypatch.setattr(boost.config, "IMPLEMENTED", boost.config.IMPLEMENTED - {missing})
    names = rf"\['{missing}'\]"
    with pytest.warns(warning), pytest.raises(NotImplementedError, match=names):
        boost.wrap(keras.optimizers.SGD(), "O0", config)
    with pytest.warns(warning), pytest.raises(NotImplementedError, match=names):
        boost.BoostModel(*dense_graph(), boost_level="O0", boost_config_dict=config)
    model = keras.Model(*dense_graph())
    with pytest.warns(warning), pytest.raises(NotImplementedError, match=names):
        boost.AutoBoost("O0", config).network_auto_process_train(model, keras.optimizers.SGD())


def test_manual_mode_can_switch_algorithms_off():
    opt = boost.wrap(keras.optimizers.SGD(), "O2", {"boost": {"mode": "manual", "adasum": False, "less_bn": False,
                                                               "grad_freeze": False, "fused_batch_norm": False,
                                                               "prefix_cache": False}})
    assert opt.boost_level == "O2" and not any(
        v for k, v in opt.boost_config["boost"].items() if k != "mode"
    )


def test_network_auto_process_train_o0():
    model = keras.Model(*dense_graph())
    sgd_ = keras.optimizers.SGD()
    new_model, opt = boost.AutoBoost("O0").network_auto_process_train(model, sgd_)
    assert new_model is model
    assert isinstance(opt, boost.BoostOptimizer) and opt.inner_optimizer is sgd_
    assert boost.AutoBoost("O0").network_auto_process_eval(model) is model


def test_network_auto_process_checks_the_model():
    with pytest.raises(TypeError, match="must be a keras.Model"):
        boost.AutoBoost().network_auto_process_train("model", keras.optimizers.SGD())
    unbuilt = keras.Sequential([keras.layers.Dense(2)])
    with pytest.raises(ValueError, match="is not built"):
        boost.AutoBoost().network_auto_process_train(unbuilt, keras.optimizers.SGD())
    with pytest.raises(TypeError, match="keras.optimizers.Optimizer"):
        boost.AutoBoost().network_auto_process_train(keras.Model(*dense_graph()), "sgd")


def test_wrapper_rejects_base_optimizer_kwargs():
    with pytest.raises(ValueError, match=r"\['clipnorm'\]"):
        boost.OptimizerWrapper(keras.optimizers.SGD(), clipnorm=1.0)


def test_boost_optimizer_config_round_trip():
    opt = boost.wrap(keras.optimizers.Adam(3e-4), "O0", {"common": {"device_number": 2}})
    clone = boost.BoostOptimizer.from_config(opt.get_config())
    assert clone.boost_config == opt.boost_config
    assert clone.inner_optimizer.get_config() == opt.inner_optimizer.get_config()
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(opt))
    assert isinstance(restored, boost.BoostOptimizer)


def gc_graph(seed=0):
    """A net whose kernels GC acts on (16 input channels) with a BN between."""
    init = keras.initializers.GlorotUniform(seed=seed)
    inputs = keras.Input((16,))
    h = keras.layers.Dense(16, kernel_initializer=init, name="d1")(inputs)
    h = keras.layers.BatchNormalization(name="bn")(h)
    h = keras.layers.Dense(16, activation="relu", kernel_initializer=init, name="d2")(h)
    h = keras.layers.Dense(16, activation="relu", kernel_initializer=init, name="d3")(h)
    return inputs, keras.layers.Dense(3, kernel_initializer=init, name="head")(h)


def gc_data():
    rng = np.random.default_rng(0)
    return rng.normal(size=(32, 16)).astype("float32"), rng.normal(size=(32, 3)).astype("float32")


@pytest.mark.parametrize("policy", ["float32", "mixed_float16"])
def test_o1_gc_and_freezing_train_on_a_plain_model(restore_policy, policy):
    """GC inside FreezeOptimizer, inside Keras' LossScaleOptimizer under
    mixed_float16: the combination that failed on TensorFlow and JAX."""
    keras.config.set_dtype_policy(policy)
    # Freezing by name: the level alone leaves it out on a plain model.
    config = {"boost": {"mode": "manual", "grad_freeze": True},
              "grad_freeze": {"param_groups": 2, "freeze_type": 0, "freeze_p": 0.5}}
    model = keras.Model(*gc_graph())
    opt = boost.wrap(keras.optimizers.SGD(0.01, momentum=0.9), "O1", config)
    chain = [type(o) for o in boost.optimizers.optimizer_chain(opt)]
    assert chain[1:3] == [boost.FreezeOptimizer, boost.GradientCentralization]
    model.compile(optimizer=opt, loss="mse")
    before = to_numpy(model.trainable_weights)
    x, y = gc_data()
    with pytest.warns(boost.NoEffectWarning, match="saves no time here"):
        history = model.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    assert all(not np.array_equal(a, b) for a, b in zip(before, to_numpy(model.trainable_weights)))


@pytest.mark.parametrize("level", ["O1", "O2"])
def test_level_on_a_plain_model_leaves_freezing_out_quietly(level):
    # A plain model computes every gradient: freezing there would only drop
    # updates, so the level does not run it, and says nothing at fit.
    x, y = gc_data()
    opt = boost.wrap(keras.optimizers.SGD(0.01), level)
    assert boost.optimizers.find_in_chain(opt, boost.FreezeOptimizer) is None
    assert opt.left_out == ("grad_freeze",)
    assert "left out on a plain model: ['grad_freeze']" in repr(opt)
    assert opt.boost_config["boost"]["grad_freeze"]  # the level's config, unchanged
    model = keras.Model(*gc_graph())
    reference = keras.Model(*gc_graph())
    reference.set_weights(model.get_weights())
    model.compile(optimizer=opt, loss="mse")
    with warnings.catch_warnings():
        warnings.simplefilter("error", boost.NoEffectWarning)
        # O2's AdaSum on one replica says it is the identity: not this test's subject.
        warnings.filterwarnings("ignore", "AdaSum runs on a single replica", boost.NoEffectWarning)
        model.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    # Same updates as the chain without freezing, asked for by name.
    reference.compile(optimizer=boost.wrap(keras.optimizers.SGD(0.01), level,
                                           {"boost": {"mode": "manual", "grad_freeze": False}}),
                      loss="mse")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", boost.NoEffectWarning)  # manual: the less_bn surgery note
        reference.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    for a, b in zip(to_numpy(model.trainable_weights), to_numpy(reference.trainable_weights)):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_boost_model_compiled_with_a_wrapped_level_puts_freezing_back():
    opt = boost.wrap(keras.optimizers.SGD(0.01), "O1")
    model = boost.BoostModel(*gc_graph(), boost_level="O1")
    model.compile(optimizer=opt, loss="mse")
    assert model.optimizer is not opt and model.optimizer.left_out == ()
    assert boost.optimizers.find_in_chain(model.optimizer, boost.FreezeOptimizer) is not None


def test_wrapped_level_saved_and_reloaded_keeps_freezing_out(tmp_path):
    model = keras.Model(*gc_graph())
    model.compile(optimizer=boost.wrap(keras.optimizers.SGD(0.01), "O1"), loss="mse")
    model.fit(*gc_data(), batch_size=8, epochs=1, verbose=0)
    model.save(tmp_path / "m.keras")
    restored = keras.saving.load_model(tmp_path / "m.keras")
    assert restored.optimizer.left_out == ("grad_freeze",)
    assert boost.optimizers.find_in_chain(restored.optimizer, boost.FreezeOptimizer) is None


def test_o1_through_network_auto_process_train_trains(recwarn):
    model, opt = boost.AutoBoost("O1", {"grad_freeze": {"param_groups": 2}}).network_auto_process_train(
        keras.Model(*gc_graph()), keras.optimizers.SGD(0.01))
    model.compile(optimizer=opt, loss="mse")
    model.fit(*gc_data(), batch_size=8, epochs=1, verbose=0)
    # The call just made is not suggested to the user again.
    assert not [w for w in recwarn if "network_auto_process_train" in str(w.message)]


def test_frozen_variables_cause_no_missing_gradient_warning(recwarn):
    model = keras.Model(*gc_graph())
    groups = boost.GradientFreeze().split_parameters_groups(model, 2)
    model.compile(optimizer=boost.FreezeOptimizer(keras.optimizers.SGD(0.01), groups, [1]), loss="mse")
    model.fit(*gc_data(), batch_size=8, epochs=1, verbose=0)
    boosted = boost.BoostModel(*gc_graph(), boost_level="O1",
                               boost_config_dict={"boost": {"mode": "manual", "less_bn": False},
                                                  "grad_freeze": {"param_groups": 2, "freeze_p": 0.5,
                                                                  "freeze_type": 0}})
    boosted.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse")
    boosted.fit(*gc_data(), batch_size=8, epochs=1, verbose=0)
    assert not [w for w in recwarn if "Gradients do not exist" in str(w.message)]


@pytest.mark.parametrize("make", [
    lambda: boost.wrap(keras.optimizers.Adam(1e-3), "O0"),
    lambda: boost.GradientAccumulation(keras.optimizers.Adam(1e-3), 2),
    lambda: boost.GradientCentralization(keras.optimizers.Adam(1e-3)),
], ids=["wrap", "accumulation", "centralization"])
def test_wrappers_inside_keras_loss_scale_optimizer(restore_policy, make):
    # Under mixed_float16 compile wraps the optimizer in Keras' LossScaleOptimizer
    # (the JAX path hands the wrapper its variables, not values).
    keras.config.set_dtype_policy("mixed_float16")
    model = keras.Model(*gc_graph())
    model.compile(optimizer=make(), loss="mse")
    assert isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)
    history = model.fit(*gc_data(), batch_size=8, epochs=2, shuffle=False, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    if isinstance(model.optimizer.inner_optimizer, boost.BoostOptimizer):
        # O0 is a pass-through: the same run as Keras' own LossScaleOptimizer(Adam).
        reference = keras.Model(*gc_graph())
        reference.compile(optimizer=keras.optimizers.Adam(1e-3), loss="mse")
        reference.fit(*gc_data(), batch_size=8, epochs=2, shuffle=False, verbose=0)
        for a, b in zip(to_numpy(reference.weights), to_numpy(model.weights)):
            np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-3)
