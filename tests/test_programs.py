"""Real programs, of the shapes Keras users write, through keras_boost's entry points.

Each program of `tests/programs` (a tiny model and tiny synthetic data) is
trained at levels O0 and O1 the ways a user would:

- `wrap`: the plain model, `model.compile(optimizer=boost.wrap(opt, level))`;
- `auto_boost`: `boost.AutoBoost(level).network_auto_process_train(model, opt)`;
- `boost_model`: `boost.BoostModel.from_model(model, boost_level=level)`
  compiled with a plain Keras optimizer (the BoostModel brings its level's
  optimizer chain itself), fit, saved to .keras, reloaded, fit again.
  Models with their own `train_step` must be refused (BoostModel's step
  would replace theirs).

A program may name the entry points and levels it runs through
(`entry_points`, `levels`): the keras.applications models take
`boost_model` at O1 alone.

Every run must give finite losses and move every trainable weight; at O0
every path must reproduce plain Keras (same initial weights, same data
order) to the program's tolerance.
"""

import contextlib
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


def _params(entry_point, keep=lambda p: True):
    """(program, level) pairs for `entry_point`, as ids "name-level"."""
    return [
        pytest.param(p, level, id=f"{p.name}-{level}", marks=[] if p.name in FAST_LANE else [pytest.mark.slow])
        for p in PROGRAMS.values()
        if (p.entry_points is None or entry_point in p.entry_points) and keep(p)
        for level in p.levels
    ]


WRAP = _params("wrap")
AUTO_BOOST = _params("auto_boost")
STANDARD = _params("boost_model", lambda p: not p.custom_train_step)
CUSTOM = _params("boost_model", lambda p: p.custom_train_step)


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


# --- running a program -----------------------------------------------------------


@dataclasses.dataclass
class Run:
    history: dict
    weights: list  # trainable weights after the fit


def _values(variables):
    return [np.array(keras.ops.convert_to_numpy(v)) for v in variables]


def _iterations(model):
    return int(keras.ops.convert_to_numpy(model.optimizer.iterations))


def build(program):
    keras.utils.set_random_seed(SEED)
    return program.build()


def fit(program, model, data, workdir):
    """Runs the program's fit; checks the losses are finite and every
    trainable weight moved (and stayed finite)."""
    workdir.mkdir(parents=True, exist_ok=True)
    variables = model.trainable_variables
    before = _values(variables)
    keras.utils.set_random_seed(SEED)
    history = program.fit(model, data, workdir)
    for key in program.loss_keys:
        assert key in history, f"{key!r} not logged: {sorted(history)}"
        assert np.all(np.isfinite(history[key])), f"{key}: {history[key]}"
    after = _values(variables)
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


# --- the three entry points ----------------------------------------------------


@pytest.mark.parametrize("program, level", WRAP, indirect=["program"])
def test_wrap(program, level, tmp_path, tmp_path_factory):
    model, data = build(program)
    optimizers = {name: boost.wrap(program.optimizer(), level) for name in program.optimizers}
    program.compile(model, **optimizers)
    run = fit(program, model, data, tmp_path)
    if level == "O0":
        assert_same_training(program, run, plain_keras(program, tmp_path_factory))


@pytest.mark.parametrize("program, level", AUTO_BOOST, indirect=["program"])
def test_auto_boost(program, level, tmp_path, tmp_path_factory):
    original, data = build(program)
    auto = boost.AutoBoost(level)
    # LessBN rewrites a layer graph and a subclassed model has none: the
    # rest of the level applies, with a warning saying so.
    skips_less_bn = program.subclassed and "less_bn" in auto.enabled
    expect = pytest.warns(boost.NoEffectWarning, match="subclassed")
    with expect if skips_less_bn else contextlib.nullcontext():
        model, optimizers = original, {}
        for name in program.optimizers:
            model, optimizers[name] = auto.network_auto_process_train(model, program.optimizer())
    program.compile(model, **optimizers)
    run = fit(program, model, data, tmp_path)
    if level == "O0" or program.subclassed:
        assert model is original
    if level == "O0":
        assert_same_training(program, run, plain_keras(program, tmp_path_factory))
    elif program.less_bn_target:
        assert batch_norms(model) < batch_norms(original)


# The keras.applications graphs that `STANDARD` trains at O1 only.
BIG_APPLICATIONS = [
    pytest.param(p, id=p.name) for p in PROGRAMS.values() if "O0" not in p.levels and p.name.startswith("app_")
]


@pytest.mark.slow
@pytest.mark.parametrize("program", BIG_APPLICATIONS, indirect=True)
def test_big_applications_at_o0_train_like_plain_keras(program, tmp_path):
    # O0 on the big graphs, uncompiled on both sides (`jit_compile = False`):
    # the same check as `test_boost_model_fit_save_load_resume`'s O0 without
    # the 20-40 s XLA compilation of each of the three steps (saving and
    # resuming on these graphs are checked at O1).
    runs = []
    for boosted in (False, True):
        model, data = build(program)
        if boosted:
            model = boost.BoostModel.from_model(model, boost_level="O0")
        program.compile(model, optimizer=program.optimizer())
        model.jit_compile = False
        runs.append(fit(program, model, data, tmp_path / str(boosted)))
    assert_same_training(program, runs[1], runs[0])


@pytest.mark.parametrize("program, level", STANDARD, indirect=["program"])
def test_boost_model_fit_save_load_resume(program, level, tmp_path, tmp_path_factory):
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
        saved = _values(operator.attrgetter(variables)(model))
        loaded = _values(operator.attrgetter(variables)(restored))
        assert [v.shape for v in loaded] == [v.shape for v in saved], variables
        for i, (a, b) in enumerate(zip(loaded, saved)):
            np.testing.assert_array_equal(a, b, err_msg=f"{variables}[{i}]")

    fit(program, restored, data, tmp_path / "fit2")  # resumes
    assert _iterations(restored) > _iterations(model)


@pytest.mark.parametrize("program, level", CUSTOM, indirect=["program"])
def test_boost_model_refuses_custom_train_step(program, level):
    model, _ = build(program)
    with pytest.raises((TypeError, ValueError), match="train_step"):
        boost.BoostModel.from_model(model, boost_level=level)
