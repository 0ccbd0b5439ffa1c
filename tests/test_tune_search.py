"""boost.tune.search: a KerasTuner search over level, learning rate, accumulation and precision."""

import json
import sys
import warnings

import keras
import pytest

import keras_boost as boost
from keras_boost.bench.workloads import mnist_data

pytest.importorskip("keras_tuner")

LOSS = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def small_net(seed=0):
    """Dense net on flattened images, with a BatchNormalization for LessBN (O1)."""
    init = keras.initializers.GlorotUniform(seed=seed)
    inputs = keras.Input((28, 28, 1))
    h = keras.layers.Flatten()(inputs)
    h = keras.layers.Dense(16, kernel_initializer=init)(h)
    h = keras.layers.BatchNormalization()(h)
    h = keras.layers.ReLU()(h)
    return keras.Model(inputs, keras.layers.Dense(10, kernel_initializer=init)(h))


@pytest.fixture(scope="module")
def data():
    (x, y), (x_val, y_val) = mnist_data()
    return x[:512], y[:512], x_val[:256], y_val[:256]


def run(data, directory, **kwargs):
    x, y, x_val, y_val = data
    build_model = kwargs.pop("build_model", small_net)
    args = dict(levels=("O0", "O1"), learning_rates=[0.05, 0.1], accumulation_steps=(1, 2),
                precisions=("float32",), loss=LOSS, epochs=1, batch_size=64, directory=str(directory),
                verbose=0)
    args.update(kwargs)
    return boost.tune.search(build_model, x, y, (x_val, y_val), **args)


def test_two_trial_search_resumes_and_loads_into_autoboost(data, tmp_path):
    first = run(data, tmp_path, max_trials=1)
    assert first.new_trials == 1 and len(first.trials) == 1

    result = run(data, tmp_path, max_trials=2)  # resumes: only the missing trial runs
    assert result.new_trials == 1
    assert [t["trial_id"] for t in result.trials] == [t["trial_id"] for t in first.trials] + ["1"]
    assert result.trials[0]["score"] == first.trials[0]["score"]
    for trial in result.trials:
        assert trial["status"] == "COMPLETED" and trial["epochs"] == 1 and trial["seconds"] > 0
        assert 0.0 <= trial["score"] <= 1.0
    assert result.best_score == max(t["score"] for t in result.trials)
    assert result.best_level in ("O0", "O1") and result.best_learning_rate in (0.05, 0.1)
    assert set(result.best_hyperparameters) == {"boost_level", "learning_rate", "accumulation_steps", "precision"}
    assert "val_accuracy" in str(result) and "best (*)" in str(result)

    path = tmp_path / "best.json"
    result.to_json(path)
    saved = json.loads(path.read_text())
    assert set(saved) >= {"boost_level", "boost_config_dict", "learning_rate"}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no ignored-flag or inert-section warning
        auto = boost.AutoBoost(saved["boost_level"], saved["boost_config_dict"])
        boost.AutoBoost(result.best_level, result.best_config)
    assert auto.config["grad_accumulation"]["grad_accumulation_step"] == result.best_hyperparameters[
        "accumulation_steps"]
    model = boost.BoostModel.from_model(small_net(), saved["boost_level"], saved["boost_config_dict"])
    assert model.boost_level == saved["boost_level"]


def test_budget_stops_the_running_trial_and_new_ones(data, tmp_path):
    # A built model is cloned per trial; the budget (from the call's start)
    # runs out during the first trial (far too many epochs): it stops at an epoch end,
    # and no second trial starts.
    x, y, x_val, y_val = data
    result = run((x[:128], y[:128], x_val[:64], y_val[:64]), tmp_path, build_model=small_net(),
                 levels=("O0",), epochs=100_000, max_trials=3, time_budget=3.0)
    assert len(result.trials) == 1
    trial = result.trials[0]
    assert trial["stopped_by_budget"] and 1 <= trial["epochs"] < 100_000
    assert "(budget)" in str(result)


class Interrupt(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        raise KeyboardInterrupt


def test_an_interrupted_trial_is_run_again_on_resume(data, tmp_path):
    with pytest.raises(KeyboardInterrupt):
        run(data, tmp_path, max_trials=1, callbacks=[Interrupt()])
    result = run(data, tmp_path, max_trials=1)
    assert result.new_trials == 1 and len(result.trials) == 1
    assert result.trials[0]["trial_id"] == "0"
    assert result.trials[0]["status"] == "COMPLETED" and result.trials[0]["epochs"] == 1


def test_budget_spent_before_any_trial_is_a_clear_error(data, tmp_path):
    with pytest.raises(RuntimeError, match="time budget of 1e-09 s ran out"):
        run(data, tmp_path, time_budget=1e-9)


@pytest.mark.parametrize("kwargs, message", [
    ({"time_budget": 0}, "time_budget must be a number > 0"),
    ({"time_budget": -5.0}, "time_budget must be a number > 0"),
    ({"max_trials": 0}, "max_trials must be an int >= 1"),
    ({"levels": ()}, "levels is empty"),
    ({"levels": ("O1", "O3")}, r"unknown levels value 'O3'; valid values: \['O0', 'O1', 'O2'\]"),
    ({"precisions": ("fp16",)}, r"unknown precisions value 'fp16'; valid values: \['float32'"),
    ({"precisions": []}, "precisions is empty"),
    ({"accumulation_steps": (0, 2)}, "accumulation_steps values must be ints >= 1, got 0"),
    ({"accumulation_steps": ()}, "accumulation_steps is empty"),
    ({"learning_rates": (0.1, 0.01)}, "needs lo < hi"),
    ({"learning_rates": (0.0, 0.1)}, "learning rates must be finite numbers > 0"),
    ({"learning_rates": []}, "learning_rates is empty"),
    ({"loss": None}, "pass loss="),
    ({"tuner": "grid"}, "unknown tuner 'grid'"),
])
def test_bad_input_is_refused_at_construction(data, tmp_path, kwargs, message):
    with pytest.raises(ValueError, match=message):
        run(data, tmp_path, **kwargs)
    assert not (tmp_path / "search").exists()  # nothing ran


def test_bad_model_and_optimizer(data, tmp_path):
    with pytest.raises(TypeError, match="must return a keras.Model"):
        run(data, tmp_path, build_model=lambda: "not a model")
    with pytest.raises(TypeError, match="build_model must be a callable"):
        run(data, tmp_path, build_model=3)
    with pytest.raises(TypeError, match="factory"):
        run(data, tmp_path, optimizer=keras.optimizers.SGD())


@pytest.mark.parametrize("level", ["O0", "O1", "O2"])
@pytest.mark.parametrize("steps", [1, 4])
@pytest.mark.parametrize("precision", [None, "float32", "mixed_bfloat16"])
def test_every_trial_config_loads_without_warnings(level, steps, precision):
    config = boost.tune.boost_config_for(steps, precision)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        auto = boost.AutoBoost(level, config)
    assert auto.config["boost"]["grad_accumulation"] == (steps > 1)
    assert auto.config["grad_accumulation"]["grad_accumulation_step"] == steps
    assert auto.config["common"]["precision"] == precision
    preset = boost.AutoBoost(level).config["boost"]
    assert {k: v for k, v in auto.config["boost"].items() if k not in ("mode", "grad_accumulation")} == {
        k: v for k, v in preset.items() if k not in ("mode", "grad_accumulation")}


def test_without_keras_tuner_the_error_names_the_extra(data, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "keras_tuner", None)
    with pytest.raises(ImportError, match=r"keras-boost\[tune\]"):
        run(data, tmp_path)
