"""Programs of `tests/programs` under MirroredStrategy on 2 logical CPUs.

Run by ``tests/test_programs_mirrored.py`` in a fresh process (the logical
devices must be set before TensorFlow starts):
``python mirrored_programs.py OUT_DIR NAME [NAME ...]``; writes
``OUT_DIR/<NAME>.npz`` per program.

For each program, built with the same seed each time, in the strategy's
scope: plain Keras (the mean all-reduce), ``BoostModel.from_model`` at O0,
and at O2 (LessBN, freezing, AdaSum over the 2 replicas), each fit the
program's way; the O2 model is then saved, reloaded in the scope and fit
again. Stored: the logged losses, the trainable weights after each fit
(``<run>_weight_<i>``, and ``<run>_before_<i>`` for the initial ones),
whether AdaSum acts (``o2_adasum``), the number of BatchNormalization layers
before and after O2's surgery, the reloaded model's predictions against the
saved one's, and the iterations before and after the resumed fit.
"""

import os
import pathlib
import sys

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

cpus = tf.config.list_physical_devices("CPU")
tf.config.set_logical_device_configuration(cpus[0], [tf.config.LogicalDeviceConfiguration()] * 2)

import keras  # noqa: E402

import keras_boost as boost  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # tests/
from programs import PROGRAMS  # noqa: E402
from programs.base import predict  # noqa: E402
from programs.running import SEED  # noqa: E402
from programs.running import batch_norms  # noqa: E402
from programs.running import values  # noqa: E402


def run(program, strategy, level, workdir):
    """Builds and fits `program` in `strategy`'s scope; `level` None is plain Keras."""
    keras.utils.set_random_seed(SEED)
    with strategy.scope():
        model, data = program.build()
        original_bns = batch_norms(model)
        if level is not None:
            model = boost.BoostModel.from_model(model, boost_level=level)
        program.compile(model, optimizer=program.optimizer())
    before = values(model.trainable_variables)
    keras.utils.set_random_seed(SEED)
    workdir.mkdir(parents=True, exist_ok=True)
    history = program.fit(model, data, workdir)
    return model, data, history, before, original_bns


def main(out, names):
    strategy = tf.distribute.MirroredStrategy()
    assert strategy.num_replicas_in_sync == 2
    for name in names:
        program = PROGRAMS[name]
        result = {}
        for label, level in (("plain", None), ("o0", "O0"), ("o2", "O2")):
            model, data, history, before, original_bns = run(program, strategy, level, out / name / label)
            for key in program.loss_keys:
                result[f"{label}_{key}"] = np.asarray(history[key], "float64")
            for i, (a, b) in enumerate(zip(before, values(model.trainable_variables))):
                result[f"{label}_before_{i}"], result[f"{label}_weight_{i}"] = a, b
        result["o2_adasum"] = bool(model.check_adasum_enable())
        result["bns_before"], result["bns_after"] = original_bns, batch_norms(model)

        path = out / name / "o2.keras"
        model.save(path)
        with strategy.scope():
            keras.utils.set_random_seed(SEED)
            restored = keras.saving.load_model(path)
        x = data.head(8)
        result["saved_predictions"], result["loaded_predictions"] = predict(model, x), predict(restored, x)
        result["iterations_saved"] = int(keras.ops.convert_to_numpy(restored.optimizer.iterations))
        keras.utils.set_random_seed(SEED)
        resumed = program.fit(restored, data, out / name / "resumed")
        result["resumed_loss"] = np.asarray(resumed[program.loss_keys[0]], "float64")
        result["iterations_resumed"] = int(keras.ops.convert_to_numpy(restored.optimizer.iterations))
        np.savez(out / f"{name}.npz", **result)


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1]), sys.argv[2:])
