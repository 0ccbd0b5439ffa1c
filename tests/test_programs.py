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
(`entry_points`, `levels`). The keras.applications programs, which take
`boost_model` alone, run in `tests/test_programs_applications.py`.

Every run must give finite losses and move every trainable weight; at O0
every path must reproduce plain Keras (same initial weights, same data
order) to the program's tolerance.
"""

import contextlib

import pytest

import keras_boost as boost
from programs.running import assert_same_training
from programs.running import batch_norms
from programs.running import build
from programs.running import check_fit_save_load_resume
from programs.running import fit
from programs.running import is_application
from programs.running import params
from programs.running import plain_keras
from programs.running import program  # noqa: F401 (the fixture)


WRAP = params("wrap")
AUTO_BOOST = params("auto_boost")
STANDARD = params("boost_model", lambda p: not p.custom_train_step and not is_application(p))
CUSTOM = params("boost_model", lambda p: p.custom_train_step)


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


@pytest.mark.parametrize("program, level", STANDARD, indirect=["program"])
def test_boost_model_fit_save_load_resume(program, level, tmp_path, tmp_path_factory):
    check_fit_save_load_resume(program, level, tmp_path, tmp_path_factory)


@pytest.mark.parametrize("program, level", CUSTOM, indirect=["program"])
def test_boost_model_refuses_custom_train_step(program, level):
    model, _ = build(program)
    with pytest.raises((TypeError, ValueError), match="train_step"):
        boost.BoostModel.from_model(model, boost_level=level)
