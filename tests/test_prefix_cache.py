"""Prefix caching (issue 30): the split composes back to the model, the
gradients through cached features are the full model's, and training the
suffix on cached features is `model.fit`, step for step."""

import os
import warnings

import keras
import numpy as np
import pytest

from conftest import subclassed_dense_net
from conftest import to_numpy
from keras_boost.algorithms.prefix_cache import CachedSuffix
from keras_boost.algorithms.prefix_cache import fit_with_cached_prefix
from keras_boost.algorithms.prefix_cache import split_frozen_prefix
from keras_boost.algorithms.prefix_cache import uncacheable_reason
from keras_boost.errors import NoEffectWarning

BACKEND = keras.backend.backend()
INIT = keras.initializers.GlorotUniform(seed=1)


# --- models -------------------------------------------------------------------


def conv_base(name="base"):
    """A small keras.applications-like base: conv, BN, relu, a residual
    `h + h2`, conv, BN, pooling."""
    inputs = keras.Input((8, 8, 3))
    h = keras.layers.Conv2D(4, 3, padding="same", kernel_initializer=INIT, name="c1")(inputs)
    h = keras.layers.BatchNormalization(name="bn1")(h)
    h = keras.layers.ReLU(name="r1")(h)
    h = h + keras.layers.Conv2D(4, 3, padding="same", kernel_initializer=INIT, name="c2")(h)
    h = keras.layers.Conv2D(6, 3, padding="same", kernel_initializer=INIT, name="c3")(h)
    h = keras.layers.BatchNormalization(name="bn3")(h)
    h = keras.layers.GlobalAveragePooling2D(name="gap")(h)
    return keras.Model(inputs, h, name=name)


def _randomize_bn(model):
    """Moving statistics away from 0/1, so that inference BN is not the identity."""
    rng = np.random.default_rng(3)
    for layer in _all_layers(model):
        if isinstance(layer, keras.layers.BatchNormalization):
            layer.moving_mean.assign(rng.normal(size=layer.moving_mean.shape).astype("float32"))
            layer.moving_variance.assign(rng.uniform(0.5, 2, size=layer.moving_variance.shape).astype("float32"))


def _all_layers(model):
    for layer in model.layers:
        yield layer
        if isinstance(layer, keras.Model):
            yield from _all_layers(layer)


def nested_frozen():
    """keras-io's transfer learning: a frozen base called with training=False, a Dense head."""
    base = conv_base()
    base.trainable = False
    inputs = keras.Input((8, 8, 3), name="image")
    outputs = keras.layers.Dense(5, kernel_initializer=INIT, name="head")(base(inputs, training=False))
    model = keras.Model(inputs, outputs, name="nested_frozen")
    _randomize_bn(model)
    return model


def nested_partly_unfrozen():
    """keras-io's phase 2: the base's top conv and BN unfrozen."""
    model = nested_frozen()
    base = model.get_layer("base")
    base.trainable = True
    for layer in base.layers[:-3]:
        layer.trainable = False
    return model


def flat_first_frozen():
    inputs = keras.Input((6,), name="x")
    h = keras.layers.Dense(8, activation="relu", kernel_initializer=INIT, name="f1", trainable=False)(inputs)
    h = keras.layers.Dense(8, activation="tanh", kernel_initializer=INIT, name="f2", trainable=False)(h)
    h = keras.layers.Dense(8, activation="relu", kernel_initializer=INIT, name="t1")(h)
    outputs = keras.layers.Dense(3, kernel_initializer=INIT, name="t2")(h)
    return keras.Model(inputs, outputs, name="flat_first_frozen")


def frozen_base_bn_dropout_head():
    base = conv_base()
    base.trainable = False
    inputs = keras.Input((8, 8, 3))
    h = base(inputs, training=False)
    h = keras.layers.Dense(8, kernel_initializer=INIT, name="hd")(h)
    h = keras.layers.BatchNormalization(name="head_bn")(h)
    h = keras.layers.Dropout(0.3, seed=7, name="head_drop")(h)
    outputs = keras.layers.Dense(5, kernel_initializer=INIT, name="head")(h)
    model = keras.Model(inputs, outputs, name="bn_dropout_head")
    _randomize_bn(model)
    return model


def residual_input_frozen():
    """`h + x` inside the frozen part, with the input itself."""
    inputs = keras.Input((6,), name="x")
    h = keras.layers.Dense(6, activation="tanh", kernel_initializer=INIT, name="f1", trainable=False)(inputs)
    h = h + inputs
    h = keras.layers.LayerNormalization(name="ln", trainable=False)(h)
    outputs = keras.layers.Dense(3, kernel_initializer=INIT, name="t1")(h)
    return keras.Model(inputs, outputs, name="residual_input")


def sequential_first_frozen():
    model = keras.Sequential([
        keras.Input((6,)),
        keras.layers.Dense(8, activation="relu", kernel_initializer=INIT, name="s1", trainable=False),
        keras.layers.Dense(3, kernel_initializer=INIT, name="s2"),
    ], name="sequential")
    return model


def interleaved():
    """A sub-model whose trainable layers interleave, by depth, with the
    outer model's: the flattened suffix's natural variable order
    (i1, i2, o1, i3, o2) is not the model's (o1, i1, i2, i3, o2)."""
    base_in = keras.Input((6,))
    h = keras.layers.Dense(6, kernel_initializer=INIT, trainable=False, name="f")(base_in)
    for name in ("i1", "i2", "i3"):
        h = keras.layers.Dense(6, activation="tanh", kernel_initializer=INIT, name=name)(h)
    inner = keras.Model(base_in, h, name="inner")
    inputs = keras.Input((6,))
    o = keras.layers.Dense(6, activation="tanh", kernel_initializer=INIT, name="o1")(inputs)
    o = keras.layers.Dense(6, kernel_initializer=INIT, name="o2")(o)
    return keras.Model(inputs, keras.layers.Add(name="sum")([inner(inputs), o]), name="interleaved")


MODELS = {
    "interleaved": (interleaved, (6,), 6),
    "nested_frozen": (nested_frozen, (8, 8, 3), 5),
    "nested_partly_unfrozen": (nested_partly_unfrozen, (8, 8, 3), 5),
    "flat_first_frozen": (flat_first_frozen, (6,), 3),
    "bn_dropout_head": (frozen_base_bn_dropout_head, (8, 8, 3), 5),
    "residual_input": (residual_input_frozen, (6,), 3),
    "sequential": (sequential_first_frozen, (6,), 3),
}


def data(shape, outputs, n=24, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, *shape)).astype("float32"), rng.normal(size=(n, outputs)).astype("float32")


def numpy(value):
    return np.array(keras.ops.convert_to_numpy(value))


# --- the split ----------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(MODELS))
def test_prefix_then_suffix_is_the_model(name):
    make, shape, outputs = MODELS[name]
    model = make()
    x, _ = data(shape, outputs, n=6)
    split = split_frozen_prefix(model)
    assert not split.report.empty, str(split.report)
    assert isinstance(split.suffix, CachedSuffix)
    for training in (False, True):
        if name == "bn_dropout_head" and training:
            continue  # the head's dropout draws: checked through the seeded fit below
        expected = numpy(model(x, training=training))
        got = numpy(split.suffix(split.features(x), training=training))
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_cuts_where_the_trainable_part_starts():
    report = split_frozen_prefix(nested_frozen()).report
    assert report.cut == ("gap",) and report.cached_layers[0] == "base/c1"
    assert report.stops == (("head", "holds 2 trainable weights"),)
    assert report.features_per_example == 6

    report = split_frozen_prefix(nested_partly_unfrozen()).report
    assert report.cut[0].startswith("add")  # the base's `h + h2`, inside the nested model
    assert len(report.cut) == 1
    assert report.stops == (("base/c3", "holds 2 trainable weights"),)

    report = split_frozen_prefix(residual_input_frozen()).report
    assert report.cut == ("ln",) and report.cached_layers[0] == "f1" and report.cached_layers[1].startswith("add")

    split = split_frozen_prefix(frozen_base_bn_dropout_head())
    assert split.report.cut == ("gap",)
    assert "hd" in str(split.report)


def test_training_flag_given_to_the_base_is_kept():
    """A sub-model called with `training=True` passes it to its layers when
    the model is called without `training`; the flattened suffix does too
    (its top BN, still trainable, normalizes with the batch's statistics)."""
    base = conv_base()
    for layer in base.layers[:-3]:
        layer.trainable = False
    inputs = keras.Input((8, 8, 3))
    model = keras.Model(inputs, keras.layers.Dense(2, name="head")(base(inputs, training=True)))
    _randomize_bn(model)
    x, _ = data((8, 8, 3), 2, n=4)
    split = split_frozen_prefix(model)
    assert split.report.stops[0][0] == "base/c3"
    for training in (None, False):
        np.testing.assert_allclose(numpy(split.suffix(split.prefix(x), training=training)),
                                   numpy(model(x, training=training)), rtol=1e-5, atol=1e-6)
    assert not np.allclose(numpy(model(x)), numpy(model(x, training=False)), atol=1e-3)


def test_layers_are_shared_not_copied():
    model = nested_partly_unfrozen()
    config = model.get_config()
    split = split_frozen_prefix(model)
    assert [id(v) for v in split.suffix.trainable_variables] == [id(v) for v in model.trainable_variables]
    suffix_layers = {id(layer) for layer in _all_layers(split.suffix)}
    assert id(model.get_layer("head")) in suffix_layers
    assert id(model.get_layer("base").get_layer("c3")) in suffix_layers
    assert id(model.get_layer("base").get_layer("c1")) not in suffix_layers
    assert sorted(v.path for v in split.suffix.non_trainable_variables) == ["bn3/moving_mean", "bn3/moving_variance"]
    assert model.get_config() == config  # the model's own graph is unchanged
    model.summary(print_fn=lambda *a, **k: None)


def test_stochastic_layer_ends_the_prefix():
    inputs = keras.Input((6,))
    h = keras.layers.Dense(6, name="f1", trainable=False)(inputs)
    h = keras.layers.Dropout(0.5, name="drop")(h)
    h = keras.layers.Dense(6, name="f2", trainable=False)(h)
    model = keras.Model(inputs, keras.layers.Dense(2, name="t")(h))
    split = split_frozen_prefix(model)
    assert split.report.cut == ("f1",)
    assert split.report.stops[0][0] == "drop" and "random" in split.report.stops[0][1]
    assert "f2" not in split.report.cached_layers

    # Random augmentation at the input: nothing can be cached.
    inputs = keras.Input((8, 8, 3))
    h = keras.layers.RandomFlip(name="flip")(inputs)
    model = keras.Model(inputs, keras.layers.Dense(2)(conv_base(name="b2")(h)))
    model.get_layer("b2").trainable = False
    report = split_frozen_prefix(model).report
    assert report.empty and report.stops[0][0] == "flip"


def test_rules():
    assert uncacheable_reason(keras.layers.GaussianNoise(0.1)).startswith("draws random numbers")
    assert uncacheable_reason(keras.layers.Dropout(0.0)) is None  # rate 0: no randomness
    bn = keras.layers.BatchNormalization(center=False, scale=False)
    bn.build((None, 3))
    assert "batch's statistics" in uncacheable_reason(bn)  # no trainable weight, still trains
    bn.trainable = False
    assert uncacheable_reason(bn) is None
    dense = keras.layers.Dense(2, activity_regularizer="l2", trainable=False)
    dense.build((None, 3))
    assert "activity" in uncacheable_reason(dense)

    class Custom(keras.layers.Layer):
        def call(self, x, training=None):
            return x

    assert "`training`" in uncacheable_reason(Custom(name="custom"))
    assert uncacheable_reason(Custom(name="custom"), deterministic=("custom",)) is None
    assert uncacheable_reason(Custom(), deterministic=(Custom,)) is None


def test_masked_tensors_are_not_cut():
    inputs = keras.Input((5,), dtype="int32")
    h = keras.layers.Embedding(10, 4, mask_zero=True, name="emb", trainable=False)(inputs)
    model = keras.Model(inputs, keras.layers.GRU(3, name="gru")(h))
    split = split_frozen_prefix(model)
    # Keras computes the mask with a graph operation (`not_equal` of the
    # input), which may be cached; the masked embedding may not: a layer
    # after it would not see the mask on cached features.
    assert split.report.stops == (("emb", "its output carries a Keras mask, which cached features would not keep"),)
    assert "emb" not in split.report.cached_layers
    x = np.array([[1, 2, 0, 0, 0], [3, 0, 0, 0, 0]], "int32")
    np.testing.assert_allclose(numpy(split.suffix(split.features(x))), numpy(model(x)), rtol=1e-5, atol=1e-6)


def test_unopened_nested_model_is_cached_whole_or_trained_whole():
    class OwnCall(keras.Model):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.dense = keras.layers.Dense(4)

        def call(self, x):
            return self.dense(x)

    inner = keras.Sequential([keras.Input((6,)), keras.layers.Dense(4, name="i1")], name="inner")
    inputs = keras.Input((6,))
    h = keras.layers.Dense(6, name="f0", trainable=False)(inputs)
    own = OwnCall(name="own")
    own.trainable = False
    model = keras.Model(inputs, keras.layers.Dense(2, name="t")(own(h) + inner(h)))
    split = split_frozen_prefix(model)
    assert split.report.stops == (("inner/i1", "holds 2 trainable weights"),)
    assert "own" in split.report.cached_layers  # a subclassed sub-model, frozen: cached whole
    x, _ = data((6,), 2, n=4)
    np.testing.assert_allclose(numpy(split.suffix(split.prefix(x))), numpy(model(x)), rtol=1e-5, atol=1e-6)

    # A frozen sub-model called with a dict is not opened, but cached whole.
    sub_in = keras.Input((6,), name="v")
    sub = keras.Model({"v": sub_in}, keras.layers.Dense(3, name="s1")(sub_in), name="sub")
    sub.trainable = False
    inputs = keras.Input((6,))
    model = keras.Model(inputs, keras.layers.Dense(2, name="t")(sub({"v": inputs})))
    split = split_frozen_prefix(model)
    assert split.report.unopened == (("sub", "it is called with a dict of inputs"),)
    assert split.report.cut == ("sub",)
    np.testing.assert_allclose(numpy(split.suffix(split.prefix(x))), numpy(model(x)), rtol=1e-5, atol=1e-6)


def test_outputs_keep_their_names():
    """A loss keyed by output name still finds its output when the output
    is made inside an opened sub-model (named after the sub-model)."""
    base = conv_base()
    base.trainable = False
    base.get_layer("bn3").trainable = True
    inputs = keras.Input((8, 8, 3))
    features = base(inputs, training=False)
    model = keras.Model(inputs, {"base": features, "head": keras.layers.Dense(5, name="head")(features)})
    split = split_frozen_prefix(model)
    assert split.suffix.output_names == model.output_names == ["base", "head"]
    model.compile(optimizer="sgd", loss={"head": "mse", "base": "mae"}, loss_weights={"head": 1.0, "base": 0.5})
    x, y = data((8, 8, 3), 5, n=8)
    targets = {"head": y, "base": np.zeros((8, 6), "float32")}
    history = fit_with_cached_prefix(model, x, targets, batch_size=4, epochs=1, verbose=0)
    assert {"loss", "head_loss", "base_loss"} <= set(history.history)


def test_two_inputs_one_raw():
    image = keras.Input((6,), name="image")
    meta = keras.Input((2,), name="meta")
    h = keras.layers.Dense(4, name="f1", trainable=False)(image)
    h = keras.layers.Concatenate(name="cat")([h, keras.layers.Dense(2, name="m1")(meta)])
    model = keras.Model({"image": image, "meta": meta}, keras.layers.Dense(1, name="t")(h))
    split = split_frozen_prefix(model)
    assert split.cut_names == ("f1", "meta") or split.cut_names == ("meta", "f1")
    rng = np.random.default_rng(0)
    x = {"image": rng.normal(size=(8, 6)).astype("float32"), "meta": rng.normal(size=(8, 2)).astype("float32")}
    features = split.features(x)
    np.testing.assert_allclose(numpy(split.suffix(features)), numpy(model(x)), rtol=1e-5, atol=1e-6)
    model.compile(optimizer="sgd", loss="mse")
    history = fit_with_cached_prefix(model, x, np.ones((8, 1), "float32"), epochs=1, verbose=0)
    assert len(history.history["loss"]) == 1


def test_subclassed_model_cannot_be_split():
    net = subclassed_dense_net()
    net(np.zeros((1, 3), "float32"))
    with pytest.raises(TypeError, match="subclassed"):
        split_frozen_prefix(net)


# --- gradients and training ---------------------------------------------------


def _gradients(model, inputs, y):
    """d mean((model(inputs, training=True) - y)^2) / d model.trainable_variables."""
    variables = model.trainable_variables

    def loss_of(out):
        return keras.ops.mean(keras.ops.square(keras.ops.subtract(out, y)))

    if BACKEND == "tensorflow":
        import tensorflow as tf

        with tf.GradientTape() as tape:
            loss = loss_of(model(inputs, training=True))
        grads = tape.gradient(loss, [v.value for v in variables])
    elif BACKEND == "jax":
        import jax

        frozen = [v.value for v in model.non_trainable_variables]

        def f(values):
            out, _ = model.stateless_call(values, frozen, inputs, training=True)
            return loss_of(out)

        grads = jax.grad(f)([v.value for v in variables])
    else:
        import torch

        loss = loss_of(model(inputs, training=True))
        grads = torch.autograd.grad(loss, [v.value for v in variables])
    return [numpy(g) for g in grads]


@pytest.mark.parametrize("name", ["nested_frozen", "nested_partly_unfrozen", "residual_input", "flat_first_frozen"])
def test_gradients_through_cached_features_are_the_full_models(name):
    make, shape, outputs = MODELS[name]
    model = make()
    x, y = data(shape, outputs, n=8)
    split = split_frozen_prefix(model)
    features = split.features(x)
    expected = _gradients(model, x, y)
    got = _gradients(split.suffix, features, y)
    assert len(got) == len(expected) == len(model.trainable_variables)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-6)


def _snapshot(model):
    return [numpy(v) for v in model.variables]


def _restore(model, state):
    for v, value in zip(model.variables, state):
        v.assign(value)


@pytest.mark.parametrize("name", ["nested_partly_unfrozen", "bn_dropout_head", "residual_input", "interleaved"])
def test_fit_is_model_fit_step_for_step(name):
    make, shape, outputs = MODELS[name]
    model = make()
    x, y = data(shape, outputs, n=24)
    x_val, y_val = data(shape, outputs, n=8, seed=1)
    start = _snapshot(model)

    def run(fit):
        _restore(model, start)
        model.compile(optimizer=keras.optimizers.SGD(0.05, momentum=0.9), loss="mse", metrics=["mae"])
        history = fit(model, x, y, batch_size=8, epochs=2, shuffle=False, verbose=0,
                      validation_data=(x_val, y_val))
        return to_numpy(model.weights), history.history, int(numpy(model.optimizer.iterations))

    plain_weights, plain_history, plain_steps = run(lambda m, *a, **k: m.fit(*a, **k))
    cached_weights, cached_history, cached_steps = run(fit_with_cached_prefix)
    assert cached_steps == plain_steps == 6
    assert sorted(cached_history) == sorted(plain_history)  # loss, mae, val_loss, val_mae
    for key in plain_history:
        np.testing.assert_allclose(cached_history[key], plain_history[key], rtol=1e-4, atol=1e-6)
    for c, p in zip(cached_weights, plain_weights):
        np.testing.assert_allclose(c, p, rtol=1e-4, atol=1e-6)


def test_fit_trains_the_models_own_variables_and_optimizer():
    model = nested_partly_unfrozen()
    frozen = numpy(model.get_layer("base").get_layer("c1").kernel)
    head = numpy(model.get_layer("head").kernel)
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse")
    x, y = data((8, 8, 3), 5)
    history = fit_with_cached_prefix(model, x, y, batch_size=8, epochs=2, verbose=0)
    assert history.model is model and model.history is history
    assert not np.allclose(numpy(model.get_layer("head").kernel), head)
    np.testing.assert_array_equal(numpy(model.get_layer("base").get_layer("c1").kernel), frozen)
    assert int(numpy(model.optimizer.iterations)) == 6
    # The optimizer was built for the model: the model's own fit carries on with it.
    model.fit(x, y, batch_size=8, epochs=1, verbose=0)
    assert int(numpy(model.optimizer.iterations)) == 9


def test_optimizer_state_carries_over_between_model_fit_and_cached_fit():
    """Plain, cached, plain: the same as three plain epochs (Adam's slots
    follow the model's variable order, which is not the suffix's natural one)."""
    x, y = data((6,), 6, n=16)
    model = interleaved()
    start = _snapshot(model)

    def run(middle):
        _restore(model, start)
        model.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse")
        model.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
        middle(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
        model.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
        return to_numpy(model.weights)

    plain = run(model.fit)
    cached = run(lambda *a, **k: fit_with_cached_prefix(model, *a, **k))
    for c, p in zip(cached, plain):
        np.testing.assert_allclose(c, p, rtol=1e-4, atol=1e-6)


def test_nothing_frozen_warns_and_is_plain_fit():
    x, y = data((6,), 3, n=16)

    def make():
        inputs = keras.Input((6,))
        h = keras.layers.Dense(4, kernel_initializer=INIT, name="a")(inputs)
        model = keras.Model(inputs, keras.layers.Dense(3, kernel_initializer=INIT, name="b")(h))
        model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
        return model

    plain = make()
    plain.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0)
    model = make()
    with pytest.warns(NoEffectWarning, match="nothing of .* can be cached"):
        fit_with_cached_prefix(model, x, y, batch_size=4, epochs=2, shuffle=False, verbose=0)
    for a, b in zip(to_numpy(model.weights), to_numpy(plain.weights)):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_datasets_are_refused():
    model = nested_frozen()
    model.compile(optimizer="sgd", loss="mse")
    x, y = data((8, 8, 3), 5, n=8)

    def batches():
        yield x, y

    with pytest.raises(TypeError, match="must be arrays"):
        fit_with_cached_prefix(model, batches(), epochs=1, verbose=0)
    with pytest.raises(TypeError, match="validation_data"):
        fit_with_cached_prefix(model, x, y, epochs=1, verbose=0, validation_data=batches())
    with pytest.raises(ValueError, match="compile"):
        fit_with_cached_prefix(nested_frozen(), x, y)


def test_checkpoints_save_the_model(tmp_path):
    model = nested_partly_unfrozen()
    model.compile(optimizer="adam", loss="mse")
    x, y = data((8, 8, 3), 5, n=8)
    path = os.path.join(tmp_path, "best.weights.h5")
    checkpoint = keras.callbacks.ModelCheckpoint(path, save_weights_only=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", NoEffectWarning)
        fit_with_cached_prefix(model, x, y, batch_size=4, epochs=1, verbose=0, callbacks=[checkpoint])
    other = nested_partly_unfrozen()
    other.load_weights(path)  # the model's own weights file
    for a, b in zip(to_numpy(other.weights), to_numpy(model.weights)):
        np.testing.assert_allclose(a, b)
