"""BoostModel's train step on the active backend (tox runs all three)."""

import keras
import numpy as np
import pytest

import keras_boost as boost
from conftest import dense_graph
from conftest import regression_data
from conftest import to_numpy


def make(model_cls=keras.Model, batch_norm=True, optimizer=None, **kwargs):
    model = model_cls(*dense_graph(batch_norm=batch_norm), **kwargs)
    model.compile(optimizer=optimizer or keras.optimizers.SGD(0.05, momentum=0.9), loss="mse")
    return model


def fit(model, x, y, epochs=1):
    return model.fit(x, y, batch_size=8, epochs=epochs, shuffle=False, verbose=0)


def state(model):
    return to_numpy(model.weights), to_numpy(model.optimizer.variables)


def assert_same(a, b):
    for u, v in zip(a, b):
        np.testing.assert_array_equal(u, v)


def test_o0_float32_step_equals_keras_fit():
    x, y = regression_data()
    plain, boosted = make(), make(boost.BoostModel)
    fit(plain, x, y, epochs=2)
    history = fit(boosted, x, y, epochs=2)
    assert boosted.loss_scale is None and boost.optimizers.find_in_chain(boosted.optimizer, boost.optimizers.DynamicLossScaleOptimizer) is None
    for a, b in zip(to_numpy(plain.weights), to_numpy(boosted.weights)):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    assert set(history.history) == {"loss"}
    np.testing.assert_allclose(history.history["loss"], fit(plain, x, y, 0).history.get("loss", history.history["loss"]))


def test_dynamic_loss_scale_matches_unscaled_training():
    # Power-of-two scales are exact in float32: same updates as no scaling.
    x, y = regression_data()
    plain = make()
    boosted = make(boost.BoostModel, loss_scale="dynamic")
    fit(plain, x, y, epochs=2)
    history = fit(boosted, x, y, epochs=2)
    for a, b in zip(to_numpy(plain.trainable_weights), to_numpy(boosted.trainable_weights)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert history.history["loss_scale"] == [2.0**15, 2.0**15]
    assert history.history["overflow"] == [0.0, 0.0]
    assert int(boosted.optimizer.iterations) == 8


@pytest.mark.parametrize("bad", [np.inf, np.nan])
def test_overflow_step_is_skipped_bit_identically(bad):
    x, y = regression_data(n=8)
    model = make(boost.BoostModel, loss_scale=boost.DynamicLossScale(initial_scale=64.0))
    fit(model, x, y)  # one clean step: momentum slots are non-zero now
    before = state(model)
    iterations = int(model.optimizer.iterations)
    x_bad = x.copy()
    x_bad[3, 1] = bad
    logs = model.train_on_batch(x_bad, y, return_dict=True)
    after_weights, after_opt = state(model)
    assert_same(before[0], after_weights)  # every model weight, BN statistics included
    scaler = boost.optimizers.find_in_chain(model.optimizer, boost.optimizers.DynamicLossScaleOptimizer)
    own = {id(scaler.dynamic_scale), id(scaler.good_steps)}
    keep = [i for i, v in enumerate(model.optimizer.variables) if id(v) not in own]
    assert len(keep) == len(model.optimizer.variables) - 2
    assert_same([before[1][i] for i in keep], [after_opt[i] for i in keep])  # every slot
    assert int(model.optimizer.iterations) == iterations
    assert float(scaler.dynamic_scale) == 32.0
    assert logs["overflow"] == 1.0 and logs["loss_scale"] == 32.0


def test_scale_grows_after_window_and_has_a_floor():
    x, y = regression_data(n=8)
    model = make(boost.BoostModel, batch_norm=False,
                 loss_scale=boost.DynamicLossScale(initial_scale=2.0, scale_window=2, min_scale=1.0))
    scales = [model.train_on_batch(x, y, return_dict=True)["loss_scale"] for _ in range(5)]
    assert scales == [2.0, 4.0, 4.0, 8.0, 8.0]
    x_bad = x.copy()
    x_bad[0, 0] = np.inf
    scales = [model.train_on_batch(x_bad, y, return_dict=True)["loss_scale"] for _ in range(4)]
    assert scales == [4.0, 2.0, 1.0, 1.0]  # halves, then stops at min_scale


@pytest.mark.parametrize("wrapped", [False, True], ids=["plain optimizer", "boost.wrap"])
def test_mixed_float16_uses_boost_scaling_instead_of_keras_lso(restore_policy, wrapped):
    keras.config.set_dtype_policy("mixed_float16")
    x, y = regression_data()
    sgd = keras.optimizers.SGD(0.05)
    model = make(boost.BoostModel, optimizer=boost.wrap(sgd) if wrapped else sgd)
    assert model.loss_scale == boost.DynamicLossScale()
    # No Keras auto-wrap: the chain holds the replica-safe scaler, outermost.
    assert isinstance(model.optimizer, boost.BoostOptimizer)
    assert isinstance(model.optimizer.inner_optimizer, boost.optimizers.DynamicLossScaleOptimizer)
    history = fit(model, x, y, epochs=2)
    assert history.history["loss_scale"] == [2.0**15, 2.0**15]
    assert np.isfinite(history.history["loss"]).all()
    assert history.history["loss"][1] < history.history["loss"][0]
    assert int(model.optimizer.iterations) == 8
    # The scale lives with the optimizer: the weights keep the plain layout.
    plain = keras.Model(*dense_graph())
    assert [w.shape for w in model.get_weights()] == [w.shape for w in plain.get_weights()]


def test_mixed_bfloat16_needs_no_loss_scale(restore_policy):
    keras.config.set_dtype_policy("mixed_bfloat16")
    model = make(boost.BoostModel)
    assert model.loss_scale is None


@pytest.mark.parametrize("loss_scale", [None, "dynamic"])
def test_keras_loss_scale_optimizer_is_refused_at_compile(loss_scale):
    model = boost.BoostModel(*dense_graph(), loss_scale=loss_scale)
    with pytest.raises(ValueError, match="scales the loss itself.*loss_scale=boost.DynamicLossScale"):
        model.compile(optimizer=keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD()), loss="mse")
    assert not model.compiled


def test_bad_loss_scale_argument():
    with pytest.raises(ValueError, match="loss_scale must be 'auto', 'dynamic', None"):
        boost.BoostModel(*dense_graph(), loss_scale="static")
    with pytest.raises(ValueError, match="scale_window must be >= 1"):
        boost.DynamicLossScale(scale_window=0)
    with pytest.raises(ValueError, match="growth_factor must be finite and > 1"):
        boost.DynamicLossScale(growth_factor=1)


def test_functional_constructor_is_required():
    with pytest.raises(TypeError, match="from_model"):
        boost.BoostModel()


def test_config_set_in_two_places_must_agree():
    model = boost.BoostModel(*dense_graph(), boost_config_dict={"common": {"device_number": 4}})
    with pytest.raises(ValueError, match="set the level and config in one place"):
        model.compile(optimizer=boost.wrap(keras.optimizers.SGD(), "O0", {"common": {"device_number": 2}}),
                      loss="mse")
    model = boost.BoostModel(*dense_graph(), boost_level="O0")
    with pytest.raises(ValueError, match="boost_level='O0' but was compiled with boost.wrap\\(..., 'O1'\\)"):
        model.compile(optimizer=boost.wrap(keras.optimizers.SGD(), "O1"), loss="mse")


def test_plain_optimizer_is_wrapped_once_in_the_models_level():
    model = boost.BoostModel(*dense_graph(), boost_level="O1",
                             boost_config_dict={"boost": {"mode": "manual", "less_bn": False}})
    sgd = keras.optimizers.SGD(0.1)
    model.compile(optimizer=sgd, loss="mse")
    assert isinstance(model.optimizer, boost.BoostOptimizer)
    assert model.optimizer.boost_level == "O1"
    chain = boost.optimizers.optimizer_chain(model.optimizer)
    assert [type(o) for o in chain[1:]] == [boost.FreezeOptimizer, type(sgd)] and chain[-1] is sgd
    # boost.wrap without a level follows the model.
    follower = boost.BoostModel(*dense_graph(), boost_level="O1",
                                boost_config_dict={"boost": {"mode": "manual", "less_bn": False}})
    follower.compile(optimizer=boost.wrap(keras.optimizers.SGD(0.1)), loss="mse")
    assert follower.optimizer.boost_level == "O1"
    assert boost.optimizers.find_in_chain(follower.optimizer, boost.FreezeOptimizer) is not None


class Subclassed(keras.Model):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.hidden = keras.layers.Dense(4, activation="relu")
        self.out = keras.layers.Dense(3)

    def call(self, x):
        return self.out(self.hidden(x))


@pytest.mark.parametrize("kind", ["functional", "sequential", "subclassed"])
def test_from_model_shares_weights_and_trains(kind):
    if kind == "functional":
        model = keras.Model(*dense_graph())
    elif kind == "sequential":
        model = keras.Sequential([keras.Input((5,)), keras.layers.Dense(4), keras.layers.Dense(3)])
    else:
        model = Subclassed()
        model(np.zeros((1, 5), "float32"))
    boosted = boost.BoostModel.from_model(model, loss_scale="dynamic")
    assert boosted.name == f"{model.name}_boost"
    assert {id(v) for v in model.trainable_weights} == {id(v) for v in boosted.trainable_weights}
    before = to_numpy(model.trainable_weights)
    boosted.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    fit(boosted, *regression_data())
    assert any(not np.array_equal(a, b) for a, b in zip(before, to_numpy(model.trainable_weights)))


def test_from_model_errors():
    with pytest.raises(ValueError, match="is not built"):
        boost.BoostModel.from_model(Subclassed())
    with pytest.raises(TypeError, match="must be a keras.Model"):
        boost.BoostModel.from_model(keras.layers.Dense(3))


@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="inspects a TF graph")
def test_o0_float32_step_traces_to_the_same_ops_as_keras():
    import collections

    import tensorflow as tf

    def op_counts(model):
        model.compile(optimizer=keras.optimizers.SGD(0.1, momentum=0.9), loss="mse", metrics=["mae"])
        model.optimizer.build(model.trainable_variables)
        spec = (tf.TensorSpec((8, 5), "float32"), tf.TensorSpec((8, 3), "float32"))
        graph = tf.function(model.train_step).get_concrete_function(spec).graph
        return collections.Counter(op.type for op in graph.get_operations())

    plain = op_counts(keras.Model(*dense_graph()))
    boosted = op_counts(boost.BoostModel(*dense_graph()))
    assert boosted == plain
    scaled = op_counts(boost.BoostModel(*dense_graph(), loss_scale="dynamic"))
    assert scaled != plain  # the check can fail: loss scaling does add ops


@pytest.mark.parametrize("bad", [object(), "not_an_optimizer"])
def test_compile_refuses_what_is_not_a_keras_optimizer(bad):
    model = boost.BoostModel(*dense_graph())
    error = TypeError if not isinstance(bad, str) else ValueError
    with pytest.raises(error, match="optimizer|not_an_optimizer"):
        model.compile(optimizer=bad, loss="mse")
    assert not model.compiled


def test_freezing_with_steps_per_execution_is_refused_before_compiling():
    model = boost.BoostModel(*dense_graph(), boost_level="O1",
                             boost_config_dict={"boost": {"mode": "manual", "less_bn": False}})
    with pytest.raises(ValueError, match="steps_per_execution=1, got steps_per_execution=4"):
        model.compile(optimizer=keras.optimizers.SGD(), loss="mse", steps_per_execution=4)
    assert not model.compiled
    model.compile(optimizer=keras.optimizers.SGD(), loss="mse")  # and then it compiles fine


# --- what the level did: one line at the end of fit ------------------------------


def summary_lines(capsys):
    return [line for line in capsys.readouterr().out.splitlines() if line.startswith("keras_boost ")]


def test_fit_says_once_what_the_level_did(capsys):
    model = boost.BoostModel(*dense_graph(), boost_level="O1", boost_config_dict={"grad_freeze": {"seed": 0}})
    model.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse")
    x, y = regression_data(n=16)
    model.fit(x, y, batch_size=8, epochs=2, verbose=2)
    lines = summary_lines(capsys)
    assert lines == [model.boost_summary()]
    # A dense net: no BN in LessBN's patterns; two blocks (d1 with its BN,
    # the head): two groups, not param_groups=10; the full step is still
    # being timed after 4 steps.
    assert lines[0] == (f"keras_boost O1 on {model.name!r}: no BatchNormalization for LessBN to remove; "
                        "gradient centralization found no kernel to centralize (it needs input channels in multiples of 16); "
                        "freezing in 2 groups: undecided (the full step is timed on the first steps); "
                        "prefix cache: nothing frozen at the inputs; no loss scaling.")
    model.fit(x, y, batch_size=8, epochs=1, verbose=0)
    assert summary_lines(capsys) == []  # verbose=0 prints nothing


def test_o0_prints_no_summary(capsys):
    model = make(boost.BoostModel)
    x, y = regression_data(n=16)
    model.fit(x, y, batch_size=8, epochs=1, verbose=2)
    assert model.boost_summary() == "" and summary_lines(capsys) == []
    scaled = make(boost.BoostModel, loss_scale="dynamic")
    scaled.fit(x, y, batch_size=8, epochs=1, verbose=2)
    assert summary_lines(capsys) == [f"keras_boost O0 on {scaled.name!r}: dynamic loss scaling (scale now 32768)."]
