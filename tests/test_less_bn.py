"""LessBN: which BNs go (exact counts per architecture), equivalence, bad input."""

import warnings

import keras
import numpy as np
import pytest

import keras_boost as boost
from conftest import dense_graph
from conftest import to_numpy
from keras_boost.bench import residual_cnn
from keras_boost.surgery import find_less_bn
from keras_boost.surgery import patterns as patterns_lib

L = keras.layers

# The builders below use constant initializers: tests set the weights they
# need, and on JAX every random initializer compiles once per kernel shape.
_Z = {"kernel_initializer": "zeros"}


# --- small builders with the exact layouts of the real architectures ------------


def _conv(x, filters, kernel, strides=1, name=None, use_bias=False):
    return L.Conv2D(filters, kernel, strides=strides, padding="same", use_bias=use_bias,
                    **_Z, name=name)(x)


def resnet_basic(blocks=(2, 2, 2, 2), width=4, classes=5):
    """MindSpore's ResNet-18/34 layout: stem conv-bn-relu-maxpool, basic blocks."""
    inputs = keras.Input((16, 16, 3))
    x = L.ReLU(name="stem_relu")(L.BatchNormalization(name="stem_bn")(_conv(inputs, width, 3)))
    x = L.MaxPooling2D(2, name="stem_pool")(x)
    for s, n in enumerate(blocks):
        for b in range(n):
            p = f"s{s}b{b}_"
            filters, strides = width * 2**s, (2 if s and not b else 1)
            y = L.ReLU(name=p + "relu1")(
                L.BatchNormalization(name=p + "bn1")(_conv(x, filters, 3, strides))
            )
            y = L.BatchNormalization(name=p + "bn2")(_conv(y, filters, 3))
            shortcut = x
            if strides != 1 or x.shape[-1] != filters:
                shortcut = L.BatchNormalization(name=p + "proj_bn")(_conv(x, filters, 1, strides))
            x = L.ReLU(name=p + "out")(L.Add(name=p + "add")([y, shortcut]))
    out = L.Dense(classes, **_Z, name="logits")(L.GlobalAveragePooling2D()(x))
    return keras.Model(inputs, out, name="resnet_basic")


def resnet_bottleneck(blocks=(3, 4, 6, 3), width=2, classes=5):
    """keras.applications.ResNet50's layout (ZeroPadding stem, Add([shortcut, x]))."""
    inputs = keras.Input((32, 32, 3))
    x = L.ZeroPadding2D(3, name="conv1_pad")(inputs)
    x = L.Conv2D(width, 7, strides=2, **_Z, name="conv1_conv")(x)
    x = L.Activation("relu", name="conv1_relu")(L.BatchNormalization(name="conv1_bn")(x))
    x = L.ZeroPadding2D(1, name="pool1_pad")(x)
    x = L.MaxPooling2D(3, strides=2, name="pool1_pool")(x)
    for s, n in enumerate(blocks):
        for b in range(n):
            p = f"conv{s + 2}_block{b + 1}_"
            f, strides = width * 2**s, (2 if s and not b else 1)
            if b == 0:
                shortcut = L.Conv2D(4 * f, 1, strides=strides, **_Z, name=p + "0_conv")(x)
                shortcut = L.BatchNormalization(name=p + "0_bn")(shortcut)
            else:
                shortcut = x
            y = L.Conv2D(f, 1, strides=strides, **_Z, name=p + "1_conv")(x)
            y = L.Activation("relu", name=p + "1_relu")(L.BatchNormalization(name=p + "1_bn")(y))
            y = L.Conv2D(f, 3, padding="same", **_Z, name=p + "2_conv")(y)
            y = L.Activation("relu", name=p + "2_relu")(L.BatchNormalization(name=p + "2_bn")(y))
            y = L.BatchNormalization(name=p + "3_bn")(L.Conv2D(4 * f, 1, **_Z, name=p + "3_conv")(y))
            x = L.Activation("relu", name=p + "out")(L.Add(name=p + "add")([shortcut, y]))
    out = L.Dense(classes, **_Z, name="predictions")(L.GlobalAveragePooling2D(name="avg_pool")(x))
    return keras.Model(inputs, out, name="resnet_bottleneck")


# (expansion t, channels c, repeats n, stride s): MobileNetV2's table.
_MNV2 = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
         (6, 160, 3, 2), (6, 320, 1, 1))


def mobilenet_v2(scale=0.125, classes=5):
    """keras.applications.MobileNetV2's layout (ReLU(6.), ZeroPadding before strided dw)."""

    def ch(c):
        return max(2, int(c * scale))

    inputs = keras.Input((32, 32, 3))
    x = L.Conv2D(ch(32), 3, strides=2, padding="same", use_bias=False, **_Z, name="Conv1")(inputs)
    x = L.ReLU(6.0, name="Conv1_relu")(L.BatchNormalization(name="bn_Conv1")(x))
    block = 0
    for t, c, n, s in _MNV2:
        for i in range(n):
            strides = s if i == 0 else 1
            p = f"block_{block}_"
            inp, in_ch = x, x.shape[-1]
            if block:
                x = L.Conv2D(in_ch * t, 1, use_bias=False, **_Z, name=p + "expand")(x)
                x = L.ReLU(6.0, name=p + "expand_relu")(L.BatchNormalization(name=p + "expand_BN")(x))
            if strides == 2:
                x = L.ZeroPadding2D(1, name=p + "pad")(x)
            x = L.DepthwiseConv2D(3, strides=strides, padding="same" if strides == 1 else "valid",
                                  use_bias=False, depthwise_initializer="zeros",
                                  name=p + "depthwise")(x)
            x = L.ReLU(6.0, name=p + "depthwise_relu")(L.BatchNormalization(name=p + "depthwise_BN")(x))
            x = L.Conv2D(ch(c), 1, use_bias=False, **_Z, name=p + "project")(x)
            x = L.BatchNormalization(name=p + "project_BN")(x)
            if in_ch == ch(c) and strides == 1:
                x = L.Add(name=p + "add")([inp, x])
            block += 1
    x = L.Conv2D(ch(1280), 1, use_bias=False, **_Z, name="Conv_1")(x)
    x = L.ReLU(6.0, name="out_relu")(L.BatchNormalization(name="Conv_1_bn")(x))
    out = L.Dense(classes, **_Z, name="predictions")(L.GlobalAveragePooling2D()(x))
    return keras.Model(inputs, out, name="mobilenet_v2")


def densenet(blocks=(2, 3, 2), growth=4, classes=5):
    """keras.applications.DenseNet's layout (BN-ReLU-Conv1x1-BN-ReLU-Conv3x3, concat)."""
    inputs = keras.Input((16, 16, 3))
    x = L.Conv2D(2 * growth, 3, padding="same", use_bias=False, **_Z, name="conv1_conv")(inputs)
    x = L.Activation("relu", name="conv1_relu")(L.BatchNormalization(name="conv1_bn")(x))
    x = L.MaxPooling2D(2, name="pool1")(x)
    for i, n in enumerate(blocks):
        for j in range(n):
            p = f"conv{i + 2}_block{j + 1}_"
            y = L.Activation("relu", name=p + "0_relu")(L.BatchNormalization(name=p + "0_bn")(x))
            y = L.Conv2D(4 * growth, 1, use_bias=False, **_Z, name=p + "1_conv")(y)
            y = L.Activation("relu", name=p + "1_relu")(L.BatchNormalization(name=p + "1_bn")(y))
            y = L.Conv2D(growth, 3, padding="same", use_bias=False, **_Z, name=p + "2_conv")(y)
            x = L.Concatenate(name=p + "concat")([x, y])
        if i + 1 < len(blocks):
            p = f"pool{i + 2}_"
            x = L.Activation("relu", name=p + "relu")(L.BatchNormalization(name=p + "bn")(x))
            x = L.Conv2D(x.shape[-1] // 2, 1, use_bias=False, **_Z, name=p + "conv")(x)
            x = L.AveragePooling2D(2, name=p + "pool")(x)
    x = L.Activation("relu", name="relu")(L.BatchNormalization(name="bn")(x))
    out = L.Dense(classes, **_Z, name="predictions")(L.GlobalAveragePooling2D()(x))
    return keras.Model(inputs, out, name="densenet")


def bn_names(model):
    return [l.name for l in model.layers if isinstance(l, L.BatchNormalization)]


# --- exact counts ---------------------------------------------------------------


@pytest.mark.parametrize(
    "build, removed, total",
    [
        (lambda: resnet_basic((2, 2, 2, 2)), 11, 20),  # ResNet-18: 8 bn1 + 3 shortcut BNs
        (lambda: resnet_basic((3, 4, 6, 3)), 19, 36),  # ResNet-34: 16 bn1 + 3 shortcut BNs
        (lambda: resnet_bottleneck((3, 4, 6, 3)), 36, 53),  # ResNet-50: 16 x (bn1, bn2) + 4
        (lambda: mobilenet_v2(), 17, 52),  # 16 expand BNs + the last conv's BN
        (lambda: densenet((2, 3, 2)), 4, 18),  # norm1 of each layer fed by a concat
        (lambda: residual_cnn(seed=0), 5, 9),  # the quickstart CNN
    ],
)
def test_removed_bn_counts(build, removed, total):
    model = build()
    report = find_less_bn(model)
    assert (report.num_removed, report.num_bn) == (removed, total)
    new = boost.LessBN(model)
    assert len(bn_names(new)) == total - removed
    assert sorted(bn_names(new)) == sorted(report.kept)


def test_resnet50_layout_removes_bn1_bn2_and_shortcut_bn_and_keeps_bn3_and_stem():
    report = find_less_bn(resnet_bottleneck())
    removed = set(report.removed_names)
    assert "conv1_bn" not in removed
    for s, n in enumerate((3, 4, 6, 3)):
        for b in range(n):
            p = f"conv{s + 2}_block{b + 1}_"
            assert {p + "1_bn", p + "2_bn"} <= removed
            assert p + "3_bn" not in removed
        assert f"conv{s + 2}_block1_0_bn" in removed
    patterns = {r.layer: r.pattern for r in report.removed}
    assert patterns["conv2_block1_1_bn"] == "ResidualStructureFirstStep"  # after max pooling
    assert patterns["conv3_block1_1_bn"] == "ResidualStructureBase"
    assert patterns["conv3_block2_1_bn"] == "ResidualStructureShortCut"


def test_basic_block_patterns_and_kept_bns():
    report = find_less_bn(resnet_basic((2, 2, 2, 2)))
    patterns = {r.layer: r.pattern for r in report.removed}
    assert patterns["s0b0_bn1"] == "BasicStructFirstStep"
    assert patterns["s0b1_bn1"] == "BasicStructShortCut"
    assert patterns["s1b0_bn1"] == patterns["s1b0_proj_bn"] == "BasicStructBase"
    assert all(n.endswith("bn2") or n == "stem_bn" for n in report.kept)


def test_mobilenet_v2_removes_expand_bns_and_head_bn():
    report = find_less_bn(mobilenet_v2())
    assert sorted(report.removed_names) == sorted(
        [f"block_{i}_expand_BN" for i in range(1, 17)] + ["Conv_1_bn"]
    )


def test_excluded_patterns_are_not_applied_by_less_bn_or_the_config():
    model = mobilenet_v2()
    lean = boost.LessBN(model, exclude_patterns="InvertedResidual2")
    assert "Conv_1_bn" in bn_names(lean)
    assert lean.less_bn_report.num_removed == 16
    config = {"boost": {"mode": "manual", "less_bn": True}, "less_bn": {"exclude_patterns": ["InvertedResidual2"]}}
    auto = boost.AutoBoost("O1", config)
    assert auto.config["less_bn"]["exclude_patterns"] == ("InvertedResidual2",)
    new, _ = auto.network_auto_process_train(model, keras.optimizers.SGD())
    assert sorted(new.less_bn_report.removed_names) == sorted(lean.less_bn_report.removed_names)


def test_unknown_excluded_pattern_names_the_valid_ones():
    with pytest.raises(ValueError, match=r"Unknown LessBN pattern\(s\) \['InvertedResidual9'\].*'InvertedResidual2'"):
        boost.LessBN(mobilenet_v2(), exclude_patterns=["InvertedResidual9"])
    with pytest.raises(ValueError, match="Unknown LessBN pattern"):
        boost.AutoBoost("O1", {"less_bn": {"exclude_patterns": "Bottleneck"}})
    with pytest.raises(TypeError, match="less_bn.exclude_patterns must be a name or a list of names"):
        boost.AutoBoost("O1", {"less_bn": {"exclude_patterns": 3}})


def test_densenet_removes_norm1_of_layers_fed_by_a_concatenation():
    report = find_less_bn(densenet((2, 3, 2)))
    assert sorted(report.removed_names) == sorted(
        ["conv2_block2_0_bn", "conv3_block2_0_bn", "conv3_block3_0_bn", "conv4_block2_0_bn"]
    )


def test_residual_cnn_report_names():
    report = find_less_bn(residual_cnn(seed=0))
    assert sorted(report.removed_names) == sorted(
        ["stage1_block1_bn1", "stage2_block1_bn1", "stage2_block1_proj_bn",
         "stage3_block1_bn1", "stage3_block1_proj_bn"]
    )
    text = str(report)
    assert "removed 5 of 9 BatchNormalization layers" in text
    assert "BasicStructBase (4)" in text and "stage2_block1_proj_bn" in text


@pytest.mark.skipif(
    keras.backend.backend() == "jax",
    reason="building keras.applications graphs on JAX compiles ~20 s of initializers per "
    "model; the matcher is backend-independent and the same layouts run above on JAX",
)
@pytest.mark.parametrize(
    "name, kwargs, removed, total",
    [
        ("ResNet50", {"input_shape": (32, 32, 3)}, 36, 53),
        ("MobileNetV2", {"input_shape": (32, 32, 3), "alpha": 0.35}, 17, 52),
        ("DenseNet121", {"input_shape": (32, 32, 3)}, 54, 121),
    ],
)
def test_keras_applications_counts(name, kwargs, removed, total):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = getattr(keras.applications, name)(weights=None, classes=10, **kwargs)
    report = find_less_bn(model)
    assert (report.num_removed, report.num_bn) == (removed, total)


# --- equivalence ------------------------------------------------------------------


def randomize(model, removed, seed=0):
    """Random weights everywhere; removed BNs set to the identity.

    Their moving statistics then look trained, so LessBN needs
    `remove_pretrained_bn=True` to remove them."""
    rng = np.random.default_rng(seed)
    for layer in model.layers:
        if isinstance(layer, L.BatchNormalization):
            c = layer.gamma.shape[0]
            if layer.name in removed:
                eps = layer.epsilon
                layer.set_weights([np.ones(c), np.zeros(c), np.zeros(c), np.full(c, 1.0 - eps)])
            else:
                layer.set_weights([rng.uniform(0.5, 1.5, c), rng.normal(0, 0.1, c),
                                   rng.normal(0, 0.1, c), rng.uniform(0.5, 2.0, c)])
        elif layer.weights:
            layer.set_weights([rng.normal(0, 0.3, w.shape).astype("float32") for w in layer.weights])


@pytest.mark.parametrize(
    "build",
    [lambda: resnet_basic((2, 2, 2, 2)), lambda: resnet_bottleneck((1, 1, 1, 1)),
     lambda: mobilenet_v2(), lambda: densenet((2, 2)), lambda: residual_cnn(seed=0)],
)
def test_outputs_equal_original_when_removed_bns_are_identity(build):
    model = build()
    report = find_less_bn(model)
    randomize(model, set(report.removed_names))
    x = np.random.default_rng(1).normal(size=(4,) + tuple(model.input_shape[1:])).astype("float32")
    expected = keras.ops.convert_to_numpy(model(x, training=False))
    new = boost.LessBN(model, remove_pretrained_bn=True)
    assert new.less_bn_report.num_removed == report.num_removed
    got = keras.ops.convert_to_numpy(new(x, training=False))
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
    # The check has teeth: a removed BN that is not the identity changes the output.
    bn = model.get_layer(report.removed_names[0])
    bn.set_weights([w * 0 + 2.0 for w in bn.get_weights()])
    changed = keras.ops.convert_to_numpy(model(x, training=False))
    assert not np.allclose(changed, got, rtol=1e-4, atol=1e-4)


def test_sequential_model():
    model = keras.Sequential(
        [keras.Input((8, 8, 3)), L.Conv2D(8, 1, use_bias=False), L.BatchNormalization(name="bn0"),
         L.ReLU(6.0), L.Conv2D(8, 1, use_bias=False), L.BatchNormalization(name="head_bn"),
         L.ReLU(6.0), L.GlobalAveragePooling2D(), L.Dense(3)],
        name="seq",
    )
    randomize(model, {"head_bn"})
    x = np.random.default_rng(0).normal(size=(2, 8, 8, 3)).astype("float32")
    new = boost.LessBN(model, remove_pretrained_bn=True)
    assert isinstance(new, keras.Sequential)
    assert bn_names(new) == ["bn0"]
    assert new.less_bn_report.removed[0].pattern == "InvertedResidual2"
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(new(x)), keras.ops.convert_to_numpy(model(x)), rtol=1e-4, atol=1e-4
    )


def test_nested_sub_model_is_matched_on_its_own_graph():
    inner = resnet_basic((1, 1))
    inputs = keras.Input((16, 16, 3))
    outer = keras.Model(inputs, L.Activation("softmax")(inner(inputs)), name="outer")
    report = find_less_bn(outer)
    assert report.num_removed == find_less_bn(inner).num_removed == 3
    new = boost.LessBN(outer)
    assert len(bn_names(new.layers[1])) == len(bn_names(inner)) - 3


# --- the input model is never mutated; the new model is independent ---------------


def test_input_model_untouched_and_independent_of_the_new_one():
    model = residual_cnn(seed=0)
    model.compile(optimizer=keras.optimizers.SGD(0.1),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    names, before = [l.name for l in model.layers], to_numpy(model.weights)
    new = boost.LessBN(model, fn_flag=True)
    assert [l.name for l in model.layers] == names
    assert not set(map(id, new.weights)) & set(map(id, model.weights))
    assert isinstance(new.get_layer("logits"), boost.layers.NormalizedDense)
    assert new.compiled  # re-compiled from the original's compile config
    x = np.random.default_rng(0).random((8, 28, 28, 1)).astype("float32")
    new.fit(x, np.zeros((8,), "int32"), epochs=1, verbose=0)
    for a, b in zip(before, to_numpy(model.weights)):
        np.testing.assert_array_equal(a, b)


# --- fn_flag ----------------------------------------------------------------------


def test_fn_flag_replaces_the_last_dense_from_its_kernel():
    model = residual_cnn(seed=0)
    new = boost.LessBN(model, fn_flag=True)
    head = new.get_layer("logits")
    assert isinstance(head, boost.layers.NormalizedDense)
    np.testing.assert_array_equal(
        keras.ops.convert_to_numpy(head.kernel), keras.ops.convert_to_numpy(model.get_layer("logits").kernel)
    )
    # The initial scale is matched_scale's, not MindSpore's 1: sqrt(d * mean_j ||w_j||^2).
    w = keras.ops.convert_to_numpy(model.get_layer("logits").kernel).astype(np.float64)
    expected = np.sqrt(w.shape[0] * (w**2).sum(axis=0).mean())
    np.testing.assert_allclose(float(keras.ops.convert_to_numpy(head.scale)), expected, rtol=1e-6)
    assert head.initial_scale == pytest.approx(expected, rel=1e-6)
    assert "NormalizedDense" in str(new.less_bn_report)
    assert f"initial scale {expected:.3g}" in new.less_bn_report.head


def test_fn_flag_with_dense_not_last_warns_and_keeps_the_dense():
    model = resnet_basic((1, 1))
    flat = keras.Model(model.inputs, L.Activation("softmax")(model.outputs[0]))
    with pytest.warns(boost.NoEffectWarning, match="does not produce a model output"):
        new = boost.LessBN(flat, fn_flag=True)
    assert isinstance(new.get_layer("logits"), L.Dense)
    assert new.less_bn_report.num_removed == 3


def numpy_head(f, w, s):
    """NormalizedDense in NumPy (no norm reaches the 1e-4 floor here)."""
    return s * (f / np.linalg.norm(f, axis=-1, keepdims=True)) @ (w / np.linalg.norm(w, axis=0))


def features_and_head(activation, seed=0):
    """The quickstart CNN with a head of `activation`, and the head's input model."""
    base = residual_cnn(seed=seed)
    features = base.get_layer("pool").output
    init = keras.initializers.GlorotUniform(seed=seed + 7)
    out = L.Dense(10, activation=activation, kernel_initializer=init, name="logits")(features)
    return keras.Model(base.input, out, name="cnn"), keras.Model(base.input, features)


@pytest.mark.parametrize("activation", [None, "linear", "softmax"])
def test_fn_flag_swaps_a_linear_or_softmax_head_with_the_numpy_formula(activation):
    model, features = features_and_head(activation)
    report = find_less_bn(model)
    randomize(model, set(report.removed_names))  # removed BNs: identity, so features agree
    new = boost.LessBN(model, fn_flag=True, remove_pretrained_bn=True)
    assert new.less_bn_report.num_removed == report.num_removed
    head = new.get_layer("logits")
    assert isinstance(head, boost.layers.NormalizedDense)
    x = np.random.default_rng(2).random((4, 28, 28, 1)).astype("float32")
    f = keras.ops.convert_to_numpy(features(x, training=False)).astype(np.float64)
    w = keras.ops.convert_to_numpy(model.get_layer("logits").kernel).astype(np.float64)
    s = np.sqrt(w.shape[0] * (w**2).sum(axis=0).mean())
    expected = numpy_head(f, w, s)
    if activation == "softmax":
        expected = np.exp(expected) / np.exp(expected).sum(-1, keepdims=True)
    got = keras.ops.convert_to_numpy(new(x, training=False))
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("activation", ["sigmoid", "relu", "tanh"])
def test_fn_flag_keeps_a_head_with_another_activation(activation):
    model, _ = features_and_head(activation)
    with pytest.warns(boost.NoEffectWarning, match=f"activation '{activation}'.*Dense is kept"):
        new = boost.LessBN(model, fn_flag=True)
    head = new.get_layer("logits")
    assert type(head) is L.Dense and head.activation is model.get_layer("logits").activation
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(head.kernel),
                                  keras.ops.convert_to_numpy(model.get_layer("logits").kernel))
    report = new.less_bn_report
    assert report.head is None and report.num_removed == 5  # the BNs still go
    assert any(f"activation '{activation}'" in n for n in report.notes)
    assert f"activation '{activation}'" in str(report)


def test_kept_head_and_no_bn_removed_returns_the_model_unchanged():
    inputs, _ = dense_graph()
    model = keras.Model(inputs, L.Dense(1, activation="sigmoid", name="out")(inputs))
    with pytest.warns(boost.NoEffectWarning) as record:
        same = boost.LessBN(model, fn_flag=True)
    assert same is model
    messages = [str(w.message) for w in record]
    assert any("activation 'sigmoid'" in m for m in messages)
    assert any("found nothing to remove" in m for m in messages)


def test_head_swap_alone_swaps_and_warns_that_no_bn_was_removed():
    model = keras.Model(*dense_graph())  # Dense-BN-ReLU-Dense: no LessBN pattern
    x = np.random.default_rng(0).normal(size=(6, 5)).astype("float32")
    before = to_numpy(model.weights)
    with pytest.warns(boost.NoEffectWarning, match="none was removed; only the head changed"):
        new = boost.LessBN(model, fn_flag=True)
    assert new is not model
    assert isinstance(new.get_layer("d2"), boost.layers.NormalizedDense)
    assert [l.name for l in new.layers if isinstance(l, L.BatchNormalization)] == ["bn"]
    assert new.less_bn_report.num_removed == 0 and "d2" in new.less_bn_report.head
    assert any("only the head" in n for n in new.less_bn_report.notes)
    # Reference: the unchanged model's hidden features through the NumPy head.
    hidden = keras.Model(model.input, model.get_layer("d2").input)
    f = keras.ops.convert_to_numpy(hidden(x)).astype(np.float64)
    w = keras.ops.convert_to_numpy(model.get_layer("d2").kernel).astype(np.float64)
    s = float(keras.ops.convert_to_numpy(new.get_layer("d2").scale))
    expected = numpy_head(f, w, s)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(new(x)), expected, rtol=1e-4, atol=1e-5)
    for a, b in zip(before, to_numpy(model.weights)):
        np.testing.assert_array_equal(a, b)


def test_head_scale_rule_on_random_inputs():
    """LessBN's head on isotropic inputs: |logit| <= s and the Dense's logit std."""
    model = residual_cnn(seed=3)
    dense = model.get_layer("logits")
    head = boost.LessBN(model, fn_flag=True).get_layer("logits")
    s = float(keras.ops.convert_to_numpy(head.scale))
    x = np.random.default_rng(0).normal(size=(8000, dense.kernel.shape[0])).astype("float32")
    y = keras.ops.convert_to_numpy(head(x))
    reference = x.astype(np.float64) @ keras.ops.convert_to_numpy(dense.kernel).astype(np.float64)
    assert np.abs(y).max() <= s * (1 + 1e-6)
    np.testing.assert_allclose(y.std(), reference.std(), rtol=0.03)
    np.testing.assert_allclose(y.std(), s / np.sqrt(x.shape[1]), rtol=0.03)
    # Much wider than MindSpore's unit scale, whose cosine logits have std 1/sqrt(64).
    assert s > 5


# --- which heads fn_flag swaps, and what they keep (issue 28, class 2) ----------------


def two_heads(compiled):
    """A softmax classifier and a linear regression head, the regression one
    last in `model.layers` (the Dense the old rule swapped)."""
    image, features = keras.Input((8, 8, 3), name="image"), keras.Input((5,), name="features")
    x = L.BatchNormalization(name="tail_bn")(L.Conv2D(4, 1, use_bias=False)(image))
    cls = L.Dense(3, activation="softmax", name="cls")(L.GlobalAveragePooling2D()(L.ReLU(6.0)(x)))
    reg = L.Dense(2, kernel_regularizer=keras.regularizers.L2(0.1), name="reg")(features)
    model = keras.Model([image, features], [cls, reg], name="two_heads")
    assert model.layers[-1].name == "reg"
    if compiled:
        model.compile(optimizer="sgd", loss={"cls": "sparse_categorical_crossentropy", "reg": "mse"})
    return model


def total(losses):
    return float(sum(np.sum(keras.ops.convert_to_numpy(l)) for l in losses))


@pytest.mark.parametrize("compiled", [False, True])
def test_fn_flag_swaps_the_classification_head_and_keeps_the_regression_one(compiled):
    model = two_heads(compiled)
    new = boost.LessBN(model, fn_flag=True)
    assert isinstance(new.get_layer("cls"), boost.layers.NormalizedDense)
    assert type(new.get_layer("reg")) is L.Dense
    assert total(model.losses) > 0
    assert total(new.losses) == pytest.approx(total(model.losses))  # reg's L2 stays
    report = new.less_bn_report
    assert "'cls'" in report.head and "'reg'" not in report.head
    assert any("'reg'" in n and "regression output and kept" in n for n in report.notes)


@pytest.mark.parametrize(
    "loss, swapped",
    [("mse", False), (keras.losses.MeanAbsoluteError(), False), ("categorical_crossentropy", True),
     (keras.losses.SparseCategoricalCrossentropy(from_logits=True), True), (None, True)],
    ids=["mse", "mae", "cce", "scce", "not_compiled"],
)
def test_a_linear_head_is_swapped_only_under_a_classification_loss(loss, swapped):
    model = residual_cnn(seed=0)
    if loss is not None:
        model.compile(optimizer="sgd", loss=loss)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always", boost.NoEffectWarning)
        new = boost.LessBN(model, fn_flag=True)
    assert isinstance(new.get_layer("logits"), boost.layers.NormalizedDense) is swapped
    notes = " ".join(new.less_bn_report.notes)
    if loss is None:  # the bench's and the quickstart's case: logits, not compiled yet
        assert "taken for classification logits" in notes
    if not swapped:
        assert "not a classification (crossentropy) loss" in notes
        assert any("no head replaced" in str(w.message) for w in record)


def test_swapped_head_keeps_regularizers_constraint_and_dtype_policy():
    base = residual_cnn(seed=0)
    head = L.Dense(
        10, activation="softmax", kernel_regularizer=keras.regularizers.L2(0.01),
        bias_regularizer=keras.regularizers.L2(0.5), kernel_constraint=keras.constraints.NonNeg(),
        activity_regularizer=keras.regularizers.L1(0.001), dtype="mixed_bfloat16", name="head",
    )
    model = keras.Model(base.input, head(base.get_layer("pool").output))
    model.get_layer("head").bias.assign(np.ones(10))  # a bias L2 that would show if kept
    new = boost.LessBN(model, fn_flag=True).get_layer("head")
    assert isinstance(new, boost.layers.NormalizedDense)
    assert new.kernel_regularizer.get_config() == {"l2": pytest.approx(0.01)}
    assert isinstance(new.kernel_constraint, keras.constraints.NonNeg)
    assert new.kernel.constraint is new.kernel_constraint
    assert new.activity_regularizer.get_config() == {"l1": pytest.approx(0.001)}
    assert new.dtype_policy.name == "mixed_bfloat16"
    kernel = keras.ops.convert_to_numpy(model.get_layer("head").kernel)
    assert total(new.losses) == pytest.approx(0.01 * float(np.sum(kernel.astype(np.float64) ** 2)), rel=1e-5)
    text = boost.LessBN(model, fn_flag=True).less_bn_report.head
    assert "kernel, kernel_regularizer, kernel_constraint, activity_regularizer and dtype policy " \
           "'mixed_bfloat16' kept; bias, bias_regularizer dropped" in text


def test_frozen_head_is_kept():
    model, _ = features_and_head("softmax")
    model.get_layer("logits").trainable = False
    with pytest.warns(boost.NoEffectWarning, match="'logits' is frozen"):
        new = boost.LessBN(model, fn_flag=True)
    assert type(new.get_layer("logits")) is L.Dense and new.get_layer("logits").trainable is False


def test_autoboost_swaps_no_head_where_no_bn_is_removed():
    """ResNet50V2 and EfficientNet: O1's head alone slowed early training."""
    model = keras.Model(*dense_graph())  # Dense-BN-ReLU-Dense: no LessBN pattern
    with pytest.warns(boost.NoEffectWarning, match="no head replaced, because no BatchNormalization"):
        new, _ = boost.AutoBoost("O1", MANUAL_O1_HEAD).network_auto_process_train(model, keras.optimizers.SGD())
    assert new is model and type(new.get_layer("d2")) is L.Dense
    with pytest.warns(boost.NoEffectWarning, match="no head replaced"):
        boosted = boost.BoostModel.from_model(model, "O1", boost_config_dict=MANUAL_O1_HEAD)
    assert type(boosted.get_layer("d2")) is L.Dense
    with pytest.warns(boost.NoEffectWarning, match="no head replaced"):
        assert boost.AutoBoost("O1", MANUAL_O1_HEAD).network_auto_process_eval(model) is model


# --- frozen and trained BNs stay (issue 28, class 3) ------------------------------------


def frozen_base(trainable=False):
    """`residual_cnn` as a nested base, frozen and called with training=False,
    under a new head: the keras-io transfer-learning shape."""
    base = residual_cnn(seed=0)
    base.trainable = trainable
    inputs = keras.Input((28, 28, 1))
    features = base(inputs, training=False)
    return keras.Model(inputs, L.Dense(4, activation="softmax", name="new_head")(features)), base


def test_bn_of_a_frozen_layer_or_model_is_kept_unless_opted_in():
    model = residual_cnn(seed=0)
    model.get_layer("stage1_block1_bn1").trainable = False
    report = find_less_bn(model)
    assert report.num_removed == 4 and report.protected == ("stage1_block1_bn1",)
    assert "stage1_block1_bn1" in report.kept
    assert any("kept because they are frozen" in n and "'stage1_block1_bn1'" in n for n in report.notes)
    assert find_less_bn(model, remove_pretrained_bn=True).num_removed == 5

    outer, _ = frozen_base()
    with pytest.warns(boost.NoEffectWarning, match="(?s)frozen or trained.*remove_pretrained_bn"):
        assert boost.LessBN(outer) is outer
    assert find_less_bn(outer).protected == tuple(find_less_bn(residual_cnn(seed=0)).removed_names)
    assert boost.LessBN(outer, remove_pretrained_bn=True).less_bn_report.num_removed == 5


def test_trained_bn_is_kept():
    model = residual_cnn(seed=0)
    bn = model.get_layer("stage2_block1_proj_bn")
    bn.moving_variance.assign(np.full(bn.moving_variance.shape, 0.7, "float32"))
    report = boost.LessBN(model).less_bn_report
    assert report.protected == ("stage2_block1_proj_bn",) and report.num_removed == 4
    assert any("kept because they are trained" in n for n in report.notes)


def test_remove_pretrained_bn_through_the_config():
    outer, _ = frozen_base()
    config = {"boost": {"mode": "manual", "grad_freeze": False, "fused_batch_norm": False}}
    with pytest.warns(boost.NoEffectWarning, match="frozen or trained"):
        kept, _ = boost.AutoBoost("O1", config).network_auto_process_train(outer, keras.optimizers.SGD())
    assert kept is outer
    config["less_bn"] = {"remove_pretrained_bn": True}
    new, _ = boost.AutoBoost("O1", config).network_auto_process_train(outer, keras.optimizers.SGD())
    assert new.less_bn_report.num_removed == 5
    with pytest.raises(TypeError, match="less_bn.remove_pretrained_bn must be a bool"):
        boost.AutoBoost("O1", {"less_bn": {"remove_pretrained_bn": "yes"}})
    with pytest.raises(TypeError, match="remove_pretrained_bn must be True or False, got 1"):
        boost.LessBN(outer, remove_pretrained_bn=1)


@pytest.mark.parametrize("surgery", ["less_bn_head", "fuse_batch_norm"])
def test_copy_of_a_frozen_base_can_be_unfrozen_like_the_original(surgery):
    """On TensorFlow `base.trainable = True` is skipped when the flag is
    already True: the copy must keep the base's False for it to reach the
    sublayers (fine-tuning trained 2 variables instead of all)."""
    if surgery == "fuse_batch_norm" and keras.backend.backend() == "jax":
        pytest.skip("fuse_batch_norm makes no copy on JAX")
    outer, base = frozen_base()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", boost.NoEffectWarning)
        new = (boost.LessBN(outer, fn_flag=True) if surgery == "less_bn_head"
               else boost.surgery.fuse_batch_norm(outer))
    new_base = new.get_layer(base.name)
    assert new_base.trainable is False
    assert len(new.trainable_variables) == len(outer.trainable_variables) == 2
    base.trainable = new_base.trainable = True
    assert len(new.trainable_variables) == len(outer.trainable_variables) > 2
    assert all(l.trainable for l in new_base.layers)


# --- layers that cannot be copied; the input model is never changed -----------------


class StrictScale(L.Layer):
    """A layer whose __init__ does not take Keras' base keywords (name, dtype...)."""

    def __init__(self, factor):
        super().__init__()
        self.factor = factor

    def call(self, x):
        return x * self.factor


def snapshot(model):
    """Everything LessBN could change on a model, for an identity check."""
    state = {"config": repr(model.get_config()), "attrs": sorted(model.__dict__)}
    for layer in model._flatten_layers(include_self=False, recursive=True):
        state[layer.name] = (
            type(layer), len(layer._inbound_nodes), len(layer._outbound_nodes),
            sorted(layer.__dict__), [id(w) for w in layer.weights],
            [np.array(keras.ops.convert_to_numpy(w)).tobytes() for w in layer.weights],
        )
    return state


def strict_models():
    base = residual_cnn(seed=0)
    x = StrictScale(2.0)(base.get_layer("pool").output)
    with_bns = keras.Model(base.inputs, base.get_layer("logits")(x), name="with_bns")
    inputs = keras.Input((5,))
    head_only = keras.Model(inputs, L.Dense(3, name="head")(StrictScale(0.5)(inputs)),
                            name="head_only")
    return [(with_bns, False), (with_bns, True), (head_only, True)]


@pytest.mark.parametrize("case", range(3))
def test_layer_that_cannot_be_copied_raises_a_type_error_with_the_fix(case):
    model, fn_flag = strict_models()[case]
    strict = next(l for l in model.layers if isinstance(l, StrictScale))
    before = snapshot(model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", boost.NoEffectWarning)
        with pytest.raises(TypeError) as info:
            boost.LessBN(model, fn_flag=fn_flag)
    message = str(info.value)
    assert f"layer {strict.name!r}" in message and "StrictScale" in message
    assert "cannot be re-created from its config" in message
    assert "get_config" in message and "**kwargs" in message
    assert '{"boost": {"mode": "manual", "less_bn": false}}' in message
    assert isinstance(info.value.__cause__, Exception)  # the original error is chained
    assert snapshot(model) == before
    assert not hasattr(model, "less_bn_report")


@pytest.mark.parametrize("kind", ["functional", "sequential", "nested", "head_only"])
def test_less_bn_does_not_mutate_the_input_model(kind):
    if kind == "functional":
        model = residual_cnn(seed=0)
        model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    elif kind == "sequential":
        model = keras.Sequential(
            [keras.Input((8, 8, 3)), L.Conv2D(8, 1, use_bias=False), L.ReLU(6.0),
             L.Conv2D(8, 1, use_bias=False), L.BatchNormalization(name="head_bn"), L.ReLU(6.0),
             L.GlobalAveragePooling2D(), L.Dense(3, kernel_initializer="ones")])
    elif kind == "nested":
        inner = residual_cnn(seed=0)
        inputs = keras.Input((28, 28, 1))
        model = keras.Model(inputs, L.Activation("softmax")(inner(inputs)))
    else:
        model = keras.Model(*dense_graph())
    before = snapshot(model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", boost.NoEffectWarning)
        new = boost.LessBN(model, fn_flag=True)
    assert new is not model
    assert snapshot(model) == before
    assert not hasattr(model, "less_bn_report")
    assert not set(map(id, new.weights)) & set(map(id, model.weights))


# --- nothing to do, bad input -----------------------------------------------------


def test_no_match_warns_and_returns_the_model_unchanged():
    model = keras.Model(*dense_graph())
    with pytest.warns(boost.NoEffectWarning, match="found nothing to remove"):
        same = boost.LessBN(model)
    assert same is model


def test_shared_bn_called_twice_is_kept_unless_every_call_matches():
    inputs = keras.Input((8, 8, 4))
    conv1, conv2 = L.Conv2D(4, 3, padding="same"), L.Conv2D(4, 3, padding="same")
    shared = L.BatchNormalization(name="shared_bn")
    y = L.ReLU()(inputs)
    a = L.BatchNormalization(name="bn2")(conv2(L.ReLU()(shared(conv1(y)))))
    b = L.ReLU()(shared(conv1(L.Dense(4)(inputs))))  # second call: not in a pattern
    out = L.Add()([a, y])
    model = keras.Model(inputs, [out, b])
    report = find_less_bn(model)
    assert "shared_bn" in report.kept
    assert any("shared_bn" in n for n in report.notes)


class Subclassed(keras.Model):
    def __init__(self):
        super().__init__()
        self.conv = L.Conv2D(4, 3)
        self.bn = L.BatchNormalization()

    def call(self, x):
        return self.bn(self.conv(x))


@pytest.mark.parametrize(
    "bad, error, match",
    [
        ("model", TypeError, "keras.Model"),
        (keras.layers.Dense(2), TypeError, "keras.Model"),
        (Subclassed(), TypeError, "functional API"),
        (keras.Sequential([L.Dense(2)]), ValueError, "built"),
    ],
)
def test_bad_models(bad, error, match):
    if isinstance(bad, Subclassed):
        bad(np.zeros((1, 8, 8, 3), "float32"))
    with pytest.raises(error, match=match):
        boost.LessBN(bad)


def test_fn_flag_must_be_bool():
    with pytest.raises(TypeError, match="fn_flag must be True or False, got 'yes'"):
        boost.LessBN(residual_cnn(seed=0), fn_flag="yes")


def test_patterns_are_data_and_validated():
    assert len(patterns_lib.PATTERNS) == 16
    with pytest.raises(ValueError, match="unknown layer kinds"):
        patterns_lib.Pattern("bad", (("bn-", "convolution"),))
    with pytest.raises(ValueError, match="removes nothing"):
        patterns_lib.Pattern("bad", (("bn", "conv"),))
    # A custom pattern list: only the projection shortcut BNs.
    only_shortcut = patterns_lib.Pattern("shortcut", (("bn", "conv", "relu", "bn", "conv", "relu"),
                                                      ("bn-", "conv")))
    report = find_less_bn(residual_cnn(seed=0), patterns=[only_shortcut])
    assert sorted(report.removed_names) == ["stage2_block1_proj_bn", "stage3_block1_proj_bn"]


def test_saved_and_reloaded_lessbn_model():
    import os
    import tempfile

    new = boost.LessBN(residual_cnn(seed=0), fn_flag=True)
    x = np.random.default_rng(0).random((2, 28, 28, 1)).astype("float32")
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "m.keras")
        new.save(path)
        loaded = keras.saving.load_model(path)
    assert isinstance(loaded.get_layer("logits"), boost.layers.NormalizedDense)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(loaded(x)), keras.ops.convert_to_numpy(new(x)), rtol=1e-6
    )


# --- AutoBoost wiring -------------------------------------------------------------

MANUAL_O1 = {"boost": {"mode": "manual", "grad_freeze": False}}
# The NormalizedDense head is off by default (it cost MobileNetV2 1.15-1.95 points).
MANUAL_O1_HEAD = {**MANUAL_O1, "less_bn": {"fn_flag": True}}


def test_autoboost_o1_applies_less_bn_and_gc_without_a_head_by_default():
    new, opt = boost.AutoBoost("O1", MANUAL_O1).network_auto_process_train(
        residual_cnn(seed=0), keras.optimizers.SGD()
    )
    assert len(bn_names(new)) == 4 and type(new.get_layer("logits")) is L.Dense
    assert isinstance(opt.inner_optimizer, boost.GradientCentralization)


def test_autoboost_o1_applies_less_bn_fn_and_gc():
    model = residual_cnn(seed=0)
    user_opt = keras.optimizers.SGD(0.05, momentum=0.9)
    ab = boost.AutoBoost("O1", MANUAL_O1_HEAD)
    new, opt = ab.network_auto_process_train(model, user_opt)
    assert new is not model and len(bn_names(new)) == 4
    assert isinstance(new.get_layer("logits"), boost.layers.NormalizedDense)
    assert isinstance(opt, boost.BoostOptimizer)
    assert isinstance(opt.inner_optimizer, boost.GradientCentralization)
    assert opt.inner_optimizer.inner_optimizer is user_opt  # unbuilt: the same settings
    assert ab.network_auto_process_eval(new) is new
    eval_model = ab.network_auto_process_eval(model)
    assert [l.name for l in eval_model.layers] == [l.name for l in new.layers]
    new.compile(optimizer=opt, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x = np.random.default_rng(0).random((16, 28, 28, 1)).astype("float32")
    new.fit(x, np.arange(16) % 10, batch_size=8, epochs=1, verbose=0)
    assert int(opt.iterations) == 2


def test_autoboost_flags_fn_and_gc_off():
    config = {"boost": {"mode": "manual", "grad_freeze": False},
              "less_bn": {"fn_flag": False, "gc_flag": False}}
    new, opt = boost.AutoBoost("O1", config).network_auto_process_train(
        residual_cnn(seed=0), keras.optimizers.SGD()
    )
    assert isinstance(new.get_layer("logits"), L.Dense)
    assert isinstance(opt.inner_optimizer, keras.optimizers.SGD)


def test_autoboost_recreates_a_built_optimizer_and_maps_weight_decay_exclusions():
    model = residual_cnn(seed=0)
    user_opt = keras.optimizers.SGD(0.05, momentum=0.9, weight_decay=1e-4)
    user_opt.exclude_from_weight_decay(var_list=[model.get_layer("stem_conv").kernel])
    new, opt = boost.AutoBoost("O1", MANUAL_O1).network_auto_process_train(model, user_opt)
    sgd = opt.inner_optimizer.inner_optimizer
    assert not sgd._use_weight_decay(new.get_layer("stem_conv").kernel)
    assert sgd._use_weight_decay(new.get_layer("stage1_block1_conv1").kernel)

    built = keras.optimizers.SGD(0.07, momentum=0.9)
    built.build(model.trainable_variables)
    with pytest.warns(UserWarning, match="re-created from its config"):
        _, opt = boost.AutoBoost("O1", MANUAL_O1).network_auto_process_train(model, built)
    fresh = opt.inner_optimizer.inner_optimizer
    assert fresh is not built and not fresh.built
    assert float(fresh.learning_rate) == pytest.approx(0.07) and fresh.momentum == 0.9


def test_autoboost_subclassed_model_warns_and_keeps_the_model():
    model = Subclassed()
    model(np.zeros((1, 8, 8, 3), "float32"))
    with pytest.warns(boost.NoEffectWarning, match="subclassed model"):
        new, opt = boost.AutoBoost("O1", MANUAL_O1).network_auto_process_train(
            model, keras.optimizers.SGD())
    assert new is model
    assert isinstance(opt.inner_optimizer, boost.GradientCentralization)


def test_autoboost_layer_that_cannot_be_copied_says_how_to_switch_less_bn_off():
    model, _ = strict_models()[0]
    before = snapshot(model)
    with pytest.raises(TypeError, match='(?s)cannot be re-created from its config.*"less_bn": false'):
        boost.AutoBoost("O1", MANUAL_O1).network_auto_process_train(model, keras.optimizers.SGD())
    assert snapshot(model) == before


def test_wrap_with_less_bn_applies_gc():
    # The warning that the surgery needs a model: test_centralization.py.
    opt = boost.wrap(keras.optimizers.SGD(), "O1", MANUAL_O1)
    assert isinstance(opt.inner_optimizer, boost.GradientCentralization)


def test_from_model_applies_the_surgery_and_direct_construction_warns():
    config = {"boost": {"mode": "manual", "grad_freeze": False}}
    original = residual_cnn(seed=0)
    boosted = boost.BoostModel.from_model(original, boost_level="O1", boost_config_dict=config)
    assert boosted.less_bn_report.num_removed == 5
    assert sum(isinstance(l, keras.layers.BatchNormalization) for l in boosted.layers) == 4
    assert sum(isinstance(l, keras.layers.BatchNormalization) for l in original.layers) == 9
    with pytest.warns(boost.NoEffectWarning, match="LessBN would remove 5 BatchNormalization"):
        residual_cnn(seed=0, model_cls=boost.BoostModel, boost_level="O1", boost_config_dict=config)


def test_boost_model_keeps_its_class_and_level():
    config = {"boost": {"mode": "manual", "grad_freeze": False}}
    model = residual_cnn(seed=0, model_cls=boost.BoostModel, boost_level="O1", boost_config_dict=config)
    new = boost.LessBN(model)
    assert isinstance(new, boost.BoostModel)
    assert new.boost_level == "O1" and new.boost_config == model.boost_config
    assert new.less_bn_report.num_removed == 5


@pytest.mark.parametrize("level", ["O1", "O2"])
def test_from_model_reports_on_a_model_without_batch_norm(level):
    # The README's `print(model.less_bn_report)` answers on every O1/O2 model,
    # also where LessBN had nothing to remove.
    model = keras.Model(*dense_graph(batch_norm=False), name="mlp")
    boosted = boost.BoostModel.from_model(model, boost_level=level)
    report = boosted.less_bn_report
    assert (report.num_removed, report.num_bn, report.head) == (0, 0, None)
    assert report.unchanged == "it has no BatchNormalization layer"
    assert str(report) == "LessBN on 'mlp': nothing removed: it has no BatchNormalization layer."
    assert "unchanged='it has no BatchNormalization layer'" in repr(report)


def test_from_model_reports_why_batch_norms_in_no_pattern_stay():
    model = keras.Model(*dense_graph(), name="mlp")
    report = boost.BoostModel.from_model(model, boost_level="O1").less_bn_report
    assert report.removed == () and report.kept == ("bn",)
    assert str(report).startswith("LessBN on 'mlp': nothing removed: none of its 1 BatchNormalization layers is in")


def test_from_model_reports_a_subclassed_model_unchanged():
    model = Subclassed()
    model(np.zeros((1, 8, 8, 3), "float32"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", boost.NoEffectWarning)
        boosted = boost.BoostModel.from_model(model, boost_level="O1")
    report = boosted.less_bn_report
    assert report.num_removed == 0 and report.num_bn == 1
    assert report.unchanged.startswith("it is a subclassed model")


@pytest.mark.parametrize("level, config", [("O0", None), ("O1", {"boost": {"mode": "manual", "less_bn": False}})])
def test_from_model_report_is_none_with_less_bn_off(level, config):
    boosted = boost.BoostModel.from_model(residual_cnn(seed=0), boost_level=level, boost_config_dict=config)
    assert boosted.less_bn_report is None
    assert all(isinstance(l, keras.layers.BatchNormalization) for l in boosted.layers if "bn" in l.name)


def test_a_level_on_a_model_without_batch_norm_is_quiet_the_manual_switch_warns():
    # O1 turned LessBN on, not the user: the report and the summary line say
    # that nothing was removed; a user who asked for LessBN by name is warned.
    inputs = keras.Input((6,))
    outputs = keras.layers.Dense(3)(keras.layers.Dense(8, activation="relu")(inputs))
    model = keras.Model(inputs, outputs)
    with warnings.catch_warnings():
        warnings.simplefilter("error", boost.NoEffectWarning)
        boost.AutoBoost("O1").network_auto_process_train(model, keras.optimizers.SGD(0.1))
    manual = boost.AutoBoost("O0", {"boost": {"mode": "manual", "less_bn": True}})
    with pytest.warns(boost.NoEffectWarning, match="LessBN found nothing to remove"):
        manual.network_auto_process_train(model, keras.optimizers.SGD(0.1))
