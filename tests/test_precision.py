"""The config's common.precision: the policy of the model BoostModel builds, and "auto"."""

import logging
import warnings

import keras
import numpy as np
import pytest

import keras_boost as boost
from conftest import dense_graph
from conftest import regression_data
from conftest import subclassed_dense_net
from keras_boost.precision import choose_precision
from keras_boost.bench import residual_cnn
from keras_boost.precision import with_precision
# The module whose globals the timing tests patch (keras_boost.precision is
# a re-export of it since the algorithm moved).
from keras_boost.algorithms.precision import policy as precision_policy


def plain_model():
    return keras.Model(*dense_graph(seed=0))


def compute_dtypes(model):
    return {layer.name: layer.compute_dtype for layer in model.layers[1:]}


def test_unknown_precision_is_refused_by_name():
    with pytest.raises(ValueError, match=r"common.precision.*'fp16'"):
        boost.AutoBoost("O0", {"common": {"precision": "fp16"}})
    assert boost.AutoBoost("O0").config["common"]["precision"] is None


@pytest.mark.parametrize("policy, dtype", [("mixed_float16", "float16"), ("mixed_bfloat16", "bfloat16")])
def test_with_precision_copies_the_model_in_the_policy(restore_policy, policy, dtype):
    model = plain_model()
    converted = with_precision(model, policy)
    assert converted is not model
    assert set(compute_dtypes(converted).values()) == {dtype}
    assert all(v.dtype == "float32" for v in converted.weights)  # mixed: float32 variables
    for a, b in zip(model.get_weights(), converted.get_weights()):
        np.testing.assert_array_equal(a, b)
    assert set(compute_dtypes(model).values()) == {"float32"}  # the input is untouched
    assert keras.config.dtype_policy().name == "float32"
    assert with_precision(converted, policy) is converted  # nothing to change


def test_with_precision_copies_a_compiled_model_compiled(restore_policy):
    # The copy comes from the surgeries' shared rebuild: compiled like the
    # input, nested models converted too, frozen flags kept.
    inner = plain_model()
    inner.trainable = False
    inputs = keras.Input((5,))
    model = keras.Model(inputs, keras.layers.Dense(2, name="head")(inner(inputs)))
    model.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse")
    converted = with_precision(model, "mixed_bfloat16")
    assert converted.compiled and converted.get_compile_config()["loss"] == model.get_compile_config()["loss"]
    assert boost.precision.model_policies(converted) == {"mixed_bfloat16"}
    assert not converted.layers[1].trainable


def test_with_precision_refuses_a_subclassed_model_and_bad_policies():
    net = subclassed_dense_net()
    net(np.zeros((1, 3), "float32"))
    with pytest.raises(ValueError, match="subclassed.*set_dtype_policy"):
        with_precision(net, "mixed_bfloat16")
    with pytest.raises(ValueError, match="precision must be one of.*'int8'"):
        with_precision(plain_model(), "int8")


def test_from_model_applies_the_policy_and_loss_scaling_only_for_float16(restore_policy):
    model = plain_model()
    half = boost.BoostModel.from_model(model, "O0", {"common": {"precision": "mixed_float16"}})
    assert set(compute_dtypes(half).values()) == {"float16"}
    assert half.loss_scale is not None
    bf16 = boost.BoostModel.from_model(model, "O0", {"common": {"precision": "mixed_bfloat16"}})
    assert set(compute_dtypes(bf16).values()) == {"bfloat16"}
    assert bf16.loss_scale is None
    back = boost.BoostModel.from_model(half, "O0", {"common": {"precision": "float32"}})
    assert set(compute_dtypes(back).values()) == {"float32"} and back.loss_scale is None
    # The precision copy trains (loss scaling on for float16).
    x, y = regression_data()
    half.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse")
    history = half.fit(x, y, epochs=2, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    assert "loss_scale" in history.history


def test_precision_with_less_bn_keeps_the_surgery_report(restore_policy):
    model = residual_cnn(seed=0)
    removable = boost.surgery.find_less_bn(model).num_removed
    boosted = boost.BoostModel.from_model(model, "O1", {"common": {"precision": "mixed_bfloat16"}})
    assert removable > 0 and boosted.less_bn_report.num_removed == removable
    assert len(boosted.layers) == len(model.layers) - removable
    assert set(compute_dtypes(boosted).values()) == {"bfloat16"}


def fake_timer(times, finite=None, broken=()):
    def timer(model, x, steps):
        policy = model.layers[-1].dtype_policy.name
        if policy in broken:
            raise RuntimeError(f"{policy} kernels are not available")
        return times[policy], (finite or {}).get(policy, True)

    return timer


def test_auto_keeps_the_fastest_finite_precision():
    model = plain_model()
    times = {"float32": 0.010, "mixed_float16": 0.006, "mixed_bfloat16": 0.008}
    assert choose_precision(model, timer=fake_timer(times)).policy == "mixed_float16"
    # float16 overflows: the next fastest is kept.
    choice = choose_precision(model, timer=fake_timer(times, finite={"mixed_float16": False}))
    assert choice.policy == "mixed_bfloat16"
    assert "loss not finite" in str(choice)
    # A precision that cannot run is skipped, with the reason in the report.
    choice = choose_precision(model, timer=fake_timer(times, broken={"mixed_float16"}))
    assert choice.policy == "mixed_bfloat16" and choice.seconds_per_step["mixed_float16"] is None
    assert "kernels are not available" in str(choice)


def test_auto_needs_the_margin_to_leave_float32():
    model = plain_model()
    times = {"float32": 0.010, "mixed_bfloat16": 0.0097}
    choice = choose_precision(model, candidates=["mixed_bfloat16"], timer=fake_timer(times))
    assert choice.policy == "float32"
    choice = choose_precision(model, candidates=["mixed_bfloat16"], margin=0.0, timer=fake_timer(times))
    assert choice.policy == "mixed_bfloat16"


def test_auto_measures_once_per_model_signature():
    model = plain_model()
    first = choose_precision(model, candidates=["mixed_bfloat16"], steps=3, batch_size=8)
    assert not first.cached and first.seconds_per_step["float32"] > 0
    again = choose_precision(keras.Model(*dense_graph(seed=3)), candidates=["mixed_bfloat16"], steps=3,
                             batch_size=8)
    assert again.cached and again.policy == first.policy  # same structure, same answer


def loaded_clock(times, load):
    """A fake timer: a step of `policy` takes `times[policy]` seconds times
    the machine's load at that moment (`load(call)`, call = steps timed so far)."""
    calls = []

    def timer(model, x, steps):
        policy = model.layers[-1].dtype_policy.name
        seconds = [times[policy] * load(len(calls) + i) for i in range(steps)]
        calls.extend(seconds)
        return float(np.median(seconds)), True

    return timer


@pytest.mark.parametrize("load", [
    lambda call: 2.0 if call < 5 else 1.0,      # a job that ends during the timing
    lambda call: 1.0 + (call // 2) % 2,         # load switching every two steps
    lambda call: 3.0 if call in (1, 4) else 1.0,  # two slowed steps
], ids=["job-ends", "alternating", "spikes"])
def test_auto_decision_does_not_flip_with_machine_load(load):
    # bfloat16 is 0.85x float32 here: whatever the load does while timing,
    # the paired rounds see 0.85x and keep it, and 1.02x never passes.
    model = plain_model()
    for ratio, kept in [(0.85, "mixed_bfloat16"), (1.02, "float32")]:
        timer = loaded_clock({"float32": 0.010, "mixed_bfloat16": 0.010 * ratio}, load)
        choice = choose_precision(model, candidates=["mixed_bfloat16"], timer=timer)
        assert choice.policy == kept
        assert choice.ratios["mixed_bfloat16"] == pytest.approx(ratio)


def test_auto_needs_a_median_of_paired_steps():
    with pytest.raises(ValueError, match=r"steps must be >= 3 \(a median of paired timings\).*steps=2"):
        choose_precision(plain_model(), steps=2)


def test_the_precision_choice_is_always_an_attribute_and_saved(monkeypatch, tmp_path):
    # float32 kept (the model is not copied): the choice was once lost.
    monkeypatch.setattr(precision_policy, "_CACHE", {})
    monkeypatch.setattr(precision_policy, "time_training_steps", fake_timer(
        {"float32": 0.010, "mixed_float16": 0.012, "mixed_bfloat16": 0.011}))
    assert boost.BoostModel(*dense_graph(seed=0)).precision_choice is None
    boosted = boost.BoostModel.from_model(plain_model(), "O0", {"common": {"precision": "auto"}})
    assert boosted.precision_choice.policy == "float32"
    assert boosted.boost_config["common"]["precision"] == "float32"  # pinned: no timing on reload
    assert "precision float32 (measured: mixed_float16 1.20x float32" in boosted.boost_summary()
    boosted.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse")
    boosted.save(tmp_path / "m.keras")
    loaded = keras.saving.load_model(tmp_path / "m.keras")
    assert loaded.precision_choice.get_config() == boosted.precision_choice.get_config()
    assert keras.models.clone_model(loaded).precision_choice.policy == "float32"


def test_auto_through_from_model_reports_and_keeps_its_choice(caplog, capsys, tmp_path):
    caplog.set_level(logging.INFO, logger="keras_boost.precision")
    with warnings.catch_warnings():
        warnings.simplefilter("error", boost.NoEffectWarning)
        boosted = boost.BoostModel.from_model(plain_model(), "O0", {"common": {"precision": "auto"}})
    assert "precision:" in caplog.text
    assert "precision:" not in capsys.readouterr().out  # library code logs, never prints
    caplog.clear()
    # The decision, not "auto", is the model's config: a reload times nothing.
    policy = boosted.boost_config["common"]["precision"]
    assert policy in ("float32", "mixed_float16", "mixed_bfloat16")
    assert boost.precision.model_policies(boosted) == {policy}
    boosted.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse")
    path = str(tmp_path / "auto.keras")
    boosted.save(path)
    with warnings.catch_warnings():
        warnings.simplefilter("error", boost.NoEffectWarning)
        loaded = keras.saving.load_model(path)
    assert loaded.boost_config["common"]["precision"] == policy
    assert compute_dtypes(loaded) == compute_dtypes(boosted)
    assert "precision:" not in caplog.text


def test_precision_that_cannot_apply_warns():
    config = {"common": {"precision": "mixed_bfloat16"}}
    with pytest.warns(boost.NoEffectWarning, match="from_model"):
        boost.BoostModel(*dense_graph(seed=0), boost_config_dict=config)
    model = plain_model()
    model.compile(optimizer=boost.wrap(keras.optimizers.SGD(0.01), "O0", config), loss="mse")
    x, y = regression_data(n=8)
    with pytest.warns(boost.NoEffectWarning, match="precision"):
        model.fit(x, y, verbose=0)


def test_bad_arguments_of_choose_precision():
    with pytest.raises(ValueError, match="margin"):
        choose_precision(plain_model(), margin=1.5)
    with pytest.raises(ValueError, match="precision must be one of"):
        choose_precision(plain_model(), candidates=["float8"])


def test_float32_islands_are_kept(restore_policy):
    # The mixed-precision guide's float32 output softmax, and the group loss
    # scale manager, stay float32 when the rest of the model goes mixed.
    manager = boost.layers.GroupLossScaleManager(4.0, num_groups=1)
    inputs = keras.Input((5,))
    x = keras.layers.Dense(4, name="body")(manager(inputs, 0, 1))
    outputs = keras.layers.Activation("softmax", name="probs")(manager(x, 1, 2))
    model = keras.Model(inputs, outputs)
    converted = with_precision(model, "mixed_bfloat16")
    dtypes = {layer.name: layer.dtype_policy.name for layer in converted.layers[1:]}
    assert dtypes["body"] == "mixed_bfloat16"
    assert dtypes["probs"] == "float32" and dtypes[manager.name] == "float32"
    assert boost.precision.model_policies(converted) == {"mixed_bfloat16"}
