"""Training-time magnitude pruning on TF, JAX and torch."""

import warnings

import keras
import numpy as np
import pytest

import keras_boost as boost
from keras_boost import pruning
from keras_boost.errors import NoEffectWarning

from conftest import to_numpy


def small_model(seed=0):
    keras.utils.set_random_seed(seed)
    inputs = keras.Input((12,))
    h = keras.layers.Dense(32, activation="relu", name="d1")(inputs)
    h = keras.layers.Dropout(0.0, name="drop")(h)
    out = keras.layers.Dense(3, name="d2")(h)
    return keras.Model(inputs, out)


def data(n=256, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 12)).astype("float32")
    y = (x[:, 0] + x[:, 1] > 0).astype("int32") + (x[:, 2] > 1).astype("int32")
    return x, y


LOSS = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def pruned_and_trained(target=0.75, optimizer=None, epochs=2, schedule=None, **fit):
    x, y = data()
    model = pruning.prune_low_magnitude(
        small_model(), target, schedule or pruning.PolynomialDecay(end_step=12, frequency=3)
    )
    model.compile(optimizer=optimizer or keras.optimizers.Adam(1e-2), loss=LOSS)
    model.fit(x, y, epochs=epochs, batch_size=32, verbose=0, callbacks=[pruning.UpdatePruningMasks()], **fit)
    return model


def kernel_and_mask(model, name):
    wrapper = model.get_layer(f"prune_low_magnitude_{name}")
    return to_numpy([wrapper.kernel, wrapper.mask])


def test_reaches_target_sparsity_and_masked_weights_stay_zero():
    model = pruned_and_trained(0.75)
    report = pruning.sparsity_report(model)
    assert set(report) == {"d1", "d2"}
    for value in report.values():
        assert abs(value - 0.75) <= 0.01
    before = {n: kernel_and_mask(model, n) for n in ("d1", "d2")}
    # Further updates (Adam momentum keeps pushing the pruned weights).
    x, y = data(seed=1)
    model.fit(x, y, epochs=1, batch_size=32, verbose=0, callbacks=[pruning.UpdatePruningMasks()])
    for name, (kernel, mask) in before.items():
        new_kernel, new_mask = kernel_and_mask(model, name)
        np.testing.assert_array_equal(new_mask, mask)
        assert np.all(new_kernel[mask == 0] == 0.0)
        assert not np.allclose(new_kernel[mask == 1], kernel[mask == 1])  # the rest still trains


def test_schedule_ramps_polynomially_with_durations():
    schedule = pruning.PolynomialDecay(final_sparsity=0.8, begin_step=0, end_step="0.5dur", frequency=1)
    assert schedule.resolve(total_steps=40) == (0, 20)
    assert schedule.sparsity(10) == pytest.approx(0.8 * (1 - 0.5**3), abs=1e-6)
    assert schedule.should_update(20) and not schedule.should_update(21)
    again = pruning.PolynomialDecay.from_config(schedule.get_config())
    assert again.get_config() == schedule.get_config()


def test_original_model_is_not_mutated_and_outputs_match_before_pruning():
    model = small_model()
    x, _ = data()
    before = to_numpy(model.weights)
    pruned = pruning.prune_low_magnitude(model, 0.5, pruning.PolynomialDecay(end_step=10))
    assert all(not isinstance(l, pruning.PruneLowMagnitude) for l in model.layers)
    for a, b in zip(before, to_numpy(model.weights)):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(pruned.predict(x, verbose=0), model.predict(x, verbose=0), atol=1e-6)


def test_save_load_round_trip_strip_and_report(tmp_path):
    model = pruned_and_trained(0.5, epochs=1)
    path = str(tmp_path / "pruned.keras")
    model.save(path)
    loaded = keras.models.load_model(path)
    for name in ("d1", "d2"):
        for a, b in zip(kernel_and_mask(model, name), kernel_and_mask(loaded, name)):
            np.testing.assert_array_equal(a, b)
    assert int(keras.ops.convert_to_numpy(loaded.get_layer("prune_low_magnitude_d1").pruning_step)) == 8
    x, _ = data()
    assert isinstance(loaded, pruning.PrunedModel)
    plain = pruning.strip(loaded)
    assert not isinstance(plain, pruning.PrunedModel)
    assert all(not isinstance(l, pruning.PruneLowMagnitude) for l in plain.layers)
    assert not any("pruning" in w.path for w in plain.weights)
    assert pruning.sparsity_report(plain) == pruning.sparsity_report(model)
    np.testing.assert_allclose(plain.predict(x, verbose=0), model.predict(x, verbose=0), atol=1e-6)


@pytest.mark.parametrize("bad", [0, 0.0, -0.1, 1.5, "half", None, True])
def test_bad_sparsity_names_the_value(bad):
    with pytest.raises((ValueError, TypeError), match=r"target_sparsity.*\(0, 1\]"):
        pruning.prune_low_magnitude(small_model(), bad)


def test_bad_durations_and_schedules():
    with pytest.raises(ValueError, match=r"'soon'.*0.6dur"):
        pruning.PolynomialDecay(end_step="soon")
    with pytest.raises(ValueError, match=r"1.5dur"):
        pruning.PolynomialDecay(end_step="1.5dur")
    with pytest.raises(ValueError, match="frequency"):
        pruning.PolynomialDecay(frequency=0)
    with pytest.raises(ValueError, match="differs from target_sparsity"):
        pruning.prune_low_magnitude(small_model(), 0.5, pruning.PolynomialDecay(final_sparsity=0.8))
    with pytest.raises(ValueError, match="before or when"):
        pruning.PolynomialDecay(0.5, begin_step=10, end_step=5).resolve()


def test_layer_without_kernel_named_explicitly_raises():
    with pytest.raises(ValueError, match=r"'drop'.*Dropout.*no kernel.*'d1', 'd2'"):
        pruning.prune_low_magnitude(small_model(), 0.5, layers=["drop"])
    with pytest.raises(ValueError, match=r"'nope'.*'d1', 'd2'"):
        pruning.prune_low_magnitude(small_model(), 0.5, layers=["nope"])
    only = pruning.prune_low_magnitude(small_model(), 0.5, layers=["d2"])
    assert [l.name for l in only.layers if isinstance(l, pruning.PruneLowMagnitude)] == ["prune_low_magnitude_d2"]


def test_nothing_to_prune_warns():
    inputs = keras.Input((4,))
    model = keras.Model(inputs, keras.layers.Activation("relu")(inputs))
    with pytest.warns(NoEffectWarning, match="no layer with a kernel"):
        pruning.prune_low_magnitude(model, 0.5)


def test_subclassed_model_is_refused():
    class Net(keras.Model):
        def __init__(self):
            super().__init__()
            self.d = keras.layers.Dense(2)

        def call(self, x):
            return self.d(x)

    net = Net()
    net(np.zeros((1, 3), "float32"))
    with pytest.raises(ValueError, match="subclassed"):
        pruning.prune_low_magnitude(net, 0.5)


def _assert_target_and_zeros(model, target):
    for name in ("d1", "d2"):
        kernel, mask = kernel_and_mask(model, name)
        assert abs(float((mask == 0).mean()) - target) <= 0.01
        assert np.all(kernel[mask == 0] == 0.0)


def test_composes_with_mixed_precision(restore_policy):
    keras.config.set_dtype_policy("mixed_float16")
    model = pruned_and_trained(0.6)
    assert model.optimizer.__class__.__name__ == "LossScaleOptimizer"
    _assert_target_and_zeros(model, 0.6)


def test_composes_with_gradient_accumulation():
    opt = boost.GradientAccumulation(keras.optimizers.Adam(1e-2), 2)
    _assert_target_and_zeros(pruned_and_trained(0.6, optimizer=opt), 0.6)


def test_composes_with_freeze_optimizer():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoEffectWarning)
        opt = boost.FreezeOptimizer(keras.optimizers.Adam(1e-2), [[0, 1], [2, 3]], [0, 1])
        _assert_target_and_zeros(pruned_and_trained(0.6, optimizer=opt), 0.6)


def test_callback_without_pruned_layers_warns():
    x, y = data(n=32)
    model = small_model()
    model.compile(optimizer="sgd", loss=LOSS)
    with pytest.warns(NoEffectWarning, match="no PruneLowMagnitude"):
        model.fit(x, y, epochs=1, verbose=0, callbacks=[pruning.UpdatePruningMasks()])


def test_public_api_names():
    assert boost.pruning.prune_low_magnitude is pruning.prune_low_magnitude
    assert boost.pruning.strip is pruning.strip


def test_unfinished_schedule_warns():
    x, y = data(n=64)
    model = pruning.prune_low_magnitude(small_model(), 0.5, pruning.PolynomialDecay(end_step=100))
    model.compile(optimizer="sgd", loss=LOSS)
    with pytest.warns(UserWarning, match="before the schedule's end_step"):
        model.fit(x, y, epochs=1, batch_size=32, verbose=0, callbacks=[pruning.UpdatePruningMasks()])


def test_fit_prunes_without_the_callback():
    x, y = data()
    model = pruning.prune_low_magnitude(small_model(), 0.75, pruning.PolynomialDecay(end_step=12, frequency=3))
    assert isinstance(model, pruning.PrunedModel)
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss=LOSS)
    model.fit(x, y, epochs=2, batch_size=32, verbose=0)
    _assert_target_and_zeros(model, 0.75)
    assert int(keras.ops.convert_to_numpy(model.get_layer("prune_low_magnitude_d1").pruning_step)) == 16


def test_a_given_callback_is_used_once():
    calls = []

    class Counting(pruning.UpdatePruningMasks):
        def on_train_begin(self, logs=None):
            calls.append(self)
            super().on_train_begin(logs)

    x, y = data(n=64)
    model = pruning.prune_low_magnitude(small_model(), 0.5, pruning.PolynomialDecay(end_step=4, frequency=1))
    model.compile(optimizer="sgd", loss=LOSS)
    callback = Counting(total_steps=4)
    model.fit(x, y, epochs=2, batch_size=32, verbose=0, callbacks=[callback])
    assert calls == [callback]


def plain_container(pruned):
    """The pruned layers in a plain keras.Model, whose fit adds no callback."""
    return keras.Model(pruned.input, pruned.output)


@pytest.mark.parametrize("container", [lambda pruned: pruned, plain_container], ids=["pruned_model", "plain"])
def test_train_on_batch_without_the_callback_raises_before_any_update(container):
    x, y = data(n=32)
    model = container(pruning.prune_low_magnitude(small_model(), 0.5, pruning.PolynomialDecay(end_step=4)))
    model.compile(optimizer="sgd", loss=LOSS)
    before = to_numpy(model.weights)
    with pytest.raises(RuntimeError, match=r"without the boost.pruning.UpdatePruningMasks callback"):
        model.train_on_batch(x, y)
    for a, b in zip(before, to_numpy(model.weights)):
        np.testing.assert_array_equal(a, b)


def test_another_models_fit_without_the_callback_raises():
    x, y = data(n=32)
    model = plain_container(pruning.prune_low_magnitude(small_model(), 0.5, pruning.PolynomialDecay(end_step=4)))
    model.compile(optimizer="sgd", loss=LOSS)
    with pytest.raises(RuntimeError, match="UpdatePruningMasks"):
        model.fit(x, y, epochs=1, verbose=0)
