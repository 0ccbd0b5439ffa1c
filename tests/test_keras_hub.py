"""keras-hub models through keras_boost, as users bring them (issue 43).

keras-hub's backbones and task models are functional models built from
their config (`ResNetBackbone(stackwise_num_filters=..., ...)`), not from
`(inputs, outputs)`. Each is built here from a tiny config (no preset, no
download, no dropout so that a resumed run can match a continuous one) and
trained through `BoostModel.from_model` at O0 (exactly plain Keras), O1 and
O2, from scratch and with a frozen backbone, then saved, loaded and resumed:
the resumed run must equal the continuous one. `boost.wrap` trains a task
model compiled the keras-hub way.

At O1 and O2 the graph surgeries (LessBN; fused batch norm on TensorFlow)
rewrite ResNet's batch norms: the copy of the backbone is then a plain
functional model with the backbone's name, layers and weights, as
`keras.models.clone_model` makes of a config-built class (its config would
rebuild the layers the surgery removed).
"""

import dataclasses
import importlib.util

import keras
import numpy as np
import pytest

import keras_boost as boost

keras_hub = pytest.importorskip("keras_hub")

SEED = 7
SAMPLES, BATCH = 16, 8
LEVELS = ("O0", "O1", "O2")


@dataclasses.dataclass(frozen=True)
class HubModel:
    name: str
    build: object  # (frozen_backbone) -> (model, backbone, x, y)
    has_batch_norm: bool = False


def _resnet_backbone():
    return keras_hub.models.ResNetBackbone(
        input_conv_filters=[64], input_conv_kernel_sizes=[3], stackwise_num_filters=[64, 32],
        stackwise_num_blocks=[1, 1], stackwise_num_strides=[1, 2], block_type="basic_block",
        use_pre_activation=False, image_shape=(32, 32, 3))


def _images(classes=10):
    rng = np.random.default_rng(SEED)
    return rng.normal(size=(SAMPLES, 32, 32, 3)).astype("float32"), rng.integers(0, classes, SAMPLES)


def _tokens(vocabulary=50, length=12):
    rng = np.random.default_rng(SEED)
    ids = rng.integers(1, vocabulary, (SAMPLES, length)).astype("int32")
    return ids, np.ones_like(ids, dtype=bool)


def resnet(frozen):
    """A custom head on a ResNetBackbone (the transfer-learning shape)."""
    backbone = _resnet_backbone()
    backbone.trainable = not frozen
    inputs = keras.Input((32, 32, 3))
    features = keras.layers.GlobalAveragePooling2D()(backbone(inputs))
    model = keras.Model(inputs, keras.layers.Dense(10, name="head")(features))
    return (model, backbone, *_images())


def resnet_classifier(frozen):
    """keras-hub's task model: `ResNetImageClassifier`."""
    backbone = _resnet_backbone()
    backbone.trainable = not frozen
    model = keras_hub.models.ResNetImageClassifier(backbone=backbone, num_classes=10, preprocessor=None)
    return (model, backbone, *_images())


# BERT's and GPT-2's shared config: 2 layers of width 16 over a 50-token vocabulary.
TINY_TRANSFORMER = dict(vocabulary_size=50, num_layers=2, num_heads=2, hidden_dim=16, intermediate_dim=32,
                        dropout=0.0, max_sequence_length=12)


def bert_classifier(frozen):
    backbone = keras_hub.models.BertBackbone(**TINY_TRANSFORMER)
    backbone.trainable = not frozen
    model = keras_hub.models.BertTextClassifier(backbone, num_classes=2, preprocessor=None, dropout=0.0)
    ids, mask = _tokens()
    x = {"token_ids": ids, "segment_ids": np.zeros_like(ids), "padding_mask": mask}
    return model, backbone, x, np.arange(SAMPLES) % 2


def vit(frozen):
    backbone = keras_hub.models.ViTBackbone(
        image_shape=(32, 32, 3), patch_size=8, num_layers=2, num_heads=2, hidden_dim=16, mlp_dim=32)
    backbone.trainable = not frozen
    inputs = keras.Input((32, 32, 3))
    class_token = backbone(inputs)[:, 0]
    model = keras.Model(inputs, keras.layers.Dense(10, name="head")(class_token))
    return (model, backbone, *_images())


def gpt2_causal_lm(frozen):
    backbone = keras_hub.models.GPT2Backbone(**TINY_TRANSFORMER)
    backbone.trainable = not frozen
    model = keras_hub.models.GPT2CausalLM(backbone, preprocessor=None)
    ids, mask = _tokens()
    return model, backbone, {"token_ids": ids[:, :-1], "padding_mask": mask[:, :-1]}, ids[:, 1:]


MODELS = [
    HubModel("resnet", resnet, has_batch_norm=True),
    HubModel("resnet_classifier", resnet_classifier, has_batch_norm=True),
    HubModel("bert_classifier", bert_classifier),
    HubModel("vit", vit),
    HubModel("gpt2_causal_lm", gpt2_causal_lm),
]
IDS = [m.name for m in MODELS]


def build(hub_model, frozen=False):
    keras.utils.set_random_seed(SEED)
    return hub_model.build(frozen)


def compile_plain(model, optimizer=None):
    model.compile(optimizer=optimizer or keras.optimizers.Adam(1e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))


def fit(model, x, y, epochs=1):
    return model.fit(x, y, batch_size=BATCH, epochs=epochs, shuffle=False, verbose=0).history["loss"]


def values(variables):
    return [np.array(keras.ops.convert_to_numpy(v)) for v in variables]


def batch_norms(model):
    return sum(isinstance(layer, keras.layers.BatchNormalization)
               for layer in model._flatten_layers(include_self=False))


# The fast lane: ResNet (both surgeries) at each level; the rest at O1 in the slow lane.
CYCLES = [pytest.param(MODELS[0], level, id=f"resnet-{level}") for level in LEVELS] + [
    pytest.param(m, "O1", id=f"{m.name}-O1", marks=pytest.mark.slow) for m in MODELS[1:]]


@pytest.mark.parametrize("hub_model, level", CYCLES)
def test_trains_saves_and_resumes_exactly(hub_model, level, tmp_path):
    """fit 1 epoch, save, load, fit 1 more == fit 2 epochs; O0 == plain Keras."""
    _check_cycle(hub_model, level, frozen=False, tmp_path=tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("level", ("O0", "O2"))
@pytest.mark.parametrize("hub_model", MODELS[1:], ids=IDS[1:])
def test_every_model_at_o0_and_o2(hub_model, level, tmp_path):
    _check_cycle(hub_model, level, frozen=False, tmp_path=tmp_path)


@pytest.mark.parametrize("hub_model", [MODELS[0], MODELS[2]], ids=[IDS[0], IDS[2]])
def test_fine_tuning_a_frozen_backbone_at_o1(hub_model, tmp_path):
    model, backbone = _check_cycle(hub_model, "O1", frozen=True, tmp_path=tmp_path)
    assert model.get_layer(backbone.name).trainable_weights == []


def _check_cycle(hub_model, level, frozen, tmp_path):
    original, backbone, x, y = build(hub_model, frozen)
    frozen_before = values(backbone.weights)
    boosted = []
    for run in ("continuous", "resumed"):
        model, *_ = build(hub_model, frozen) if run == "resumed" else (original,)
        model = boost.BoostModel.from_model(model, boost_level=level)
        compile_plain(model)
        boosted.append(model)
    continuous, resumed = boosted
    losses = fit(continuous, x, y, epochs=2)
    assert np.all(np.isfinite(losses)), losses

    fit(resumed, x, y)
    resumed.save(tmp_path / "m.keras")
    loaded = keras.saving.load_model(tmp_path / "m.keras")
    assert isinstance(loaded, boost.BoostModel) and loaded.boost_level == level
    fit(loaded, x, y)
    for i, (a, b) in enumerate(zip(values(loaded.weights), values(continuous.weights))):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6, err_msg=f"weight {i} ({loaded.weights[i].path})")

    # The user's model is never changed (a surgery copies it).
    for before, after in zip(frozen_before, values(backbone.weights)):
        if frozen or (hub_model.has_batch_norm and level != "O0"):
            np.testing.assert_array_equal(before, after)
    if level == "O0":
        task, *_ = build(hub_model, frozen)
        # Keras' own fit on the task's graph: a keras-hub task's `fit` runs
        # its input pipeline, which needs grain or TensorFlow.
        plain = keras.Model(task.inputs, task.outputs)
        compile_plain(plain)
        np.testing.assert_allclose(losses, fit(plain, x, y, epochs=2), rtol=1e-5, atol=1e-6)
    if hub_model.has_batch_norm and level != "O0" and not frozen:  # LessBN keeps frozen BNs
        copy = continuous.get_layer(backbone.name)
        assert type(copy) is not type(backbone)  # a plain functional copy (the module docstring)
        if keras.backend.backend() != "tensorflow":  # TF fuses the BNs it keeps instead
            assert batch_norms(continuous) < batch_norms(original)
    return continuous, backbone


@pytest.mark.skipif(not any(importlib.util.find_spec(m) for m in ("grain", "tensorflow")),
                    reason="keras-hub's Task.fit needs grain or tensorflow for its input pipeline: neither is installed")
def test_a_task_model_compiled_with_wrap():
    model, _, x, y = build(MODELS[2])
    compile_plain(model, boost.wrap(keras.optimizers.Adam(1e-3), "O1"))
    losses = fit(model, x, y, epochs=2)
    assert np.all(np.isfinite(losses)) and losses[-1] < losses[0]


def test_gpt2_causal_lm_with_sequence_length_warmup_equals_plain_keras_on_cut_batches():
    """keras-hub's dict inputs (token ids and padding mask) and next-token
    targets are cut together; selective backprop ranks the same model's examples."""
    model, _, x, y = build(MODELS[-1])
    boosted = boost.BoostModel.from_model(model, boost_config_dict={
        "boost": {"mode": "manual", "seq_length_warmup": True},
        "seq_length_warmup": {"min_length": 4, "step_size": 4, "duration": 0.5}})
    compile_plain(boosted)
    fit(boosted, x, y, epochs=2)  # 4 steps: 4, 8, then the full 11 tokens
    assert boosted._boost_step_parts()[0].lengths == [(0, 4), (1, 8), (2, 11)]

    reference, _, _, _ = build(MODELS[-1])
    compile_plain(reference)
    for start, length in [(0, 4), (8, 8), (0, 11), (8, 11)]:
        batch = {key: value[start:start + BATCH, :length] for key, value in x.items()}
        reference.train_on_batch(batch, y[start:start + BATCH, :length])
    for got, want in zip(values(boosted.weights), values(reference.weights)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)

    model, _, x, y = build(MODELS[-1])
    selective = boost.BoostModel.from_model(model, boost_config_dict={
        "boost": {"mode": "manual", "selective_backprop": True}, "selective_backprop": {"start": 0.0, "end": 1.0}})
    compile_plain(selective)
    fit(selective, x, y)
    assert "each step trained on the hardest 50% of its batch" in selective.boost_summary()
