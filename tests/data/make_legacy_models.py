"""Writes the `.keras` files of `tests/test_legacy_models.py`.

They were saved by keras_boost 0.1.0 (commit 1b8ce81, before issue 29 moved
the algorithms into `keras_boost/algorithms/`), on the TensorFlow backend;
the test loads them with the current code. Do not regenerate them with a
newer keras_boost: that would test nothing. Kept for the record of how they
were made:

    KERAS_BACKEND=tensorflow python tests/data/make_legacy_models.py
"""

import pathlib

import keras
import numpy as np

import keras_boost as boost

HERE = pathlib.Path(__file__).parent / "legacy_0.1.0"


def data(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(32, 8, 8, 3)).astype("float32")
    y = rng.integers(0, 4, size=(32,)).astype("int32")
    return x, y


def convnet(seed=0):
    init = keras.initializers.GlorotUniform(seed=seed)
    inputs = keras.Input((8, 8, 3))
    x = keras.layers.Conv2D(16, 3, padding="same", kernel_initializer=init, name="stem")(inputs)
    x = keras.layers.BatchNormalization(name="stem_bn")(x)
    x = keras.layers.Activation("relu")(x)
    h = keras.layers.Conv2D(16, 3, padding="same", kernel_initializer=init, name="c1")(x)
    h = keras.layers.BatchNormalization(name="bn1")(h)
    h = keras.layers.Activation("relu")(h)
    h = keras.layers.Conv2D(16, 3, padding="same", kernel_initializer=init, name="c2")(h)
    h = keras.layers.BatchNormalization(name="bn2")(h)
    x = keras.layers.Activation("relu")(keras.layers.Add()([x, h]))
    x = keras.layers.GlobalAveragePooling2D()(x)
    outputs = keras.layers.Dense(4, kernel_initializer=init, name="head")(x)
    return keras.Model(inputs, outputs, name="legacy_net")


LOSS = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def models():
    """name -> a compiled model, trained a few steps."""
    o1 = boost.BoostModel.from_model(convnet(), boost_level="O1")
    o1.compile(optimizer=keras.optimizers.SGD(0.05, momentum=0.9), loss=LOSS, metrics=["accuracy"])

    scaled = boost.BoostModel.from_model(
        convnet(1), boost_level="O0",
        loss_scale=boost.DynamicLossScale(initial_scale=2.0**10, scale_window=3),
    )
    scaled.compile(optimizer=keras.optimizers.Adam(1e-3), loss=LOSS)

    accumulated = convnet(2)
    accumulated.compile(
        optimizer=boost.wrap(
            keras.optimizers.SGD(0.05, momentum=0.9), "O1",
            {"boost": {"mode": "manual", "grad_accumulation": True},
             "grad_accumulation": {"grad_accumulation_step": 2}},
        ),
        loss=LOSS,
    )
    return {"o1_boost_model": o1, "o0_loss_scale": scaled, "wrap_o1_accumulation": accumulated}


def main():
    HERE.mkdir(parents=True, exist_ok=True)
    x, y = data()
    for name, model in models().items():
        model.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
        model.save(HERE / f"{name}.keras")
        np.savez(
            HERE / f"{name}.npz",
            predictions=keras.ops.convert_to_numpy(model(x[:4], training=False)),
            iterations=int(keras.ops.convert_to_numpy(model.optimizer.iterations)),
        )


if __name__ == "__main__":
    main()
