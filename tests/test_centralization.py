"""Gradient centralization: the math against NumPy, the skip rules, the wrapper."""

import os
import tempfile

import keras
import numpy as np
import pytest

import keras_boost as boost
from keras_boost import ops as kb_ops
from keras_boost.optimizers import exclude_grouped_kernels
from keras_boost.optimizers import should_centralize

L = keras.layers


def numpy_gc(g):
    """Subtract the mean over every axis but the last (Keras: output channels last)."""
    g = np.asarray(g, np.float64)
    if g.ndim < 2:
        return g
    return g - g.mean(axis=tuple(range(g.ndim - 1)), keepdims=True)


@pytest.mark.parametrize("shape", [(3, 2), (16, 5), (3, 3, 32, 8), (2, 2, 2, 16, 4)])
def test_centralize_matches_numpy(shape):
    g = np.random.default_rng(0).normal(size=shape).astype("float32")
    got = keras.ops.convert_to_numpy(kb_ops.centralize(g))
    np.testing.assert_allclose(got, numpy_gc(g), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got.reshape(-1, shape[-1]).mean(0), 0.0, atol=1e-6)


def test_centralize_rank_one_is_unchanged_and_dtype_kept():
    g = np.arange(4, dtype="float32")
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(kb_ops.centralize(g)), g)
    h = kb_ops.centralize(keras.ops.ones((16, 2), dtype="float16"))
    assert keras.backend.standardize_dtype(h.dtype) == "float16"


@pytest.mark.parametrize(
    "shape, expected",
    [((32, 8), True), ((10, 8), False), ((3, 3, 16, 4), True), ((3, 3, 3, 16), False),
     ((64,), False), ((), False)],
)
def test_gc_applies_shape_rule(shape, expected):
    assert kb_ops.gc_applies(shape) is expected


def built(layer, shape):
    layer.build(shape)
    return layer


def test_skip_rules():
    assert should_centralize(built(L.Dense(8), (None, 32)).kernel)
    assert not should_centralize(built(L.Dense(8), (None, 32)).bias)
    assert not should_centralize(built(L.Dense(8), (None, 10)).kernel)  # 10 % 16 != 0
    assert should_centralize(built(L.Conv2D(8, 3), (None, 8, 8, 16)).kernel)
    bn = built(L.BatchNormalization(), (None, 4, 4, 32))
    assert not any(should_centralize(w) for w in bn.weights)
    assert not should_centralize(built(L.DepthwiseConv2D(3), (None, 8, 8, 16)).kernel)
    sep = built(L.SeparableConv2D(16, 3), (None, 8, 8, 16))
    assert not should_centralize(sep.depthwise_kernel)
    assert should_centralize(sep.pointwise_kernel)
    assert not should_centralize(built(boost.layers.NormalizedDense(4), (None, 32)).kernel)
    # An embedding table of 64 rows passes the shape rule but is a lookup, not neurons' weights.
    assert not should_centralize(built(L.Embedding(64, 32), (None, 5)).embeddings)


def test_grouped_kernels_with_custom_names_need_the_model_mark():
    inputs = keras.Input((8, 8, 32))
    dw = L.DepthwiseConv2D(3, name="spatial")
    grouped = L.Conv2D(32, 3, groups=2, name="grouped")
    model = keras.Model(inputs, grouped(dw(inputs)))
    assert should_centralize(grouped.kernel)  # no way to tell from the variable alone
    assert exclude_grouped_kernels(model) == 2
    assert not should_centralize(dw.kernel) and not should_centralize(grouped.kernel)


def two_layer_model(seed=0):
    init = keras.initializers.GlorotUniform(seed=seed)
    inputs = keras.Input((16,))
    h = L.Dense(32, kernel_initializer=init, name="d1")(inputs)
    h = L.Dense(8, kernel_initializer=init, name="d2")(L.Activation("tanh")(h))  # in=32: GC
    out = L.Dense(3, kernel_initializer=init, name="d3")(h)  # in=8: no GC
    return keras.Model(inputs, out)


def one_step(optimizer, x, y):
    model = two_layer_model()
    before = [np.array(w) for w in model.get_weights()]
    model.compile(optimizer=optimizer, loss="mse")
    model.fit(x, y, batch_size=len(x), epochs=1, shuffle=False, verbose=0)
    return model, before


def test_wrapper_step_equals_numpy_gc_of_the_plain_gradient():
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(8, 16)).astype("float32"), rng.normal(size=(8, 3)).astype("float32")
    lr = 0.1
    plain, w0 = one_step(keras.optimizers.SGD(lr), x, y)
    gc_model, _ = one_step(boost.GradientCentralization(keras.optimizers.SGD(lr)), x, y)
    for var, p, g_after, start in zip(plain.weights, plain.get_weights(), gc_model.get_weights(), w0):
        grad = (start - p) / lr
        expected = start - lr * (numpy_gc(grad) if should_centralize(var) else grad)
        np.testing.assert_allclose(g_after, expected, rtol=1e-4, atol=1e-6)
    centered = [v.path for v in gc_model.weights if should_centralize(v)]
    assert centered == ["d1/kernel", "d2/kernel"]


def test_wrapper_passes_settings_through_and_serializes():
    inner = keras.optimizers.SGD(0.3, momentum=0.9)
    opt = boost.GradientCentralization(inner)
    assert float(opt.learning_rate) == pytest.approx(0.3)
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(8, 16)).astype("float32"), rng.normal(size=(8, 3)).astype("float32")
    model = two_layer_model()
    model.compile(optimizer=opt, loss="mse")
    model.fit(x, y, batch_size=4, epochs=1, verbose=0)
    assert int(opt.iterations) == 2
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "gc.keras")
        model.save(path)
        loaded = keras.saving.load_model(path)
    assert isinstance(loaded.optimizer, boost.GradientCentralization)
    assert loaded.optimizer.inner_optimizer.momentum == 0.9
    loaded.fit(x, y, batch_size=4, epochs=1, verbose=0)
    assert int(loaded.optimizer.iterations) == 4


def batch_norm_model(seed=0):
    init = keras.initializers.GlorotUniform(seed=seed)
    inputs = keras.Input((16,))
    h = L.BatchNormalization(name="bn")(L.Dense(32, kernel_initializer=init, name="d1")(inputs))
    out = L.Dense(3, kernel_initializer=init, name="d2")(L.Activation("tanh")(h))  # in=32: GC
    return keras.Model(inputs, out)


@pytest.mark.parametrize("make_model, centralizing", [(two_layer_model, False), (batch_norm_model, True)])
def test_only_with_batch_norm_centralizes_a_model_with_batch_norm_only(make_model, centralizing):
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=(8, 16)).astype("float32"), rng.normal(size=(8, 3)).astype("float32")
    lr = 0.1
    runs = []
    for optimizer in (keras.optimizers.SGD(lr),
                      boost.GradientCentralization(keras.optimizers.SGD(lr), only_with_batch_norm=True)):
        model = make_model()
        start = [np.array(w) for w in model.get_weights()]
        model.compile(optimizer=optimizer, loss="mse")
        model.fit(x, y, batch_size=len(x), epochs=1, shuffle=False, verbose=0)
        runs.append((model, start))
    (plain, start), (gc_model, _) = runs
    assert gc_model.optimizer.centralizing is centralizing
    trainable = {id(v) for v in plain.trainable_weights}
    centered = []
    for var, p, got, w0 in zip(plain.weights, plain.get_weights(), gc_model.get_weights(), start):
        if id(var) not in trainable:
            np.testing.assert_allclose(got, p, rtol=1e-5, atol=1e-6)  # moving statistics
            continue
        grad = (w0 - p) / lr
        apply = centralizing and should_centralize(var)
        centered += [var.path] if apply else []
        np.testing.assert_allclose(got, w0 - lr * (numpy_gc(grad) if apply else grad), rtol=1e-4, atol=1e-6)
    assert centered == (["d1/kernel", "d2/kernel"] if centralizing else [])
    expected = ("gradient centralization of 2 conv/dense kernels" if centralizing
                else "gradient centralization off (no BatchNormalization in the model)")
    assert gc_model.optimizer.summary() == expected


def test_only_with_batch_norm_serializes_and_is_checked():
    opt = boost.GradientCentralization(keras.optimizers.SGD(), only_with_batch_norm=True)
    assert opt.get_config()["only_with_batch_norm"] is True
    clone = boost.GradientCentralization.from_config(opt.get_config())
    assert clone.only_with_batch_norm is True
    assert boost.GradientCentralization(keras.optimizers.SGD()).only_with_batch_norm is False
    with pytest.raises(TypeError, match="only_with_batch_norm must be True or False, got 'yes'"):
        boost.GradientCentralization(keras.optimizers.SGD(), only_with_batch_norm="yes")


def test_levels_centralize_by_the_models_batch_norm_and_gc_flag_true_forces_it():
    config = {"boost": {"mode": "manual", "grad_freeze": False}}
    auto = boost.wrap(keras.optimizers.SGD(), "O1", config).inner_optimizer
    assert isinstance(auto, boost.GradientCentralization) and auto.only_with_batch_norm
    forced = boost.wrap(keras.optimizers.SGD(), "O1", {**config, "less_bn": {"gc_flag": True}}).inner_optimizer
    assert not forced.only_with_batch_norm
    model = boost.BoostModel.from_model(two_layer_model(), "O1", config)
    model.compile(optimizer=keras.optimizers.SGD(), loss="mse")
    model.fit(np.ones((4, 16), "float32"), np.ones((4, 3), "float32"), verbose=0)
    assert "gradient centralization off (no BatchNormalization in the model)" in model.boost_summary()
    with pytest.raises(TypeError, match="gc_flag must be 'auto', true or false, got 'on'"):
        boost.AutoBoost("O1", {"less_bn": {"gc_flag": "on"}})


def test_a_prefix_cached_fit_asks_the_whole_model_for_batch_norm():
    # keras-io's transfer learning: a frozen base with BatchNormalization, a
    # new head without. The cached fit builds the optimizer from the head.
    base_in = keras.Input((16,))
    base = keras.Model(base_in, L.BatchNormalization()(L.Dense(32)(base_in)), name="base")
    base.trainable = False
    inputs = keras.Input((16,))
    model = keras.Model(inputs, L.Dense(3, name="head")(base(inputs, training=False)))
    boosted = boost.BoostModel.from_model(model, "O1")
    boosted.compile(optimizer=keras.optimizers.SGD(), loss="mse")
    boosted.fit(np.ones((8, 16), "float32"), np.ones((8, 3), "float32"), batch_size=4, verbose=0)
    summary = boosted.boost_summary()
    assert "prefix cache: a frozen prefix" in summary
    assert "gradient centralization of 1 conv/dense kernels" in summary


def test_config_gc_flag_wraps_innermost():
    config = {"boost": {"mode": "manual", "grad_freeze": False}}
    opt = boost.wrap(keras.optimizers.SGD(), "O1", config)
    assert isinstance(opt.inner_optimizer, boost.GradientCentralization)
    config["less_bn"] = {"gc_flag": False}
    opt = boost.wrap(keras.optimizers.SGD(), "O1", config)
    assert isinstance(opt.inner_optimizer, keras.optimizers.SGD)


def test_wrap_with_less_bn_warns_when_no_model_does_the_surgery():
    import warnings

    config = {"boost": {"mode": "manual", "grad_freeze": False}}
    inputs = keras.Input((4,))
    outputs = keras.layers.Dense(2)(inputs)
    plain = keras.Model(inputs, outputs)
    plain.compile(optimizer=boost.wrap(keras.optimizers.SGD(), "O1", config), loss="mse")
    x, y = np.ones((4, 4), "float32"), np.ones((4, 2), "float32")
    with pytest.warns(boost.NoEffectWarning, match=r"the BatchNormalization removal does not \(fused batch norm and prefix caching neither\)"):
        plain.train_on_batch(x, y)
    boosted = boost.BoostModel.from_model(keras.Model(inputs, outputs), "O1", config)
    boosted.compile(optimizer=boost.wrap(keras.optimizers.SGD(), "O1", config), loss="mse")
    with warnings.catch_warnings():
        warnings.simplefilter("error", boost.NoEffectWarning)
        boosted.train_on_batch(x, y)


def test_rejects_non_optimizers():
    with pytest.raises(TypeError, match="keras.optimizers.Optimizer"):
        boost.GradientCentralization("sgd")


# --- depthwise / grouped kernels known by their layer's type ---------------------


def grouped_model(name="grouped_net", depthwise="dw"):
    """A DepthwiseConv2D named `depthwise` and a grouped Conv2D with a neutral name.

    Both have 32 input channels, so the shape rule alone would centralize
    them; `plain` is an ordinary Conv2D that must still be centralized.
    """
    inputs = keras.Input((6, 6, 32))
    x = L.DepthwiseConv2D(3, padding="same", use_bias=False, name=depthwise)(inputs)
    x = L.Conv2D(32, 3, padding="same", groups=2, use_bias=False, name="mix")(x)
    x = L.Conv2D(16, 1, use_bias=False, name="plain")(x)
    return keras.Model(inputs, L.GlobalAveragePooling2D()(x), name=name)


def _kernels(model):
    return [model.layers[i].kernel for i in (1, 2, 3)]  # the depthwise, "mix", "plain"


def test_depthwise_named_dw_and_grouped_conv_need_the_layer_type():
    model = grouped_model()
    dw, mix, plain = _kernels(model)
    assert [v.path for v in (dw, mix)] == ["dw/kernel", "mix/kernel"]
    # The shape rule alone would centralize all three: the names tell nothing.
    assert [should_centralize(v) for v in (dw, mix, plain)] == [True, True, True]
    assert exclude_grouped_kernels(model) == 2
    assert [should_centralize(v) for v in (dw, mix, plain)] == [False, False, True]


def test_model_argument_marks_at_construction():
    model = grouped_model()
    dw, mix, plain = _kernels(model)
    boost.GradientCentralization(keras.optimizers.SGD(0.1), model=model)
    assert [should_centralize(v) for v in (dw, mix, plain)] == [False, False, True]


def test_separable_conv_depthwise_kernel_by_type_and_groups_one_not_marked():
    inputs = keras.Input((6, 6, 16))
    x = L.SeparableConv2D(16, 3, name="sep")(inputs)
    x = L.Conv2D(16, 1, groups=1, name="ungrouped")(x)
    model = keras.Model(inputs, x)
    assert exclude_grouped_kernels(model) == 1
    sep = model.get_layer("sep")
    assert getattr(sep.depthwise_kernel, "_keras_boost_no_gc", False)
    assert should_centralize(sep.pointwise_kernel)
    assert should_centralize(model.get_layer("ungrouped").kernel)


def test_nested_sub_model_kernels_are_marked():
    inner = grouped_model("inner")
    inputs = keras.Input((6, 6, 32))
    outer = keras.Model(inputs, inner(inputs))
    assert exclude_grouped_kernels(outer) == 2
    assert [should_centralize(v) for v in _kernels(inner)] == [False, False, True]


# gc_flag true: the grouped model has no BatchNormalization ("auto" would pass its gradients through).
GC_ONLY = {"boost": {"mode": "manual", "less_bn": True, "grad_freeze": False, "fused_batch_norm": False},
           "less_bn": {"gc_flag": True}}


@pytest.mark.filterwarnings("ignore:less_bn is on:keras_boost.NoEffectWarning")
@pytest.mark.parametrize("make", [
    lambda m: boost.GradientCentralization(keras.optimizers.SGD(0.1), model=m),
    # No model given: the one compiled with the optimizer is found when it builds.
    lambda m: boost.GradientCentralization(keras.optimizers.SGD(0.1)),
    lambda m: boost.wrap(keras.optimizers.SGD(0.1), "O0", GC_ONLY),
], ids=["model_argument", "alone", "in_wrap"])
def test_a_step_leaves_grouped_kernels_uncentered(make):
    """One SGD step against the plain step: GC only where the layer type allows,
    with a DepthwiseConv2D named "conv" (the names tell nothing)."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(4, 6, 6, 32)).astype("float32")
    y = rng.normal(size=(4, 16)).astype("float32")
    lr = 0.1

    def step(make_opt):
        model = grouped_model(depthwise="conv")
        for w in model.weights:
            w.assign(rng_w.normal(0, 0.1, w.shape).astype("float32"))
        start = [np.array(keras.ops.convert_to_numpy(v)) for v in _kernels(model)]
        model.compile(optimizer=make_opt(model), loss="mse")
        model.fit(x, y, batch_size=4, epochs=1, shuffle=False, verbose=0)
        return start, [np.array(keras.ops.convert_to_numpy(v)) for v in _kernels(model)]

    rng_w = np.random.default_rng(1)
    start, plain = step(lambda m: keras.optimizers.SGD(lr))
    rng_w = np.random.default_rng(1)
    start_gc, gc = step(make)
    for a, b in zip(start, start_gc):
        np.testing.assert_array_equal(a, b)
    for i, (w0, p, g) in enumerate(zip(start, plain, gc)):
        grad = (w0 - p) / lr
        expected = w0 - lr * (numpy_gc(grad) if i == 2 else grad)  # only "plain" is centered
        np.testing.assert_allclose(g, expected, rtol=1e-4, atol=1e-6)
    assert not np.allclose(numpy_gc((start[0] - plain[0]) / lr), (start[0] - plain[0]) / lr)


def test_built_outside_a_model_says_which_convolutions_it_centralizes():
    model = grouped_model(depthwise="conv")
    opt = boost.GradientCentralization(keras.optimizers.SGD(0.1))
    with pytest.warns(boost.NoEffectWarning, match=r"known by name only.*\['conv/kernel', 'mix/kernel', "):
        opt.build(model.trainable_variables)


def test_model_built_later_is_marked_when_the_optimizer_builds():
    model = keras.Sequential([L.DepthwiseConv2D(3, padding="same", name="dw"),
                              L.GlobalAveragePooling2D(), L.Dense(2)])
    opt = boost.GradientCentralization(keras.optimizers.SGD(0.1), model=model)  # not built yet
    model.compile(optimizer=opt, loss="mse")
    model.fit(np.ones((2, 4, 4, 16), "float32"), np.ones((2, 2), "float32"), verbose=0)
    assert not should_centralize(model.get_layer("dw").kernel)


def test_model_is_not_serialized_and_not_kept_alive():
    import gc
    import weakref

    model = grouped_model()
    opt = boost.GradientCentralization(keras.optimizers.SGD(0.1), model=model, name="gc")
    config = opt.get_config()
    assert "model" not in config and config["name"] == "gc"
    clone = boost.GradientCentralization.from_config(config)
    assert isinstance(clone, boost.GradientCentralization) and clone.name == "gc"
    ref = weakref.ref(model)
    del model
    gc.collect()
    assert ref() is None  # the optimizer holds only a weak reference
    opt.build([keras.Variable(np.zeros((16, 4), "float32"))])  # model gone: no error


@pytest.mark.parametrize("bad", ["gc_name", keras.layers.Dense(2), 3])
def test_model_argument_must_be_a_model(bad):
    with pytest.raises(TypeError, match="model must be None or a keras.Model"):
        boost.GradientCentralization(keras.optimizers.SGD(), bad)


# --- squeeze-excite gate kernels known by their place in the graph ----------------


def squeeze_excite_model(name="se_net"):
    """A convolution gated by a squeeze-excite branch (pooling, "squeeze",
    "excite", Multiply), then a "head"; every kernel has 32 or 16 input
    channels, so the shape rule alone would centralize all four."""
    inputs = keras.Input((6, 6, 32))
    x = L.Conv2D(32, 3, padding="same", name="conv")(inputs)
    s = L.GlobalAveragePooling2D()(x)
    s = L.Dense(16, activation="relu", name="squeeze")(s)
    s = L.Dense(32, activation="sigmoid", name="excite")(s)
    x = L.Multiply()([x, L.Reshape((1, 1, 32))(s)])
    outputs = L.Dense(4, name="head")(L.GlobalAveragePooling2D()(x))
    return keras.Model(inputs, outputs, name=name)


def _se_kernels(model):
    return [model.get_layer(n).kernel for n in ("conv", "squeeze", "excite", "head")]


def test_gate_kernels_are_marked_from_the_graph():
    model = squeeze_excite_model()
    assert [should_centralize(v) for v in _se_kernels(model)] == [True] * 4
    assert boost.optimizers.exclude_gate_kernels(model) == 2
    assert [should_centralize(v) for v in _se_kernels(model)] == [True, False, False, True]


def test_a_multiply_without_a_pooled_branch_is_not_a_gate():
    """A gated linear unit multiplies two projections of the same features:
    no global pooling on either branch, nothing marked."""
    inputs = keras.Input((8, 32))
    gate = L.Dense(32, activation="sigmoid", name="gate")(inputs)
    x = L.Multiply()([L.Dense(32, name="value")(inputs), gate])
    model = keras.Model(inputs, L.Dense(2)(L.GlobalAveragePooling1D()(x)))
    assert boost.optimizers.exclude_gate_kernels(model) == 0
    assert should_centralize(model.get_layer("gate").kernel)


def test_gate_kernels_of_applications_and_nested_models():
    efficientnet = keras.applications.EfficientNetB0(weights=None, input_shape=(32, 32, 3), classes=10)
    # 16 blocks, a reduce and an expand kernel each; the 16 depthwise kernels too.
    assert boost.optimizers.exclude_gate_kernels(efficientnet) == 32
    assert boost.optimizers.exclude_unsuited_kernels(efficientnet) == 48
    assert not should_centralize(efficientnet.get_layer("block6b_se_reduce").kernel)
    assert should_centralize(efficientnet.get_layer("block6b_expand_conv").kernel)
    mobilenet = keras.applications.MobileNetV2(weights=None, input_shape=(32, 32, 3), classes=10)
    assert boost.optimizers.exclude_gate_kernels(mobilenet) == 0  # no squeeze-excite
    inputs = keras.Input((6, 6, 32))
    outer = keras.Model(inputs, squeeze_excite_model("inner")(inputs))
    assert boost.optimizers.exclude_gate_kernels(outer) == 2


@pytest.mark.parametrize("make", [
    lambda m: boost.GradientCentralization(keras.optimizers.SGD(0.1), model=m),
    lambda m: boost.GradientCentralization(keras.optimizers.SGD(0.1)),
], ids=["model_argument", "alone"])
def test_a_step_leaves_gate_kernels_uncentered(make):
    """One SGD step against the plain step: "conv" and "head" centered, the
    gate's "squeeze" and "excite" kernels as plain SGD moves them."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(4, 6, 6, 32)).astype("float32")
    y = rng.normal(size=(4, 4)).astype("float32")
    lr = 0.1

    def step(make_opt):
        keras.utils.set_random_seed(1)
        model = squeeze_excite_model()
        start = [np.array(keras.ops.convert_to_numpy(v)) for v in _se_kernels(model)]
        model.compile(optimizer=make_opt(model), loss="mse")
        model.fit(x, y, batch_size=4, epochs=1, shuffle=False, verbose=0)
        return start, [np.array(keras.ops.convert_to_numpy(v)) for v in _se_kernels(model)]

    start, plain = step(lambda m: keras.optimizers.SGD(lr))
    start_gc, gc = step(make)
    for a, b in zip(start, start_gc):
        np.testing.assert_array_equal(a, b)
    for i, (w0, p, g) in enumerate(zip(start, plain, gc)):
        grad = (w0 - p) / lr
        expected = w0 - lr * (numpy_gc(grad) if i in (0, 3) else grad)
        np.testing.assert_allclose(g, expected, rtol=1e-4, atol=1e-6)
        assert not np.allclose(numpy_gc(grad), grad)  # centering would have changed each


def test_the_batch_norm_answer_is_saved_and_a_reloaded_optimizer_keeps_it():
    """A reloaded LessBN model has no report to ask and may have no BN left:
    the optimizer keeps what it found on the model it trained."""
    x, y = np.ones((4, 16), "float32"), np.ones((4, 3), "float32")
    model = batch_norm_model()
    model.compile(optimizer=boost.GradientCentralization(keras.optimizers.SGD(), only_with_batch_norm=True),
                  loss="mse")
    model.fit(x, y, verbose=0)
    assert model.optimizer.get_config()["centralizing"] is True
    reloaded = boost.GradientCentralization.from_config(model.optimizer.get_config())
    bn_free = two_layer_model()  # asked afresh, it would switch GC off
    bn_free.compile(optimizer=reloaded, loss="mse")
    bn_free.fit(x, y, verbose=0)
    assert reloaded.centralizing
    assert reloaded.summary() == "gradient centralization of 2 conv/dense kernels"
    fresh = boost.GradientCentralization(keras.optimizers.SGD(), only_with_batch_norm=True)
    assert "centralizing" not in fresh.get_config()  # not built: asks its model at build
    bn_free = two_layer_model()
    bn_free.compile(optimizer=fresh, loss="mse")
    bn_free.fit(x, y, verbose=0)
    assert not fresh.centralizing and fresh.get_config()["centralizing"] is False


@pytest.mark.parametrize("name", ["exclude_grouped_kernels", "exclude_gate_kernels", "exclude_unsuited_kernels"])
def test_exclude_functions_name_themselves_on_a_non_model(name):
    with pytest.raises(TypeError, match=rf"{name} expects a keras.Model \(or layer\), got builtins.str"):
        getattr(boost.optimizers, name)("model")
