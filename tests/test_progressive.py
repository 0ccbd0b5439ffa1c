"""Progressive resizing (schedule, layer, callback), curriculum sampler, durations."""

import keras
import numpy as np
import pytest

import keras_boost as boost
from conftest import requires_tensorflow
from keras_boost.algorithms.curriculum import anneal_weight
from keras_boost.algorithms.curriculum import curriculum_probabilities
from keras_boost.algorithms.progressive_resizing import find_resize_layers
from keras_boost.algorithms.progressive_resizing import resize_scale
from keras_boost.algorithms.progressive_resizing import scheduled_size
from keras_boost.durations import parse_duration


# --- durations ---------------------------------------------------------------

@pytest.mark.parametrize("value, expected", [
    ("0.6dur", 0.6), (0.6, 0.6), (1, 1.0), ("1dur", 1.0), (" 0.25 DUR ", 0.25), ("60%", 0.6), ("0.3", 0.3),
])
def test_parse_duration(value, expected):
    assert parse_duration(value) == pytest.approx(expected)


@pytest.mark.parametrize("value", ["abc", "100ba", "2ep", "", None, True, [0.5]])
def test_parse_duration_rejects_unparseable(value):
    with pytest.raises(ValueError, match="dur") as info:
        parse_duration(value)
    assert repr(value) in str(info.value)


@pytest.mark.parametrize("value", [0, 0.0, -0.1, 1.5, "1.5dur", "0dur", float("nan")])
def test_parse_duration_rejects_out_of_range(value):
    with pytest.raises(ValueError, match=r"\(0, 1\]"):
        parse_duration(value)


# --- pure schedule math --------------------------------------------------------

def test_resize_scale_values():
    assert resize_scale(0.0) == 0.5
    assert resize_scale(0.3) == pytest.approx(0.75)
    assert resize_scale(0.6) == 1.0
    assert resize_scale(0.9) == 1.0
    assert resize_scale(1.5) == 1.0 and resize_scale(-1) == 0.5
    # A delayed start: flat, then linear.
    assert resize_scale(0.1, 0.25, 0.8, start_fraction=0.2) == 0.25
    assert resize_scale(0.5, 0.25, 0.8, start_fraction=0.2) == pytest.approx(0.625)
    scales = [resize_scale(f / 100) for f in range(101)]
    assert all(a <= b for a, b in zip(scales, scales[1:]))


def test_scheduled_size_values():
    assert scheduled_size(28, 0.5) == 16  # 14 rounds (halves up) to 16
    assert scheduled_size(28, 0.75) == 20  # 21 -> 20
    assert scheduled_size(28, 0.99) == 28
    assert scheduled_size(28, 1.0) == 28
    assert scheduled_size(28, 0.01) == 4  # at least one increment
    assert scheduled_size(30, 0.99, size_increment=8) == 30  # capped at the full size
    assert scheduled_size(224, 0.5, size_increment=8) == 112
    sizes = {scheduled_size(28, resize_scale(f / 1000)) for f in range(1001)}
    assert sizes == {16, 20, 24, 28}  # few distinct sizes: few traces


def test_anneal_weight_values():
    assert anneal_weight(0.0, 0.6) == 1.0
    assert anneal_weight(0.3, 0.6) == pytest.approx(0.5)
    assert anneal_weight(0.6, 0.6) == 0.0
    assert anneal_weight(1.0, 0.6) == 0.0


def test_curriculum_probabilities():
    losses = np.array([0.1, 2.0, 0.5, 1.0])
    easy = curriculum_probabilities(losses, 1.0, "easy", pressure=10.0)
    assert easy.sum() == pytest.approx(1.0)
    assert list(np.argsort(-easy)) == [0, 2, 3, 1]  # lowest loss most likely
    assert easy.max() / easy.min() == pytest.approx(10.0)
    hard = curriculum_probabilities(losses, 1.0, "hard", pressure=10.0)
    assert list(np.argsort(-hard)) == [1, 3, 2, 0]
    half = curriculum_probabilities(losses, 0.5, "easy", pressure=10.0)
    np.testing.assert_allclose(half, 0.5 * easy + 0.5 * 0.25)
    np.testing.assert_allclose(curriculum_probabilities(losses, 0.0), np.full(4, 0.25))
    with pytest.raises(ValueError, match="'easy', 'hard'"):
        curriculum_probabilities(losses, 1.0, "medium")


# --- bad input ---------------------------------------------------------------------

@pytest.mark.parametrize("scale", [0, 0.0, -0.5, 1.5, "half", None, True])
def test_progressive_resizing_rejects_bad_scales(scale):
    with pytest.raises(ValueError, match=r"initial_scale must be a number in \(0, 1\]") as info:
        boost.callbacks.ProgressiveResizing(initial_scale=scale)
    assert repr(scale) in str(info.value)


@pytest.mark.parametrize("duration", ["soon", "100ba", 1.5, 0])
def test_progressive_resizing_rejects_bad_durations(duration):
    with pytest.raises(ValueError, match="dur") as info:
        boost.callbacks.ProgressiveResizing(finish_fraction=duration)
    assert repr(duration) in str(info.value)


def test_progressive_resizing_rejects_bad_arguments():
    with pytest.raises(ValueError, match="below finish_fraction"):
        boost.callbacks.ProgressiveResizing(start_fraction=0.7, finish_fraction=0.6)
    with pytest.raises(ValueError, match="'resize', 'crop'"):
        boost.callbacks.ProgressiveResizing(mode="zoom")
    with pytest.raises(ValueError, match="size_increment"):
        boost.callbacks.ProgressiveResizing(size_increment=0)
    with pytest.raises(ValueError, match="'resize', 'crop'"):
        boost.layers.ProgressiveResize(mode="zoom")


def test_progressive_resizing_needs_the_layer():
    inputs = keras.Input((8, 8, 1))
    outputs = keras.layers.Dense(2)(keras.layers.GlobalAveragePooling2D()(inputs))
    model = keras.Model(inputs, outputs, name="no_resize_layer")
    model.compile("sgd", "mse")
    with pytest.raises(ValueError, match="ProgressiveResize layer in model 'no_resize_layer'"):
        model.fit(np.zeros((4, 8, 8, 1)), np.zeros((4, 2)), verbose=0,
                  callbacks=[boost.callbacks.ProgressiveResizing()])


def pooled_model():
    """16x16 images through three 2x2 valid poolings: at 4x4 the last map is 0x0."""
    inputs = keras.Input((16, 16, 1))
    x = boost.layers.ProgressiveResize()(inputs)
    x = keras.layers.BatchNormalization(name="bn")(keras.layers.MaxPooling2D(2)(x))
    x = keras.layers.MaxPooling2D(2)(keras.layers.MaxPooling2D(2)(x))
    outputs = keras.layers.Dense(2)(keras.layers.GlobalAveragePooling2D()(x))
    model = keras.Model(inputs, outputs, name="pooled")
    model.compile(keras.optimizers.SGD(0.1), "mse")
    return model


def test_progressive_resizing_names_a_first_size_the_network_cannot_train_at():
    # TensorFlow and torch fail there; JAX would train on to NaN without an error.
    model = pooled_model()
    weights = [w.copy() for w in model.get_weights()]
    resizing = boost.callbacks.ProgressiveResizing(initial_scale=0.25)
    with pytest.raises(ValueError, match=r"model 'pooled' at its first size \(4, 4\) \(initial_scale=0.25\).*"
                                         r"smallest scheduled size it trains at is \(8, 8\): use initial_scale=0.5"):
        model.fit(np.ones((8, 16, 16, 1)), np.zeros((8, 2)), batch_size=4, verbose=0, callbacks=[resizing])
    for got, want in zip(model.get_weights(), weights):  # the BN statistics included
        np.testing.assert_array_equal(got, want)
    layer = find_resize_layers(model)[0]
    assert layer.scale == 1.0 and layer.traced_sizes == []
    # The size the error names trains.
    history = model.fit(np.ones((8, 16, 16, 1)), np.zeros((8, 2)), batch_size=4, verbose=0,
                        callbacks=[boost.callbacks.ProgressiveResizing(initial_scale=0.5)])
    assert np.all(np.isfinite(history.history["loss"]))


# --- the model sees the scheduled sizes ----------------------------------------------

class SizeProbe(keras.layers.Layer):
    """Records (training, height, width) each time it runs (once per trace when compiled)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.seen = []

    def call(self, inputs, training=None):
        self.seen.append((bool(training), int(inputs.shape[1]), int(inputs.shape[2])))
        return inputs


def probe_model(mode="resize"):
    keras.utils.set_random_seed(0)
    inputs = keras.Input((28, 28, 1))
    x = boost.layers.ProgressiveResize(mode=mode, seed=3)(inputs)
    probe = SizeProbe()
    x = probe(x)
    x = keras.layers.Conv2D(4, 3, padding="same", activation="relu")(x)
    outputs = keras.layers.Dense(3)(keras.layers.GlobalAveragePooling2D()(x))
    model = keras.Model(inputs, outputs)
    model.compile(keras.optimizers.SGD(0.01),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model, probe


def data(n=64):
    rng = np.random.default_rng(0)
    return rng.random((n, 28, 28, 1), dtype=np.float32), rng.integers(0, 3, n).astype("int32")


# 64 examples, batch 16, 3 epochs: 12 steps; scale 0.5 -> 1 over the first 60%.
# step: 0 1 2 3 4 5 6 7 8..11 -> size 16 16 16 20 20 24 24 28 28 (see scheduled_size).
EXPECTED_CHANGES = [(0, (16, 16)), (3, (20, 20)), (5, (24, 24)), (7, (28, 28))]
EXPECTED_PER_STEP = [16, 16, 16, 20, 20, 24, 24, 28, 28, 28, 28, 28]


def expected_per_step(steps=12):
    return [scheduled_size(28, resize_scale(s / steps)) for s in range(steps)]


def test_expected_schedule_is_the_schedule_math():
    assert expected_per_step() == EXPECTED_PER_STEP


@pytest.mark.parametrize("mode", ["resize", "crop"])
def test_model_sees_scheduled_sizes_eagerly(mode):
    model, probe = probe_model(mode)
    model.run_eagerly = True
    x, y = data()
    resizing = boost.callbacks.ProgressiveResizing(initial_scale=0.5, finish_fraction="0.6dur", mode=mode)
    model.fit(x, y, batch_size=16, epochs=3, shuffle=False, verbose=0, callbacks=[resizing])
    steps = [h for training, h, w in probe.seen if training]
    assert steps[-12:] == EXPECTED_PER_STEP
    assert set(steps[:-12]) == {16}  # the check that the first size trains (traced, then run once)
    assert all(h == w for _, h, w in probe.seen)
    assert resizing.sizes == EXPECTED_CHANGES


@pytest.mark.parametrize("mode", ["resize", "crop"])
def test_model_sees_scheduled_sizes_compiled(mode):
    """Compiled (TF/JAX; eager on torch): each new size is traced (no stale function)."""
    model, probe = probe_model(mode)
    x, y = data()
    resizing = boost.callbacks.ProgressiveResizing(initial_scale=0.5, finish_fraction=0.6, mode=mode)
    history = model.fit(x, y, batch_size=16, epochs=3, shuffle=False, verbose=0, callbacks=[resizing])
    assert np.all(np.isfinite(history.history["loss"]))
    sizes = [h for training, h, _ in probe.seen if training]
    distinct = [s for i, s in enumerate(sizes) if i == 0 or s != sizes[i - 1]]
    assert distinct == [16, 20, 24, 28]
    if keras.backend.backend() == "torch":
        assert sizes[-12:] == EXPECTED_PER_STEP
    assert resizing.sizes == EXPECTED_CHANGES
    assert resizing.compiles == 4  # one (re)build per distinct size
    # Inference sees full-size images, and the layer is back to the identity.
    probe.seen.clear()
    model.evaluate(x, y, batch_size=32, verbose=0)
    model.predict(x[:4], verbose=0)
    assert probe.seen and all(h == 28 and not training for training, h, _ in probe.seen)
    layer = find_resize_layers(model)[0]
    assert layer.scale == 1.0


@requires_tensorflow
def test_progressive_resizing_with_tf_data():
    import tensorflow as tf  # tf.data feeds any backend
    model, probe = probe_model()
    model.run_eagerly = keras.backend.backend() != "tensorflow"  # exact per-step sizes off TF
    x, y = data()
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(16)
    resizing = boost.callbacks.ProgressiveResizing(initial_scale=0.5, finish_fraction=0.6)
    model.fit(dataset, epochs=3, verbose=0, shuffle=False, callbacks=[resizing])
    assert resizing.sizes == EXPECTED_CHANGES
    sizes = [h for training, h, _ in probe.seen if training]
    assert [s for i, s in enumerate(sizes) if i == 0 or s != sizes[i - 1]] == [16, 20, 24, 28]


def test_progressive_resizing_unknown_steps_uses_epochs():
    """Without a known number of steps per epoch the schedule advances per epoch."""
    model, _ = probe_model()
    resizing = boost.callbacks.ProgressiveResizing(initial_scale=0.5, finish_fraction=0.5)
    resizing.set_model(model)
    resizing.set_params({"epochs": 4, "steps": None, "verbose": 0})
    resizing.on_train_begin()
    for epoch in range(4):
        resizing.on_epoch_begin(epoch)
        resizing.on_train_batch_begin(0)  # no effect: per-epoch schedule
    resizing.on_train_end()
    # Epoch fractions 0, 0.25, 0.5, 0.75 -> scales 0.5, 0.75, 1, 1.
    assert resizing.sizes == [(0, (16, 16)), (1, (20, 20)), (2, (28, 28))]


def test_progressive_resize_layer_config_round_trip():
    layer = boost.layers.ProgressiveResize(mode="crop", size_increment=8, seed=1, name="grow")
    clone = boost.layers.ProgressiveResize.from_config(layer.get_config())
    assert clone.get_config() == layer.get_config()
    callback = boost.callbacks.ProgressiveResizing(initial_scale=0.25, finish_fraction="0.8dur")
    again = boost.callbacks.ProgressiveResizing.from_config(callback.get_config())
    assert again.get_config() == callback.get_config() and again.finish_fraction == 0.8
    # Saved models reload with the layer (as the identity).
    assert keras.saving.get_registered_name(boost.layers.ProgressiveResize) == "keras_boost>ProgressiveResize"


def test_model_with_layer_saves_and_loads(tmp_path):
    inputs = keras.Input((28, 28, 1))
    x = boost.layers.ProgressiveResize()(inputs)
    outputs = keras.layers.Dense(2)(keras.layers.GlobalAveragePooling2D()(x))
    model = keras.Model(inputs, outputs)
    model.save(tmp_path / "m.keras")
    loaded = keras.saving.load_model(tmp_path / "m.keras")
    assert isinstance(loaded.layers[1], boost.layers.ProgressiveResize)
    x, _ = data(4)
    np.testing.assert_allclose(loaded.predict(x, verbose=0), model.predict(x, verbose=0), rtol=1e-5)


# --- curriculum sampler ---------------------------------------------------------------

def test_curriculum_sampler_weights_follow_schedule_and_end_uniform():
    x, y = data(40)
    difficulty = np.arange(40, dtype=np.float64)  # example i has loss i
    sampler = boost.callbacks.CurriculumSampler(x, y, batch_size=8, anneal="0.5dur", pressure=20.0,
                                                difficulty=difficulty, seed=0)
    for fraction, weight in [(0.0, 1.0), (0.25, 0.5), (0.5, 0.0), (0.9, 0.0)]:
        sampler.fraction = fraction
        assert sampler.weight() == pytest.approx(weight)
        p = sampler.probabilities()
        assert p.sum() == pytest.approx(1.0)
        if weight == 0.0:
            np.testing.assert_allclose(p, np.full(40, 1 / 40))
        else:
            assert np.all(np.diff(p) < 0)  # easy (low loss) first
            expected = curriculum_probabilities(difficulty, weight, "easy", 20.0)
            np.testing.assert_allclose(p, expected)
    sampler.fraction = 0.0
    np.testing.assert_allclose(sampler.probabilities().max() / sampler.probabilities().min(), 20.0)
    # An epoch at weight 1 draws easy examples far more often than hard ones.
    sampler.on_epoch_begin()
    counts = np.bincount(sampler._plan, minlength=40)
    assert counts[:10].sum() > 3 * counts[30:].sum()
    # Once annealed, each epoch is a permutation: every example exactly once.
    sampler.fraction = 0.6
    sampler.on_epoch_begin()
    assert sorted(sampler._plan) == list(range(40))
    assert len(sampler) == 5 and sampler[0][0].shape == (8, 28, 28, 1)


def test_curriculum_sampler_fits_numpy_on_every_backend():
    keras.utils.set_random_seed(0)
    x, y = data(48)
    inputs = keras.Input((28, 28, 1))
    outputs = keras.layers.Dense(3)(keras.layers.GlobalAveragePooling2D()(inputs))
    model = keras.Model(inputs, outputs)
    model.compile(keras.optimizers.SGD(0.1), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    sampler = boost.callbacks.CurriculumSampler(x, y, batch_size=16, anneal=0.5, mode="hard", seed=1)
    history = model.fit(sampler, epochs=4, verbose=0, callbacks=[sampler.callback()])
    assert len(history.history["loss"]) == 4
    assert [e for e, _ in sampler.weights] == [0, 1, 2, 3]
    np.testing.assert_allclose([w for _, w in sampler.weights], [1.0, 0.5, 0.0, 0.0])
    assert np.any(sampler.losses > 0)  # scored by the model's loss
    assert sorted(sampler._plan) == list(range(48))  # last epoch uniform


def test_curriculum_sampler_rejects_bad_input():
    x, y = data(8)
    with pytest.raises(ValueError, match="dur"):
        boost.callbacks.CurriculumSampler(x, y, anneal="later")
    with pytest.raises(ValueError, match="'easy', 'hard'"):
        boost.callbacks.CurriculumSampler(x, y, mode="medium")
    with pytest.raises(ValueError, match="same, non-zero number"):
        boost.callbacks.CurriculumSampler(x, y[:4])
    with pytest.raises(ValueError, match="one score per example"):
        boost.callbacks.CurriculumSampler(x, y, difficulty=[1.0, 2.0])
    sampler = boost.callbacks.CurriculumSampler(x, y, batch_size=4, anneal=0.3, seed=2)
    again = boost.callbacks.CurriculumSampler.from_config(sampler.get_config(), x=x, y=y)
    assert again.get_config() == sampler.get_config()
