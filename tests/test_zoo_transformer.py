"""The `transformer` workload: keras.io's text transformer on a generated token task.

`keras_boost.datasets.token_task` is deterministic per seed, its labels are
the class of the first of two keywords (plus the asked label noise), its
padding trails; `text_transformer` is identical for equal seeds, trains
every weight, saves and reloads; the workload is registered and trains
through `training.run_once`, the same run for the same seed.
"""

import dataclasses
import os
import warnings

import keras
import numpy as np
import pytest

import keras_boost as boost
from keras_boost.bench import catalog
from keras_boost.bench import results
from keras_boost.bench import training
from keras_boost.bench import zoo
from keras_boost.bench.zoo import transformer
from keras_boost.datasets import token_task

SMALL = dict(num_train=300, num_test=100, sequence_length=16, vocabulary_size=60, num_classes=3,
             keywords_per_class=4)
MODEL = dict(vocabulary_size=60, sequence_length=16, num_classes=3, embed_dim=8, num_heads=2, ff_dim=8)


def _values(model):
    return {v.path: np.array(keras.ops.convert_to_numpy(v)) for v in model.weights}


# --- the task ---------------------------------------------------------------------


def test_token_task_is_deterministic_per_seed_and_differs_across_seeds():
    (x, y), (x_test, y_test) = token_task(seed=3, **SMALL)
    (x2, y2), (x2_test, y2_test) = token_task(seed=3, **SMALL)
    for a, b in ((x, x2), (y, y2), (x_test, x2_test), (y_test, y2_test)):
        assert np.array_equal(a, b)
    (x3, y3), _ = token_task(seed=4, **SMALL)
    assert not np.array_equal(x, x3) and not np.array_equal(y, y3)


def test_token_task_shapes_dtypes_labels_and_trailing_padding():
    (x, y), (x_test, y_test) = token_task(seed=0, min_length=5, **SMALL)
    assert x.shape == (300, 16) and x_test.shape == (100, 16)
    assert y.shape == (300,) and y_test.shape == (100,)
    assert {a.dtype for a in (x, y, x_test, y_test)} == {np.dtype("int32")}
    assert x.min() >= 0 and x.max() < 60
    assert set(np.unique(np.concatenate([y, y_test]))) == {0, 1, 2}
    lengths = (x != 0).sum(axis=1)
    assert lengths.min() >= 5 and lengths.max() <= 16
    # Padding only at the end: every nonzero token comes before every 0.
    assert np.array_equal(x != 0, np.arange(16)[None, :] < lengths[:, None])
    (unpadded, _), _ = token_task(seed=0, min_length=16, **SMALL)
    assert (unpadded != 0).all()


def test_the_label_is_the_class_of_the_first_keyword():
    # Two classes of one keyword each: the two keywords are the tokens
    # present in every sequence, once each (noise tokens are never keywords).
    (x, y), _ = token_task(seed=0, num_train=500, num_test=10, sequence_length=12, vocabulary_size=200,
                           num_classes=2, keywords_per_class=1, label_noise=0.0)
    everywhere = [t for t in np.unique(x) if t and ((x == t).sum(axis=1) == 1).all()]
    assert len(everywhere) == 2
    first = np.where(np.argmax(x == everywhere[0], axis=1) < np.argmax(x == everywhere[1], axis=1),
                     everywhere[0], everywhere[1])
    label_of = {token: int(y[first == token][0]) for token in everywhere}
    assert sorted(label_of.values()) == [0, 1]
    assert np.array_equal(y, [label_of[t] for t in first])
    # Both orders occur about equally: the order, not the set, gives the label.
    assert 0.4 < np.mean(first == everywhere[0]) < 0.6


def test_label_noise_changes_the_asked_fraction_of_labels_only():
    (x, y), (x_test, y_test) = token_task(seed=1, num_train=3000, num_test=1000, label_noise=0.0)
    (x_noisy, y_noisy), (x_test_noisy, y_test_noisy) = token_task(seed=1, num_train=3000, num_test=1000,
                                                                  label_noise=0.2)
    assert np.array_equal(x, x_noisy) and np.array_equal(x_test, x_test_noisy)
    changed = np.concatenate([y != y_noisy, y_test != y_test_noisy])
    assert 0.18 < changed.mean() < 0.22


@pytest.mark.parametrize("kwargs, message", [
    (dict(num_train=0), "num_train must be an int >= 1, got 0"),
    (dict(num_test=2.5), "num_test must be an int >= 1, got 2.5"),
    (dict(sequence_length=1), "sequence_length must be an int >= 2, got 1"),
    (dict(num_classes=1), "num_classes must be an int >= 2, got 1"),
    (dict(keywords_per_class=True), "keywords_per_class must be an int >= 1, got True"),
    (dict(vocabulary_size=65, num_classes=4, keywords_per_class=16), "vocabulary_size must be an int >= 66, got 65"),
    (dict(sequence_length=8, min_length=9), r"min_length must be an int in \[2, 8\], got 9"),
    (dict(label_noise=1.0), r"label_noise must be a fraction in \[0, 1\), got 1.0"),
])
def test_token_task_names_the_bad_argument(kwargs, message):
    with pytest.raises(ValueError, match=message):
        token_task(**kwargs)


# --- the model --------------------------------------------------------------------


def test_the_model_is_keras_ios_shape_and_identical_for_equal_seeds():
    model = transformer.text_transformer(**MODEL, seed=0)
    assert model.output.shape == (None, 3)
    names = [layer.name for layer in model.layers]
    assert names[:2] == ["tokens", "embedding"] and names[-5:] == [
        "pool", "head_dropout1", "head_dense", "head_dropout2", "logits"]
    assert isinstance(model.get_layer("block1_attention"), keras.layers.MultiHeadAttention)
    same, other = transformer.text_transformer(**MODEL, seed=0), transformer.text_transformer(**MODEL, seed=1)
    first = _values(model)
    assert all(np.array_equal(first[p], v) for p, v in _values(same).items())
    random = [p for p in first if p.endswith(("kernel", "embeddings"))]  # the others start at 0 or 1
    assert len(random) == 10
    assert not any(np.array_equal(first[p], _values(other)[p]) for p in random)
    # Keras' seeded MultiHeadAttention would start query, key and value equal.
    query, key, value = (first[f"block1_attention/{role}/kernel"] for role in ("query", "key", "value"))
    assert not np.allclose(query, key) and not np.allclose(key, value)
    assert len(transformer.text_transformer(**MODEL, num_blocks=2).get_layer("block2_ffn_norm").weights) == 2


@pytest.mark.parametrize("kwargs, message", [
    (dict(num_classes=1), "num_classes must be an int >= 2, got 1"),
    (dict(num_heads=0), "num_heads must be an int >= 1, got 0"),
    (dict(embed_dim="32"), "embed_dim must be an int >= 1, got '32'"),
    (dict(dropout=1.0), r"dropout must be a rate in \[0, 1\), got 1.0"),
])
def test_text_transformer_names_the_bad_argument(kwargs, message):
    with pytest.raises(ValueError, match=message):
        transformer.text_transformer(**{**MODEL, **kwargs})


def test_the_model_trains_every_weight_and_reloads_from_a_keras_file(tmp_path):
    (x, y), (x_test, _) = token_task(seed=0, **SMALL)
    keras.utils.set_random_seed(0)
    model = transformer.text_transformer(**MODEL, seed=0)
    model.compile(optimizer=keras.optimizers.AdamW(1e-2),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    before = _values(model)
    history = model.fit(x[:128], y[:128], batch_size=32, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    after = _values(model)
    unchanged = [v.path for v in model.trainable_weights if np.array_equal(before[v.path], after[v.path])]
    # The key projection's bias adds the same logit to every key of a
    # query: softmax cancels it, its gradient is 0 (up to rounding).
    assert set(unchanged) <= {"block1_attention/key/bias"}

    path = os.path.join(tmp_path, "transformer.keras")
    model.save(path)
    reloaded = keras.saving.load_model(path)
    assert isinstance(reloaded.get_layer("embedding"), transformer.TokenAndPositionEmbedding)
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(model.predict(x_test, verbose=0)),
                                  keras.ops.convert_to_numpy(reloaded.predict(x_test, verbose=0)))


def test_the_embedding_layer_round_trips_its_config():
    layer = transformer.TokenAndPositionEmbedding(16, 60, 8, token_initializer=keras.initializers.Zeros(),
                                                  name="embedding")
    clone = transformer.TokenAndPositionEmbedding.from_config(layer.get_config())
    assert (clone.sequence_length, clone.vocabulary_size, clone.embed_dim) == (16, 60, 8)
    assert isinstance(clone.token_initializer, keras.initializers.Zeros)
    assert tuple(clone(np.zeros((2, 10), "int32")).shape) == (2, 10, 8)


# --- the workload -----------------------------------------------------------------


def _tiny(workload):
    """The workload on 256 / 128 sequences, 2 epochs (4 steps each; the warmup is then 1 epoch)."""
    (x, y), (x_test, y_test) = workload.data()
    return dataclasses.replace(workload.with_epochs(2),
                               data=lambda: ((x[:256], y[:256]), (x_test[:128], y_test[:128])))


def test_the_workload_is_registered_with_its_recipe():
    workload = catalog.WORKLOADS["transformer"]()
    assert zoo.WORKLOADS["transformer"] is transformer.transformer_workload
    assert (workload.name, workload.optimizer, workload.epochs, workload.batch_size) == (
        "transformer", "adamw", 10, 64)
    assert workload.learning_rate == 3e-3 and workload.warmup_epochs == 3.0 and workload.target == 0.88
    (x, y), (x_test, y_test) = workload.data()
    assert x.shape == (8000, 64) and x_test.shape == (2000, 64)
    model = workload.build(0)
    assert model.input.shape == (None, 64) and model.output.shape == (None, 4)
    assert model.count_params() == 45448


def test_the_workload_trains_through_run_once_the_same_for_a_seed():
    workload = _tiny(transformer.transformer_workload())
    built = []

    def build(seed):
        built.append(transformer.transformer_workload().build(seed))
        return built[-1]

    workload = dataclasses.replace(workload, build=build)
    record = training.run_once(workload, "baseline", "float32", seed=0)
    assert (record["epochs"], record["steps"], record["warmup_steps"]) == (2, 8, 4)
    results.validate_result({"version": results.RESULT_VERSION, "workload": results.workload_record(workload),
                             "environment": {}, "runs": [record]})
    again = training.run_once(workload, "baseline", "float32", seed=0)
    assert [a for _, a in again["curve"]] == [a for _, a in record["curve"]]
    first, second = _values(built[0]), _values(built[1])
    assert all(np.array_equal(first[p], second[p]) for p in first)  # the same trained weights
    assert not np.array_equal(first["logits/kernel"], _values(workload.build(0))["logits/kernel"])


def test_the_workload_trains_at_o1_and_in_mixed_bfloat16():
    workload = _tiny(transformer.transformer_workload())
    with warnings.catch_warnings():
        # The level's LessBN and fused BN find no BatchNormalization here.
        warnings.simplefilter("ignore", boost.NoEffectWarning)
        record = training.run_once(workload, "O1", "float32", seed=0)
    assert "skipped" not in record and record["steps"] == 8
    assert record["freeze_depths"] is not None  # O1's gradient freezing planned this model
    record = training.run_once(workload, "baseline", "mixed_bfloat16", seed=0)
    assert 0.0 <= record["final_accuracy"] <= 1.0
