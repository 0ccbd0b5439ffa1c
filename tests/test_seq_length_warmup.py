"""Sequence-length warm-up: the schedule against a direct NumPy count, the
truncation, BoostModel's steps against plain Keras fitted on the batches cut
by hand, the fixed-length and non-sequence cases, resume over fit calls,
saving, the config checks and the wrap warning."""

import math
import os

import keras
import numpy as np
import pytest

import keras_boost as boost
from keras_boost.algorithms.seq_length_warmup import scheduled_lengths
from keras_boost.algorithms.seq_length_warmup import sequence_axis_length
from keras_boost.algorithms.seq_length_warmup import sequence_length
from keras_boost.algorithms.seq_length_warmup import truncate_batch


def to_np(x):
    return np.array(keras.ops.convert_to_numpy(x))


# --- the schedule -------------------------------------------------------------


def reference_length(fraction, full, min_length, step_size, duration):
    """The length by counting: the lengths min, min + s, ... (< full), each
    for an equal share of the warm-up, then full."""
    if min_length >= full:
        return full
    lengths = list(range(min_length, full, step_size))
    f = float(np.clip(fraction, 0.0, 1.0))
    if f >= duration:
        return full
    return lengths[int(np.floor(f / duration * len(lengths)))]


@pytest.mark.parametrize("full, min_length, step_size, duration",
                         [(64, 8, 8, 0.3), (64, 16, 16, 0.5), (60, 16, 16, 0.3), (10, 3, 4, 1.0), (8, 8, 8, 0.3)])
def test_schedule_matches_counting(full, min_length, step_size, duration):
    for fraction in np.linspace(-0.1, 1.1, 241):
        assert sequence_length(fraction, full, min_length, step_size, duration) == \
            reference_length(fraction, full, min_length, step_size, duration), fraction
    seen = sorted({sequence_length(f, full, min_length, step_size, duration) for f in np.linspace(0, 1, 4001)})
    assert seen == scheduled_lengths(full, min_length, step_size, duration)


def test_schedule_examples():
    assert scheduled_lengths(64, 16, 16) == [16, 32, 48, 64]
    assert scheduled_lengths(60, 16, 16) == [16, 32, 48, 60]
    assert [sequence_length(f, 64, 16, 16, 0.3) for f in (0.0, 0.099, 0.1, 0.2, 0.3)] == [16, 16, 32, 48, 64]
    # Each length gets an equal share of the warm-up.
    steps = [sequence_length(s / 300, 64, 8, 8, 0.3) for s in range(300)]
    assert [steps.count(n) for n in range(8, 64, 8)] == [math.ceil(90 / 7)] * 6 + [90 - 6 * 13]


# --- the truncation -----------------------------------------------------------


def test_truncation_cuts_sequence_tensors_only():
    x = {"token_ids": np.arange(24, dtype="int32").reshape(2, 12),
         "padding_mask": np.ones((2, 12), "bool"), "style": np.zeros((2, 3), "float32")}
    y, weights = np.arange(24).reshape(2, 12), np.ones((2, 12), "float32")
    (x2, y2, w2), full = truncate_batch((x, y, weights), 5)
    assert full == 12
    np.testing.assert_array_equal(to_np(x2["token_ids"]), x["token_ids"][:, :5])
    assert to_np(x2["padding_mask"]).shape == (2, 5) and to_np(w2).shape == (2, 5)
    np.testing.assert_array_equal(to_np(y2), y[:, :5])
    assert to_np(x2["style"]).shape == (2, 3)
    # Per-example labels and a None pass unchanged; at or above the length nothing is cut.
    (x3, labels, none), _ = truncate_batch((x["token_ids"], np.zeros((2, 1)), None), 5)
    assert to_np(labels).shape == (2, 1) and none is None and to_np(x3).shape == (2, 5)
    assert truncate_batch((x, y, None), 12)[0][1] is y


def test_truncation_finds_no_sequence_in_images_and_refuses_two_lengths():
    images = np.zeros((2, 8, 8, 3), "float32")
    assert sequence_axis_length(images) is None
    batch, full = truncate_batch((images, None, None), 4)
    assert full is None and batch[0] is images
    with pytest.raises(ValueError, match=r"lengths \[5, 7\]"):
        sequence_axis_length([np.zeros((2, 5), "int32"), np.zeros((2, 7), "int32")])


# --- BoostModel ---------------------------------------------------------------

FULL, VOCAB = 8, 11


def tiny_lm(seed=0, length=None):
    inputs = keras.Input((length,), dtype="int32")
    x = keras.layers.Embedding(VOCAB, 6, embeddings_initializer=keras.initializers.RandomNormal(seed=seed))(inputs)
    x = keras.layers.Conv1D(6, 3, padding="causal", kernel_initializer=keras.initializers.GlorotUniform(seed + 1))(x)
    outputs = keras.layers.Dense(VOCAB, kernel_initializer=keras.initializers.GlorotUniform(seed + 2))(x)
    return keras.Model(inputs, outputs)


def tokens(n=32, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, VOCAB, size=(n, FULL)).astype("int32")
    return x, np.roll(x, -1, axis=1)


LOSS = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
WARMUP = {"min_length": 4, "step_size": 2, "duration": 0.5}


def boosted(model, **section):
    config = {"boost": {"mode": "manual", "seq_length_warmup": True}, "seq_length_warmup": {**WARMUP, **section}}
    return boost.BoostModel.from_model(model, boost_config_dict=config)


def test_steps_equal_plain_keras_on_batches_cut_by_hand():
    x, y = tokens()
    model = boosted(tiny_lm())
    model.compile(optimizer=keras.optimizers.SGD(0.5), loss=LOSS)
    model.fit(x, y, batch_size=4, epochs=1, shuffle=False, verbose=0)  # 8 steps, warm-up over 4
    part = model._boost_step_parts()[0]
    assert part.lengths == [(0, 4), (2, 6), (4, 8)] and part.full_length == FULL and part.rebuilds == 2
    assert "sequence-length warm-up 4 -> 8 tokens over the first 50% of training (3 lengths" \
        in model.boost_summary()

    reference = tiny_lm()
    reference.compile(optimizer=keras.optimizers.SGD(0.5), loss=LOSS)
    for start, stop, length in [(0, 8, 4), (8, 16, 6), (16, 32, 8)]:
        reference.fit(x[start:stop, :length], y[start:stop, :length], batch_size=4, shuffle=False, verbose=0)
    for got, want in zip(model.get_weights(), reference.get_weights()):
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6)
    # Evaluation sees the full sequences, and a new fit starts afresh.
    assert model.evaluate(x, y, verbose=0) == pytest.approx(reference.evaluate(x, y, verbose=0), rel=1e-5)
    model.fit(x, y, batch_size=4, epochs=1, verbose=0)
    assert part.lengths[-3:] == [(0, 4), (2, 6), (4, 8)]


def test_total_steps_warms_up_once_across_fit_calls_and_survives_saving(tmp_path):
    x, y = tokens()
    model = boosted(tiny_lm(), total_steps=16)
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss=LOSS)
    model.fit(x, y, batch_size=4, epochs=1, verbose=0)  # steps 0-7 of 16: 4, 6
    assert model._boost_step_parts()[0].lengths == [(0, 4), (4, 6)]
    path = os.fspath(tmp_path / "lm.keras")
    model.save(path)
    loaded = keras.models.load_model(path)
    assert loaded.boost_config["seq_length_warmup"]["total_steps"] == 16
    loaded.fit(x, y, batch_size=4, epochs=1, verbose=0)  # steps 8-15: full length
    assert loaded._boost_step_parts()[0].lengths == [(8, 8)]


def test_fixed_length_input_is_refused_before_training():
    x, y = tokens()
    model = boosted(tiny_lm(length=FULL))
    model.compile(optimizer="sgd", loss=LOSS)
    before = model.get_weights()
    with pytest.raises(ValueError, match=r"fixed shape \(None, 8\).*keras.Input\(shape=\(None,\)"):
        model.fit(x, y, batch_size=4, verbose=0)
    for got, want in zip(model.get_weights(), before):
        np.testing.assert_array_equal(got, want)
    # A min_length at the full length truncates nothing and trains.
    model = boosted(tiny_lm(length=FULL), min_length=FULL)
    model.compile(optimizer="sgd", loss=LOSS)
    model.fit(x, y, batch_size=4, verbose=0)
    assert "nothing truncated" in model.boost_summary()


def test_model_without_token_input_says_nothing_was_truncated():
    inputs = keras.Input((5,))
    model = boosted(keras.Model(inputs, keras.layers.Dense(1)(inputs)))
    model.compile(optimizer="sgd", loss="mse")
    model.fit(np.ones((8, 5), "float32"), np.ones((8, 1), "float32"), verbose=0)
    assert "found no integer (batch, length) input with a length known" in model.boost_summary()


def test_config_checks_and_wrap_warns():
    with pytest.raises(ValueError, match=r"seq_length_warmup.min_length must be >= 1, got 0"):
        boost.AutoBoost("O0", {"seq_length_warmup": {"min_length": 0}})
    with pytest.raises(ValueError, match=r"seq_length_warmup.duration must be in \(0.0, 1.0\]"):
        boost.AutoBoost("O0", {"seq_length_warmup": {"duration": 0.0}})
    assert not boost.AutoBoost("O1").config["boost"]["seq_length_warmup"]
    model = tiny_lm()
    optimizer = boost.wrap(keras.optimizers.SGD(0.1), "O0", {"boost": {"mode": "manual", "seq_length_warmup": True}})
    model.compile(optimizer=optimizer, loss=LOSS)
    x, y = tokens(8)
    with pytest.warns(boost.NoEffectWarning, match="seq_length_warmup chooses the batch BoostModel"):
        model.fit(x, y, batch_size=4, verbose=0)
