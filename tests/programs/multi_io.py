"""A model with two inputs and two outputs: an image and a feature vector in,
a softmax class and a linear regression value out, one loss per output."""

import keras
from keras import layers

from programs.base import Data
from programs.base import SAMPLES
from programs.base import images
from programs.base import rng

SIZE, CLASSES, FEATURES = 12, 4, 5


def image_and_features():
    """A ResNet basic block on the image, joined with the features; a
    `class` head (softmax) and a `value` head (Dense(1), trained with mse)."""
    image = keras.Input((SIZE, SIZE, 3), name="image")
    features = keras.Input((FEATURES,), name="features")
    x = layers.ReLU()(layers.BatchNormalization()(layers.Conv2D(8, 3, padding="same", use_bias=False)(image)))
    h = layers.ReLU()(layers.BatchNormalization()(layers.Conv2D(8, 3, padding="same", use_bias=False)(x)))
    h = layers.BatchNormalization()(layers.Conv2D(8, 3, padding="same", use_bias=False)(h))
    x = layers.ReLU()(layers.Add()([h, x]))
    joined = layers.Concatenate()([layers.GlobalAveragePooling2D()(x), features])
    outputs = {
        "class": layers.Dense(CLASSES, activation="softmax", name="class")(joined),
        "value": layers.Dense(1, name="value")(joined),
    }
    pictures = images(SAMPLES, SIZE, 3, CLASSES, seed=6)
    vector = rng(6).normal(size=(SAMPLES, FEATURES)).astype("float32")
    data = Data(
        {"image": pictures.x, "features": vector},
        {"class": pictures.y, "value": vector.sum(axis=1, keepdims=True)},
    )
    return keras.Model([image, features], outputs, name="image_and_features"), data


def compile_two_heads(model, optimizer):
    """One loss and one metric per output, the losses weighted."""
    model.compile(
        optimizer=optimizer,
        loss={"class": "sparse_categorical_crossentropy", "value": "mse"},
        loss_weights={"class": 1.0, "value": 0.5},
        metrics={"class": ["accuracy"], "value": ["mae"]},
    )
