"""Quantization-aware training then Keras' int8 PTQ, on TF, JAX and torch."""

import re

import keras
import numpy as np
import pytest

import keras_boost as boost
from keras_boost import quantization
from keras_boost.errors import NoEffectWarning

from conftest import to_numpy

D, C = 16, 4


def outlier_task():
    """A task where int8 PTQ visibly loses accuracy.

    The last input is always 0 and its first-layer weights are 500x the
    others: irrelevant in float, but they set each output channel's abs-max
    scale, so per-channel int8 rounds the useful weights to a few levels.
    """
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2048, D + 1)).astype("float32")
    x[:, D] = 0.0
    logits = x[:, :D] @ rng.normal(size=(D, C)) + 0.3 * np.sin(3 * x[:, :D]) @ rng.normal(size=(D, C))
    y = np.argmax(logits, 1).astype("int32")
    return (x[:1536], y[:1536]), (x[1536:], y[1536:])


def outlier_model():
    keras.utils.set_random_seed(1)
    inputs = keras.Input((D + 1,))
    h = keras.layers.Dense(16, activation="relu", name="h")(inputs)
    model = keras.Model(inputs, keras.layers.Dense(C, name="out")(h))
    kernel = np.array(keras.ops.convert_to_numpy(model.get_layer("h").kernel))
    kernel[D, :] = 500.0 * np.abs(kernel).max()
    model.get_layer("h").kernel.assign(kernel)
    return model


def train(model, callbacks=()):
    (x, y), _ = outlier_task()
    model.compile(optimizer=keras.optimizers.Adam(2e-2),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(x, y, epochs=8, batch_size=32, verbose=0, callbacks=list(callbacks))
    return model


def accuracy(model):
    _, (x, y) = outlier_task()
    return float(np.mean(np.argmax(model.predict(x, verbose=0, batch_size=512), 1) == y))


@pytest.mark.slow  # trains to compare accuracies: seconds
def test_qat_then_int8_beats_plain_ptq_int8():
    float_model = train(outlier_model())
    float_acc = accuracy(float_model)
    float_model.quantize("int8")
    ptq_acc = accuracy(float_model)
    assert ptq_acc < float_acc - 0.05  # the task is one where PTQ loses accuracy

    qat = train(quantization.quantize_aware(outlier_model()),
                [quantization.QuantizationAwareTraining(start="0.5dur")])
    assert all(l.qat_active for l in qat.layers if isinstance(l, quantization.QuantizeAwareDense))
    qat_float_acc = accuracy(qat)
    qat.quantize("int8")
    qat_int8_acc = accuracy(qat)
    # Training saw exactly the rounding int8 applies.
    assert abs(qat_int8_acc - qat_float_acc) <= 0.01
    assert qat_int8_acc >= ptq_acc + 0.02, (float_acc, ptq_acc, qat_int8_acc)


def test_fake_quant_forward_equals_keras_int8_forward():
    model = outlier_model()
    qat = quantization.quantize_aware(model, active=True)
    x = outlier_task()[1][0][:64]
    expected_model = quantization.strip(qat)
    expected_model.quantize("int8")
    np.testing.assert_allclose(qat.predict(x, verbose=0), expected_model.predict(x, verbose=0), rtol=1e-4, atol=1e-3)


def test_copy_strip_and_save_round_trip(tmp_path):
    model = outlier_model()
    qat = quantization.quantize_aware(model, activations=False, active=True)
    assert all(type(l) is keras.layers.Dense for l in model.layers[1:])  # untouched
    path = str(tmp_path / "qat.keras")
    qat.save(path)
    loaded = keras.models.load_model(path)
    layer = loaded.get_layer("h")
    assert isinstance(layer, quantization.QuantizeAwareDense) and layer.qat_active
    assert not layer.quantize_activations
    for a, b in zip(to_numpy(qat.weights), to_numpy(loaded.weights)):
        np.testing.assert_array_equal(a, b)
    plain = quantization.strip(loaded)
    assert all(type(l) is keras.layers.Dense for l in plain.layers[1:])


def test_start_at_a_step_turns_on_during_fit():
    qat = quantization.quantize_aware(outlier_model())
    seen = []

    class Probe(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            seen.append(self.model.get_layer("h").qat_active)

    (x, y), _ = outlier_task()
    qat.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    qat.fit(x[:256], y[:256], epochs=1, batch_size=64, verbose=0,
            callbacks=[quantization.QuantizationAwareTraining(start=2), Probe()])
    assert seen == [False, False, True, True]


@pytest.mark.parametrize("bad", ["later", "1.2dur", -3, None, "2ep"])
def test_bad_start_names_the_value(bad):
    with pytest.raises(ValueError, match=re.escape(repr(bad))):
        quantization.QuantizationAwareTraining(start=bad)


def test_start_zero_steps_is_allowed():
    assert quantization.QuantizationAwareTraining(start=0).get_config() == {"start": 0}


def test_no_dense_warns():
    inputs = keras.Input((4, 4, 1))
    model = keras.Model(inputs, keras.layers.Conv2D(2, 3)(inputs))
    with pytest.warns(NoEffectWarning, match="no float keras.layers.Dense"):
        quantization.quantize_aware(model)


def test_public_api_names():
    assert boost.quantization.quantize_aware is quantization.quantize_aware


@pytest.mark.parametrize("argv", [["--epochs", "0"], ["--batch-size", "-1"], ["--learning-rate", "0"]])
def test_compression_benchmark_rejects_bad_arguments(argv, capsys):
    from benchmarks import compression

    with pytest.raises(SystemExit):
        compression.parse_args(argv)
    assert argv[0] in capsys.readouterr().err
