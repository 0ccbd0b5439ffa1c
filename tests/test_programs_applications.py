"""keras.applications models (`weights=None`, 32x32) through `BoostModel.from_model`.

The architectures users fine-tune, as `tests/test_programs.py` runs its
smaller programs: fit (at O0 exactly like plain Keras), save to .keras,
reload, resume. MobileNetV2 and MobileNetV3Small take O0 and O1; ResNet50V2,
EfficientNetB0 and DenseNet121 take O1 there, and O0 in
`test_big_applications_at_o0_train_like_plain_keras`.
"""

import keras
import pytest

import keras_boost as boost
from programs import PROGRAMS
from programs.running import assert_same_training
from programs.running import build
from programs.running import check_fit_save_load_resume
from programs.running import fit
from programs.running import is_application
from programs.running import params
from programs.running import program  # noqa: F401 (the fixture)

APPLICATIONS = params("boost_model", is_application)
# The keras.applications graphs that `APPLICATIONS` trains at O1 only.
BIG_APPLICATIONS = [
    pytest.param(p, id=p.name) for p in PROGRAMS.values() if "O0" not in p.levels and is_application(p)
]


@pytest.mark.parametrize("program, level", APPLICATIONS, indirect=["program"])
def test_boost_model_fit_save_load_resume(program, level, tmp_path, tmp_path_factory):
    check_fit_save_load_resume(program, level, tmp_path, tmp_path_factory)


@pytest.mark.slow
@pytest.mark.parametrize("program", BIG_APPLICATIONS, indirect=True)
def test_big_applications_at_o0_train_like_plain_keras(program, tmp_path):
    # O0's step against plain Keras' on the big graphs (saving and resuming
    # on them are checked at O1), run the cheapest exact way on each
    # backend: TensorFlow eagerly (tracing DenseNet121's step takes 40 s, two
    # eager epochs 13 s), JAX jit-compiled (uncompiled, JAX compiles every
    # operation on its own: 2x the one compilation), torch eager as always.
    runs = []
    for boosted in (False, True):
        model, data = build(program)
        if boosted:
            model = boost.BoostModel.from_model(model, boost_level="O0")
        program.compile(model, optimizer=program.optimizer())
        model.run_eagerly = keras.backend.backend() == "tensorflow"
        runs.append(fit(program, model, data, tmp_path / str(boosted)))
    assert_same_training(program, runs[1], runs[0])
