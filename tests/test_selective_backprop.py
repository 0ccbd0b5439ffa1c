"""Selective backprop: the selection math against NumPy, BoostModel's steps
against plain Keras trained on the examples chosen by hand, the window and
its rebuilds, the refusals (a loss per output, an empty window), saving, and
wrap's warning."""

import os

import keras
import numpy as np
import pytest

import keras_boost as boost
from keras_boost.algorithms.selective_backprop import example_loss_function
from keras_boost.algorithms.selective_backprop import hardest_examples
from keras_boost.algorithms.selective_backprop import kept_count
from keras_boost.algorithms.selective_backprop import per_example_loss
from keras_boost.algorithms.selective_backprop import take_examples

from conftest import requires_tensorflow


def to_np(x):
    return np.array(keras.ops.convert_to_numpy(x))


def numpy_sparse_ce(y, logits):
    logits = logits - logits.max(-1, keepdims=True)
    log_p = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    return -np.take_along_axis(log_p, y[..., None], axis=-1)[..., 0]


# --- the math -----------------------------------------------------------------


def test_hardest_examples_and_take_match_numpy():
    losses = np.random.default_rng(0).permutation(10).astype("float32")
    np.testing.assert_array_equal(to_np(hardest_examples(losses, 4)), np.argsort(-losses)[:4])
    x, y = np.arange(20).reshape(10, 2), np.arange(10)
    indices = hardest_examples(losses, 3)
    taken_x, taken_y, none = take_examples((x, y, None), indices)
    np.testing.assert_array_equal(to_np(taken_x), x[np.argsort(-losses)[:3]])
    np.testing.assert_array_equal(to_np(taken_y), y[np.argsort(-losses)[:3]])
    assert none is None
    assert [kept_count(64, k) for k in (0.5, 0.3, 0.001, 1.0)] == [32, 19, 1, 64]
    assert [int(to_np(kept_count(keras.ops.convert_to_tensor(64), k))) for k in (0.5, 0.3, 0.001)] == [32, 19, 1]


@pytest.mark.parametrize("loss", ["sparse_categorical_crossentropy",
                                  keras.losses.SparseCategoricalCrossentropy(from_logits=True)])
def test_per_example_loss_matches_numpy(loss):
    rng = np.random.default_rng(1)
    logits = rng.normal(size=(4, 5, 7)).astype("float32")  # per token: averaged per example
    y = rng.integers(0, 7, size=(4, 5))
    from_logits = isinstance(loss, keras.losses.Loss)
    y_pred = logits if from_logits else to_np(keras.ops.softmax(logits))
    got = to_np(per_example_loss(example_loss_function(loss), y, y_pred))
    np.testing.assert_allclose(got, numpy_sparse_ce(y, logits).mean(axis=1), rtol=1e-5)


def test_losses_without_a_ranking_are_refused():
    with pytest.raises(ValueError, match=r"one per output \(dict of 2\)"):
        example_loss_function({"a": "mse", "b": "mse"})
    with pytest.raises(ValueError, match="compile the model with a loss"):
        example_loss_function(None)
    with pytest.raises(ValueError, match="returned a scalar"):
        per_example_loss(lambda y, p: keras.ops.mean(p), np.zeros((2, 1)), np.zeros((2, 1)))


# --- BoostModel ---------------------------------------------------------------

CLASSES = 3


def tiny_classifier(seed=0):
    inputs = keras.Input((6,))
    hidden = keras.layers.Dense(8, activation="tanh", kernel_initializer=keras.initializers.GlorotUniform(seed))(inputs)
    outputs = keras.layers.Dense(CLASSES, kernel_initializer=keras.initializers.GlorotUniform(seed + 1))(hidden)
    return keras.Model(inputs, outputs)


def data(n=32):
    rng = np.random.default_rng(2)
    return rng.normal(size=(n, 6)).astype("float32"), rng.integers(0, CLASSES, size=(n,))


LOSS = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def boosted(model, **section):
    config = {"boost": {"mode": "manual", "selective_backprop": True}, "selective_backprop": section}
    return boost.BoostModel.from_model(model, boost_config_dict=config)


def hand_chosen_reference(x, y):
    """Plain Keras over 4 batches of 8; the last 2 train on the 4 examples
    with the highest NumPy cross-entropy at the current weights."""
    reference = tiny_classifier()
    reference.compile(optimizer=keras.optimizers.SGD(0.3), loss=LOSS)
    for step in range(4):
        xb, yb = x[8 * step:8 * step + 8], y[8 * step:8 * step + 8]
        if step >= 2:
            losses = numpy_sparse_ce(yb, reference.predict_on_batch(xb))
            chosen = np.argsort(-losses)[:4]
            xb, yb = xb[chosen], yb[chosen]
        reference.train_on_batch(xb, yb)
    return reference


def assert_same_weights(model, reference):
    for got, want in zip(model.get_weights(), reference.get_weights()):
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6)


def test_steps_equal_plain_keras_on_the_hardest_examples_chosen_by_hand():
    x, y = data()
    model = boosted(tiny_classifier(), keep=0.5, start=0.5, end=1.0)
    model.compile(optimizer=keras.optimizers.SGD(0.3), loss=LOSS)
    model.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)  # 4 steps: the last 2 select
    part = model._boost_step_parts()[0]
    assert part.selected and part.rebuilds == 1
    assert "selective backprop from 50% to 100% of training: each step trained on the hardest 50% of its batch" \
        in model.boost_summary()
    assert_same_weights(model, hand_chosen_reference(x, y))


@requires_tensorflow
@pytest.mark.parametrize("jit_compile", [True, False])
def test_a_tf_data_batch_of_unknown_size_selects_too(jit_compile):
    """`tf.data` batches trace with an unknown batch size: the count kept is
    computed when the step runs (XLA folds it into a constant)."""
    import tensorflow as tf

    x, y = data()
    model = boosted(tiny_classifier(), keep=0.5, start=0.5, end=1.0)
    model.compile(optimizer=keras.optimizers.SGD(0.3), loss=LOSS, jit_compile=jit_compile)
    model.fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(8), epochs=1, shuffle=False, verbose=0)
    assert_same_weights(model, hand_chosen_reference(x, y))


def test_outside_the_window_the_step_is_plain_and_saving_keeps_the_section(tmp_path):
    x, y = data()
    model = boosted(tiny_classifier(), start=0.5, end=0.9, total_steps=100)
    model.compile(optimizer=keras.optimizers.SGD(0.3), loss=LOSS)
    model.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)  # steps 0-3 of 100: none selects
    reference = tiny_classifier()
    reference.compile(optimizer=keras.optimizers.SGD(0.3), loss=LOSS)
    reference.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    assert_same_weights(model, reference)
    assert "never selected" in model.boost_summary()
    path = os.fspath(tmp_path / "sb.keras")
    model.save(path)
    loaded = keras.models.load_model(path)
    assert loaded.boost_config["selective_backprop"] == {"keep": 0.5, "start": 0.5, "end": 0.9, "total_steps": 100}


def test_refusals_leave_the_weights_and_wrap_warns():
    x, y = data()
    inputs = keras.Input((6,))
    two = boosted(keras.Model(inputs, [keras.layers.Dense(1)(inputs), keras.layers.Dense(1)(inputs)]))
    two.compile(optimizer="sgd", loss=["mse", "mse"])
    before = two.get_weights()
    with pytest.raises(ValueError, match="one per output"):
        two.fit(x, [y, y], batch_size=8, verbose=0)
    for got, want in zip(two.get_weights(), before):
        np.testing.assert_array_equal(got, want)
    model = boosted(tiny_classifier(), start=0.9, end=0.5)
    with pytest.raises(ValueError, match=r"start must be below selective_backprop.end.*start=0.9, end=0.5"):
        model.compile(optimizer="sgd", loss=LOSS)
    plain = tiny_classifier()
    plain.compile(optimizer=boost.wrap(keras.optimizers.SGD(0.1), "O0", {
        "boost": {"mode": "manual", "selective_backprop": True}}), loss=LOSS)
    with pytest.warns(boost.NoEffectWarning, match="selective_backprop chooses the batch"):
        plain.fit(x, y, batch_size=8, verbose=0)
