"""The `applications` workloads of the bench zoo (keras_boost.bench.zoo.applications)."""

import dataclasses

import keras
import numpy as np
import pytest

from keras_boost.bench import catalog
from keras_boost.bench import training
from keras_boost.bench import workloads
from keras_boost.bench.zoo import applications


def test_colored_digits_are_rgb_images_in_range_with_the_mnist_labels():
    (x, y), (x_test, y_test) = applications.colored_digits()
    (_, mnist_y), (_, mnist_y_test) = workloads.mnist_data()
    assert x.shape == (4000, 32, 32, 3) and x_test.shape == (1000, 32, 32, 3)
    assert x.dtype == np.float32 and -1.0 <= x.min() and x.max() <= 1.0
    np.testing.assert_array_equal(y, mnist_y)
    np.testing.assert_array_equal(y_test, mnist_y_test)
    # The colors differ between images: the channels are not a gray copy.
    assert np.std(x[:100].mean(axis=(1, 2)), axis=0).min() > 0.05
    assert not x.flags.writeable  # cached and shared


def test_colored_digits_are_deterministic_per_seed():
    (x0, _), _ = applications.colored_digits(0)
    (x0_again, _), _ = applications.colored_digits.__wrapped__(0)
    (x1, _), _ = applications.colored_digits(1)
    np.testing.assert_array_equal(x0, x0_again)
    assert not np.array_equal(x0, x1)


def test_application_model_returns_logits_and_is_identical_per_seed():
    a = applications.application_model("MobileNetV2", seed=3)
    b = applications.application_model("MobileNetV2", seed=3)
    c = applications.application_model("MobileNetV2", seed=4)
    assert a.output.shape == (None, 10) and a.input.shape == (None, 32, 32, 3)
    assert a.layers[-1].activation is keras.activations.linear
    assert all(layer.momentum == applications.BN_MOMENTUM for layer in a.layers
               if isinstance(layer, keras.layers.BatchNormalization))
    for wa, wb in zip(a.get_weights(), b.get_weights()):
        np.testing.assert_array_equal(wa, wb)
    assert any(not np.array_equal(wa, wc) for wa, wc in zip(a.get_weights(), c.get_weights()))


def test_unknown_application_names_the_valid_ones():
    with pytest.raises(ValueError, match="Unknown application 'VGG16'.*MobileNetV2"):
        applications.applications_workload("VGG16")
    with pytest.raises(ValueError, match="Unknown application"):
        applications.application_model("mobilenet")


def test_the_zoo_registers_the_applications_workloads():
    for name in ("applications", "applications-efficientnetb0", "applications-resnet50v2"):
        workload = catalog.WORKLOADS[name]()
        assert workload.name == name
    assert catalog.WORKLOADS["applications"]().build.args == ("MobileNetV2",)
    # Each application trains at its own peak rate (EfficientNetB0's is lower).
    assert {name: applications.applications_workload(name).learning_rate
            for name in applications.APPLICATIONS} == applications.LEARNING_RATES
    assert applications.LEARNING_RATES["EfficientNetB0"] < applications.LEARNING_RATES["MobileNetV2"]


def _tiny(workload):
    def data():
        (x, y), (x_test, y_test) = workload.data()
        return (x[:64], y[:64]), (x_test[:64], y_test[:64])

    return dataclasses.replace(workload, data=data, epochs=2, warmup_epochs=0.5)


@pytest.mark.slow  # two MobileNetV2 compilations per level
@pytest.mark.benchmark
@pytest.mark.parametrize("variant", ["baseline", "O1"])
def test_the_applications_workload_trains_and_is_deterministic_per_seed(variant):
    workload = _tiny(applications.applications_workload())
    first = training.run_once(workload, variant, "float32", seed=0)
    again = training.run_once(workload, variant, "float32", seed=0)
    assert first["epochs"] == 2 and first["steps"] == 4
    assert np.all(np.isfinite([accuracy for _, accuracy in first["curve"]]))
    assert [a for _, a in first["curve"]] == [a for _, a in again["curve"]]
