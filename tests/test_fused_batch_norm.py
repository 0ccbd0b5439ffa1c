"""FusedBatchNormalization and fuse_batch_norm against NumPy's batch norm and Keras' own layer."""

import warnings

import keras
import numpy as np
import pytest

import keras_boost as boost
from keras_boost.layers import FusedBatchNormalization

FUSED_BACKEND = keras.backend.backend() in ("tensorflow", "torch")
EPSILON, MOMENTUM = 1e-3, 0.9


def numpy_batch_norm_step(x, w, gamma, beta, upstream):
    """conv1x1(x, w) -> training-mode BN, in float64: the output, dL/dw,
    dL/dgamma, dL/dbeta for L = sum(y * upstream) / batch, and the batch's
    mean and biased variance."""
    x, w, gamma, beta, upstream = (np.asarray(a, np.float64) for a in (x, w, gamma, beta, upstream))
    h = x @ w  # a 1x1 convolution, channels last
    axes = (0, 1, 2)
    mean, var = h.mean(axes), h.var(axes)
    inv = 1.0 / np.sqrt(var + EPSILON)
    xhat = (h - mean) * inv
    y = gamma * xhat + beta
    dy = upstream / x.shape[0]
    dgamma, dbeta = (dy * xhat).sum(axes), dy.sum(axes)
    dxhat = dy * gamma
    dh = inv * (dxhat - dxhat.mean(axes) - xhat * (dxhat * xhat).mean(axes))
    dw = np.einsum("nhwi,nhwo->io", x, dh)
    return y, dw, dgamma, dbeta, mean, var


def conv_bn_model(bn_class):
    inputs = keras.Input((5, 6, 3))
    h = keras.layers.Conv2D(4, 1, use_bias=False, name="conv")(inputs)
    outputs = bn_class(momentum=MOMENTUM, epsilon=EPSILON, name="bn")(h)
    return keras.Model(inputs, outputs)


def linear_loss(upstream, y_pred):
    return keras.ops.sum(y_pred * upstream, axis=(1, 2, 3))  # fit averages over the batch


def test_one_sgd_step_equals_numpy_batch_norm():
    rng = np.random.default_rng(0)
    x = (rng.normal(size=(8, 5, 6, 3)) * 2 + 1).astype("float32")
    upstream = rng.normal(size=(8, 5, 6, 4)).astype("float32")
    model = conv_bn_model(FusedBatchNormalization)
    w = rng.normal(size=(3, 4)).astype("float32")
    gamma, beta = np.linspace(0.5, 1.5, 4).astype("float32"), np.linspace(-0.2, 0.3, 4).astype("float32")
    model.get_layer("conv").kernel.assign(w[None, None])
    bn = model.get_layer("bn")
    bn.gamma.assign(gamma)
    bn.beta.assign(beta)
    y, dw, dgamma, dbeta, mean, var = numpy_batch_norm_step(x, w, gamma, beta, upstream)

    model.compile(optimizer=keras.optimizers.SGD(1.0), loss=linear_loss)
    model.train_on_batch(x, upstream)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(model.get_layer("conv").kernel)[0, 0], w - dw, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(bn.gamma), gamma - dgamma, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(bn.beta), beta - dbeta, rtol=1e-4, atol=1e-5)
    # Keras' moving-statistics update, with the biased variance.
    np.testing.assert_allclose(keras.ops.convert_to_numpy(bn.moving_mean), (1 - MOMENTUM) * mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(bn.moving_variance), MOMENTUM + (1 - MOMENTUM) * var, rtol=1e-5)
    # The forward output of a training call on the original weights.
    model.get_layer("conv").kernel.assign(w[None, None])
    bn.gamma.assign(gamma)
    bn.beta.assign(beta)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(model(x, training=True)), y, rtol=1e-4, atol=1e-5)


def test_same_config_weights_and_inference_as_keras():
    keras_bn = keras.layers.BatchNormalization(momentum=0.8, epsilon=1e-5, center=False, name="b")
    fused = FusedBatchNormalization.from_config(keras_bn.get_config())
    assert fused.get_config() == keras_bn.get_config()
    x = np.random.default_rng(1).normal(size=(4, 3, 3, 5)).astype("float32")
    keras_bn.build(x.shape)
    fused.build(x.shape)
    assert [v.path.split("/")[-1] for v in fused.weights] == [v.path.split("/")[-1] for v in keras_bn.weights]
    fused.set_weights(keras_bn.get_weights())
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(fused(x, training=False)), keras.ops.convert_to_numpy(keras_bn(x, training=False))
    )
    # Training without beta (center=False): the same output and statistics as Keras'.
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(fused(x, training=True)),
        keras.ops.convert_to_numpy(keras_bn(x, training=True)), rtol=1e-5, atol=1e-5,
    )
    for a, b in zip(fused.get_weights(), keras_bn.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_cases_without_a_fused_kernel_take_keras_path():
    x = np.random.default_rng(2).normal(size=(6, 7)).astype("float32")  # rank 2
    fused, plain = FusedBatchNormalization(), keras.layers.BatchNormalization()
    for layer in (fused, plain):
        layer.build(x.shape)
    assert not fused._fused_applies(x, True, None)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(fused(x, training=True)), keras.ops.convert_to_numpy(plain(x, training=True)),
        rtol=1e-6, atol=1e-6,
    )
    image = np.zeros((2, 3, 3, 4), "float32")
    assert not FusedBatchNormalization(axis=1)._fused_applies(image, True, None)
    assert not FusedBatchNormalization()._fused_applies(image, False, None)
    assert FusedBatchNormalization()._fused_applies(image, True, None) is FUSED_BACKEND
    assert FusedBatchNormalization.fused_kernel_available() is FUSED_BACKEND


def small_cnn(seed=0, nested=False):
    init = keras.initializers.HeNormal(seed=seed)
    inputs = keras.Input((8, 8, 1))
    h = keras.layers.Conv2D(4, 3, padding="same", kernel_initializer=init)(inputs)
    h = keras.layers.BatchNormalization()(h)
    h = keras.layers.ReLU()(h)
    block = keras.Sequential([keras.Input((8, 8, 4)), keras.layers.Conv2D(4, 3, padding="same"),
                              keras.layers.BatchNormalization()], name="block")
    h = block(h) if nested else keras.layers.Conv2D(4, 3, padding="same", kernel_initializer=init)(h)
    h = keras.layers.GlobalAveragePooling2D()(h)
    outputs = keras.layers.Dense(3, kernel_initializer=init)(h)
    return keras.Model(inputs, outputs, name="small_cnn")


@pytest.mark.skipif(not FUSED_BACKEND, reason="JAX has no fused kernel: fuse_batch_norm changes nothing there")
@pytest.mark.parametrize("nested", [False, True])
def test_fuse_batch_norm_copies_and_trains_like_the_original(nested):
    model = small_cnn(nested=nested)
    before = [w.copy() for w in model.get_weights()]
    fused = boost.surgery.fuse_batch_norm(model)
    count = 2 if nested else 1
    assert boost.surgery.count_batch_norms(model) == count and boost.surgery.count_batch_norms(fused) == 0
    fused_layers = [l for l in fused._flatten_layers(include_self=False) if isinstance(l, FusedBatchNormalization)]
    assert len(fused_layers) == count
    assert not set(map(id, fused._flatten_layers())) & set(map(id, model._flatten_layers()))  # a copy
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert boost.surgery.fuse_batch_norm(fused) is fused  # already fused: silent
    rng = np.random.default_rng(0)
    x = rng.normal(size=(32, 8, 8, 1)).astype("float32")
    y = rng.integers(0, 3, size=32)
    np.testing.assert_allclose(fused.predict(x, verbose=0), model.predict(x, verbose=0), rtol=1e-5, atol=1e-6)
    for m in (model, fused):
        m.compile(optimizer=keras.optimizers.SGD(0.1, momentum=0.9),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    trained = []
    for m in (fused, model):
        keras.utils.set_random_seed(0)
        m.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
        trained.append(m.get_weights())
    assert any(np.abs(a - b).max() > 1e-3 for a, b in zip(trained[1], before))  # it did train
    for a, b in zip(*trained):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-4)


@pytest.mark.skipif(not FUSED_BACKEND, reason="JAX has no fused kernel: fuse_batch_norm changes nothing there")
def test_fused_copy_of_a_frozen_block_stays_frozen_and_trains_like_the_original():
    model = small_cnn(nested=True)
    model.get_layer("block").trainable = False
    fused = boost.surgery.fuse_batch_norm(model)
    block = fused.get_layer("block")
    assert block.trainable is False and not any(l.trainable for l in block.layers)
    assert isinstance(block.layers[-1], FusedBatchNormalization)
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(16, 8, 8, 1)).astype("float32"), rng.integers(0, 3, size=16)
    trained = []
    for m in (fused, model):
        m.compile(optimizer=keras.optimizers.SGD(0.1),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        m.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
        trained.append(m.get_weights())
    for a, b in zip(*trained):  # the frozen BN normalized with its moving statistics in both
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    block.trainable = True  # unfreezing the copy reaches its layers, as on the original
    assert len(fused.trainable_variables) == len(model.trainable_variables) + 4


def test_fuse_batch_norm_round_trips_through_keras_file(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", boost.NoEffectWarning)  # JAX: returned unchanged
        fused = boost.surgery.fuse_batch_norm(small_cnn())
    path = tmp_path / "fused.keras"
    fused.save(path)
    loaded = keras.saving.load_model(path)
    x = np.random.default_rng(3).normal(size=(4, 8, 8, 1)).astype("float32")
    np.testing.assert_allclose(loaded.predict(x, verbose=0), fused.predict(x, verbose=0), rtol=1e-6)
    assert [type(l).__name__ for l in loaded.layers] == [type(l).__name__ for l in fused.layers]


def test_nothing_to_fuse_warns_and_returns_the_model():
    inputs = keras.Input((5,))
    model = keras.Model(inputs, keras.layers.Dense(2)(inputs))
    with pytest.warns(boost.NoEffectWarning, match="no keras.layers.BatchNormalization"):
        assert boost.surgery.fuse_batch_norm(model) is model
    # BNs that no fused kernel trains: on a Dense output, channels first, with renorm.
    image = keras.Input((6, 6, 3))
    dense_bn = keras.layers.BatchNormalization()(keras.layers.Dense(4)(inputs))
    outputs = [dense_bn, keras.layers.BatchNormalization(axis=1)(image),
               keras.layers.BatchNormalization(renorm=True)(image)]
    model = keras.Model([inputs, image], outputs)
    assert boost.surgery.count_batch_norms(model) == 0
    with pytest.warns(boost.NoEffectWarning, match="4-D channels-last"):
        assert boost.surgery.fuse_batch_norm(model) is model


@pytest.mark.skipif(FUSED_BACKEND, reason="the JAX backend's case")
def test_jax_warns_that_xla_already_fuses():
    model = small_cnn()
    with pytest.warns(boost.NoEffectWarning, match="XLA already fuses"):
        assert boost.surgery.fuse_batch_norm(model) is model


def test_subclassed_model_is_refused_by_name():
    class Net(keras.Model):
        def __init__(self):
            super().__init__()
            self.bn = keras.layers.BatchNormalization()

        def call(self, x):
            return self.bn(x)

    net = Net()
    net(np.zeros((1, 2, 2, 3), "float32"))
    with pytest.raises(ValueError, match="fuse_batch_norm supports Sequential and functional models"):
        boost.surgery.fuse_batch_norm(net)


def test_o1_fuses_the_bns_less_bn_keeps_and_keeps_its_report():
    from keras_boost.bench.workloads import residual_cnn

    model = residual_cnn(seed=0)  # 9 BNs: LessBN removes bn1 of the 3 blocks and the 2 projection BNs
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", boost.NoEffectWarning)
        boosted = boost.BoostModel.from_model(model, boost_level="O1")
    kinds = [type(l).__name__ for l in boosted.layers]
    assert boosted.less_bn_report.num_removed == 5
    assert kinds.count("FusedBatchNormalization" if FUSED_BACKEND else "BatchNormalization") == 4
    assert kinds.count("BatchNormalization" if FUSED_BACKEND else "FusedBatchNormalization") == 0
    assert boost.AutoBoost("O1").enabled == ["less_bn", "grad_freeze", "fused_batch_norm", "prefix_cache"]
    assert boost.surgery.count_batch_norms(model) == 9  # the input is untouched


def test_a_level_fuses_quietly_where_the_backend_has_no_kernel():
    # O1 turns fused_batch_norm on; on JAX it cannot act, and only a user who
    # asked for it by name (manual mode) hears so.
    model = conv_bn_model(keras.layers.BatchNormalization)
    optimizer = keras.optimizers.SGD(0.1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        boost.AutoBoost("O1").network_auto_process_train(model, optimizer)
    assert not [w for w in caught if "fuse_batch_norm" in str(w.message)]
    manual = boost.AutoBoost("O0", {"boost": {"mode": "manual", "fused_batch_norm": True}})
    if FUSED_BACKEND:
        with warnings.catch_warnings():
            warnings.simplefilter("error", boost.NoEffectWarning)
            fused, _ = manual.network_auto_process_train(model, optimizer)
        assert any(isinstance(layer, FusedBatchNormalization) for layer in fused.layers)
    else:
        with pytest.warns(boost.NoEffectWarning, match="XLA already fuses"):
            manual.network_auto_process_train(model, optimizer)
