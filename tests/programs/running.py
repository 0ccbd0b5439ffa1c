"""Running the programs of `tests/programs` through keras_boost's entry points:
the helpers `tests/test_programs.py` and `tests/test_programs_applications.py`
share (build with a fixed seed, fit and check every weight moved, compare
with plain Keras, save and reload)."""

import dataclasses
import operator

import keras
import numpy as np
import pytest

import keras_boost as boost
from programs import FAST_LANE
from programs import PROGRAMS
from programs.base import predict

SEED = 1234


def is_application(program):
    """A keras.applications program (`tests/test_programs_applications.py` runs them)."""
    return program.name.startswith("app_")


def params(entry_point, keep=lambda p: True):
    """(program, level) pairs for `entry_point`, as ids "name-level"."""
    return [
        pytest.param(p, level, id=f"{p.name}-{level}", marks=[] if p.name in FAST_LANE else [pytest.mark.slow])
        for p in PROGRAMS.values()
        if (p.entry_points is None or entry_point in p.entry_points) and keep(p)
        for level in p.levels
    ]


@pytest.fixture
def program(request):
    """The program, under its dtype policy for the whole test."""
    program = request.param
    if program.backends is not None and keras.backend.backend() not in program.backends:
        backends = sorted(program.backends)
        pytest.skip(f"{program.name} runs on {backends} only: {program.skip_reason}")
    policy = keras.config.dtype_policy()
    if program.policy:
        keras.config.set_dtype_policy(program.policy)
    try:
        yield program
    finally:
        keras.config.set_dtype_policy(policy)


@dataclasses.dataclass
class Run:
    history: dict
    weights: list  # trainable weights after the fit


def values(variables):
    return [np.array(keras.ops.convert_to_numpy(v)) for v in variables]


def iterations(model):
    return int(keras.ops.convert_to_numpy(model.optimizer.iterations))


def build(program):
    keras.utils.set_random_seed(SEED)
    return program.build()


def fit(program, model, data, workdir):
    """Runs the program's fit; checks the losses are finite and every
    trainable weight moved (and stayed finite)."""
    workdir.mkdir(parents=True, exist_ok=True)
    variables = model.trainable_variables
    before = values(variables)
    keras.utils.set_random_seed(SEED)
    history = program.fit(model, data, workdir)
    for key in program.loss_keys:
        assert key in history, f"{key!r} not logged: {sorted(history)}"
        assert np.all(np.isfinite(history[key])), f"{key}: {history[key]}"
    after = values(variables)
    assert all(np.all(np.isfinite(a)) for a in after), "non-finite weights"
    unchanged = [v.path for v, a, b in zip(variables, before, after) if np.array_equal(a, b)]
    assert not unchanged, f"weights not trained: {unchanged}"
    return Run(history, after)


_REFERENCES = {}


def save_and_load(model, path):
    model.save(path)
    # Loading draws fresh seeds for the layers' seed generators (Keras does
    # not restore their state): fix them, as `build` fixes the initial ones.
    keras.utils.set_random_seed(SEED)
    return keras.saving.load_model(path)


def plain_keras(program, tmp_path_factory):
    """The plain-Keras run of `program` (computed once per session)."""
    if program.name not in _REFERENCES:
        model, data = build(program)
        program.compile(model, **{name: program.optimizer() for name in program.optimizers})
        workdir = tmp_path_factory.mktemp(f"reference_{program.name}")
        _REFERENCES[program.name] = fit(program, model, data, workdir)
    return _REFERENCES[program.name]


def assert_same_training(program, run, reference):
    """`run` reproduces plain Keras: every logged value and every weight."""
    for key, expected in reference.history.items():
        assert key in run.history, f"{key!r} not logged: {sorted(run.history)}"
        np.testing.assert_allclose(
            run.history[key], expected, rtol=program.rtol, atol=program.atol, err_msg=key
        )
    assert [w.shape for w in run.weights] == [w.shape for w in reference.weights]
    for i, (got, expected) in enumerate(zip(run.weights, reference.weights)):
        np.testing.assert_allclose(
            got, expected, rtol=program.rtol, atol=program.atol, err_msg=f"trainable weight {i}"
        )


def batch_norms(model):
    """Number of BatchNormalization layers, nested models included."""
    return sum(
        batch_norms(layer) if isinstance(layer, keras.Model)
        else isinstance(layer, keras.layers.BatchNormalization)
        for layer in model.layers
    )


def check_fit_save_load_resume(program, level, tmp_path, tmp_path_factory):
    """`BoostModel.from_model` at `level`: fit (O0 reproduces plain Keras), save,
    reload (same predictions, weights and optimizer state), fit again."""
    original, data = build(program)
    model = boost.BoostModel.from_model(original, boost_level=level)
    program.compile(model, optimizer=program.optimizer())  # plain: BoostModel wraps it
    first = fit(program, model, data, tmp_path / "fit1")
    freezing = "grad_freeze" in boost.AutoBoost(level).enabled
    assert ("freeze_depth" in first.history) == freezing, sorted(first.history)
    if level == "O0":
        assert_same_training(program, first, plain_keras(program, tmp_path_factory))
    elif program.less_bn_target:
        assert batch_norms(model) < batch_norms(original)

    restored = save_and_load(model, tmp_path / "model.keras")
    assert isinstance(restored, boost.BoostModel) and restored.boost_level == level
    x = data.head(8)
    np.testing.assert_allclose(predict(restored, x), predict(model, x), rtol=1e-6, atol=1e-6)
    # Every weight (BN statistics and loss-scale state included) and the
    # optimizer chain with its state (slots, step counters, freeze schedule
    # position) come back as they were.
    assert type(restored.optimizer) is type(model.optimizer)
    for variables in ("weights", "optimizer.variables"):
        saved = values(operator.attrgetter(variables)(model))
        loaded = values(operator.attrgetter(variables)(restored))
        assert [v.shape for v in loaded] == [v.shape for v in saved], variables
        for i, (a, b) in enumerate(zip(loaded, saved)):
            np.testing.assert_array_equal(a, b, err_msg=f"{variables}[{i}]")

    fit(program, restored, data, tmp_path / "fit2")  # resumes
    assert iterations(restored) > iterations(model)
