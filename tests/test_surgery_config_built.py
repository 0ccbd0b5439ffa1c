"""The surgeries on models whose class builds its graph from its config.

keras-hub's backbones and tasks are `keras.Model` subclasses whose
constructor takes architecture arguments (`ResNetBackbone(stackwise_num_filters=...)`)
and builds the layers itself; `cls(inputs, outputs)` is not how they are
made. `ConfigBuilt` below is that shape without keras-hub
(`tests/test_keras_hub.py` runs keras-hub itself). A surgery copies such a
model as the plain functional model `keras.models.clone_model` makes of it.
"""

import keras
import numpy as np
import pytest

import keras_boost as boost
from keras_boost.graph import layers_shared_with_nested_models
from keras_boost.graph import rebuild

L = keras.layers


@keras.saving.register_keras_serializable(package="test_surgery_config_built")
class ConfigBuilt(keras.Model):
    """conv -> BN -> ReLU -> pooling, built from `filters` (as keras-hub backbones are)."""

    def __init__(self, filters=4, **kwargs):
        inputs = keras.Input((8, 8, 3))
        x = L.Conv2D(filters, 3, use_bias=False, name="conv")(inputs)
        x = L.BatchNormalization(epsilon=1e-12, name="bn")(x)
        outputs = L.GlobalAveragePooling2D()(L.ReLU()(x))
        super().__init__(inputs, outputs, **kwargs)
        self.filters = filters

    def get_config(self):
        return {"filters": self.filters, "name": self.name, "trainable": self.trainable}


def _model_on(backbone):
    inputs = keras.Input((8, 8, 3))
    return keras.Model(inputs, L.Dense(2, name="head")(backbone(inputs)))


def _x():
    return np.random.default_rng(0).normal(size=(4, 8, 8, 3)).astype("float32")


@pytest.mark.parametrize("nested", [True, False], ids=["nested", "top_level"])
def test_a_config_built_model_is_copied_as_a_functional_model(nested, tmp_path):
    backbone = ConfigBuilt(name="backbone")
    model = _model_on(backbone) if nested else backbone
    bn = backbone.get_layer("bn")
    copy = rebuild(model, "LessBN", removed_ids={id(bn)})
    copied = copy.get_layer("backbone") if nested else copy
    assert type(copied) is not ConfigBuilt and copied.name == "backbone"
    assert "bn" not in [layer.name for layer in copied.layers]
    # At its initial values the BN (epsilon 1e-12) is the identity: same outputs.
    np.testing.assert_allclose(keras.ops.convert_to_numpy(copy(_x())),
                               keras.ops.convert_to_numpy(model(_x())), rtol=1e-5, atol=1e-6)
    copy.save(tmp_path / "copy.keras")
    loaded = keras.saving.load_model(tmp_path / "copy.keras")
    np.testing.assert_allclose(keras.ops.convert_to_numpy(loaded(_x())),
                               keras.ops.convert_to_numpy(copy(_x())), rtol=1e-6, atol=1e-6)
    assert "bn" in [layer.name for layer in backbone.layers]  # the input model is unchanged


def test_boost_model_at_o1_on_a_config_built_backbone(tmp_path):
    model = _model_on(ConfigBuilt(name="backbone"))
    boosted = boost.BoostModel.from_model(model, boost_level="O1", boost_config_dict={"less_bn": {"fn_flag": False}})
    boosted.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    boosted.fit(_x(), np.array([0, 1, 0, 1]), epochs=1, verbose=0)
    boosted.save(tmp_path / "m.keras")
    loaded = keras.saving.load_model(tmp_path / "m.keras")
    np.testing.assert_allclose(keras.ops.convert_to_numpy(loaded(_x())),
                               keras.ops.convert_to_numpy(boosted(_x())), rtol=1e-6, atol=1e-6)


def test_layers_shared_with_nested_models():
    embedding = L.Embedding(10, 4, name="embedding")
    inner_in = keras.Input((3,), dtype="int32")
    inner = keras.Model(inner_in, embedding(inner_in))
    inputs = keras.Input((3,), dtype="int32")
    tied = keras.Model(inputs, inner(inputs) + embedding(inputs))
    assert layers_shared_with_nested_models(tied) == [embedding]
    assert layers_shared_with_nested_models(_model_on(ConfigBuilt())) == []
    backbone = ConfigBuilt()  # a task built on its backbone's own inputs shares only those
    assert layers_shared_with_nested_models(keras.Model(backbone.inputs, L.Dense(2)(backbone(backbone.inputs)))) == []


def test_an_error_of_the_copy_names_the_surgery_and_its_switch():
    class Unbuildable(L.Layer):  # its copy fails when called on the new graph
        def __init__(self, calls=0, **kwargs):
            super().__init__(**kwargs)
            self.calls = calls

        def call(self, x):
            if self.calls:
                raise ValueError("the copy cannot run")
            return x

        def get_config(self):
            return {**super().get_config(), "calls": 1}

    inputs = keras.Input((3,))
    model = keras.Model(inputs, L.Dense(2)(Unbuildable(name="odd")(inputs)))
    with pytest.raises(ValueError, match=r"(?s)LessBN copied the model .*switch it off with .*less_bn.*cannot run"):
        rebuild(model, "LessBN", switch_off='{"boost": {"mode": "manual", "less_bn": false}}')
