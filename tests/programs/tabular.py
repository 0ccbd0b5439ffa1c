"""Tabular models: keras.io's structured-data classifier (the heart-disease
table: one named `keras.Input` per feature, preprocessing layers inside the
model, a dict of inputs) and a residual MLP written with `h + inputs`."""

import keras
from keras import layers

from programs.base import Data
from programs.base import SAMPLES
from programs.base import rng

FEATURES = 8

NUMERIC = ("age", "trestbps", "chol", "thalach", "oldpeak")
# Categorical features as small integer codes: name -> number of values.
CATEGORICAL = {
    "sex": 2, "cp": 5, "fbs": 2, "restecg": 3, "exang": 2, "slope": 4, "ca": 4, "thal": 4,
}


def _table(n, seed=3):
    generator = rng(seed)
    table = {name: generator.normal(50, 10, size=(n, 1)).astype("float32") for name in NUMERIC}
    for name, values in CATEGORICAL.items():
        table[name] = generator.integers(0, values, size=(n, 1)).astype("int32")
    target = ((table["age"][:, 0] > 50) ^ (table["sex"][:, 0] == 1)).astype("float32")[:, None]
    return table, target


def heart_disease_classifier():
    table, target = _table(SAMPLES)
    inputs, encoded = {}, []
    for name in NUMERIC:
        inputs[name] = keras.Input((1,), name=name)
        column = table[name]
        normalize = layers.Normalization(mean=column.mean(), variance=column.var())
        encoded.append(normalize(inputs[name]))
    for name, values in CATEGORICAL.items():
        inputs[name] = keras.Input((1,), name=name, dtype="int32")
        one_hot = layers.CategoryEncoding(num_tokens=values, output_mode="one_hot")
        encoded.append(one_hot(inputs[name]))
    x = layers.Concatenate()(encoded)
    x = layers.Dense(16, activation="relu")(x)
    x = layers.Dropout(0.2)(x)
    outputs = layers.Dense(1, activation="sigmoid")(x)
    assert len(inputs) == 13
    return keras.Model(inputs, outputs, name="heart_disease"), Data(table, target)


def residual_mlp():
    """Dense -> BN -> ReLU -> Dense -> BN, added back to the input with
    `h + inputs` (an `Add` operation, not a layer), twice; a regressor."""
    generator = rng(4)
    x = generator.normal(size=(SAMPLES, FEATURES)).astype("float32")
    y = (x[:, :2].sum(axis=1, keepdims=True) + 0.1 * generator.normal(size=(SAMPLES, 1))).astype("float32")
    inputs = keras.Input((FEATURES,))
    h = inputs
    for _ in range(2):
        r = layers.ReLU()(layers.BatchNormalization()(layers.Dense(16)(h)))
        h = layers.BatchNormalization()(layers.Dense(FEATURES)(r)) + h
    outputs = layers.Dense(1)(layers.ReLU()(h))
    return keras.Model(inputs, outputs, name="residual_mlp"), Data(x, y)
