"""Image classifiers: a Sequential convnet, Xception- and MobileNetV2-style
blocks, a residual block written with `+`."""

import keras
from keras import layers

from programs.base import SAMPLES
from programs.base import images

SIZE, CHANNELS, CLASSES = 12, 1, 4


def convnet(output_dtype=None):
    """keras.io's "simple MNIST convnet", shrunk: Sequential from keras.Input."""
    model = keras.Sequential(
        [
            keras.Input((SIZE, SIZE, CHANNELS)),
            layers.Conv2D(4, 3, activation="relu"),
            layers.MaxPooling2D(2),
            layers.Conv2D(8, 3, activation="relu"),
            layers.MaxPooling2D(2),
            layers.Flatten(),
            layers.Dropout(0.5),
            # Under mixed precision the guide keeps the softmax in float32.
            layers.Dense(CLASSES, activation="softmax", dtype=output_dtype),
        ],
        name="convnet",
    )
    return model, images(SAMPLES, SIZE, CHANNELS, CLASSES)


def _conv_bn(x, filters, kernel, strides=1, activation="relu", conv=layers.Conv2D):
    x = conv(filters, kernel, strides=strides, padding="same", use_bias=False)(x)
    x = layers.BatchNormalization()(x)
    return layers.Activation(activation)(x) if activation else x


def xception():
    """An Xception entry-flow block: SeparableConv2D + BN, max pooling, a
    strided 1x1 projection shortcut and a residual Add."""
    inputs = keras.Input((16, 16, 3))
    x = _conv_bn(inputs, 8, 3, strides=2)
    residual = _conv_bn(x, 16, 1, strides=2, activation=None)
    x = _conv_bn(x, 16, 3, conv=layers.SeparableConv2D)
    x = _conv_bn(x, 16, 3, activation=None, conv=layers.SeparableConv2D)
    x = layers.MaxPooling2D(3, strides=2, padding="same")(x)
    x = layers.Add()([x, residual])
    x = layers.Activation("relu")(x)
    x = layers.GlobalAveragePooling2D()(x)
    outputs = layers.Dense(CLASSES)(x)  # logits
    return keras.Model(inputs, outputs, name="xception_like"), images(SAMPLES, 16, 3, CLASSES)


def _inverted_residual(x, expansion, filters, strides=1):
    """MobileNetV2's block: 1x1 expand + BN + ReLU6, depthwise + BN + ReLU6,
    1x1 project + BN, and the residual Add when shapes allow."""
    in_channels = x.shape[-1]
    h = x
    if expansion != 1:
        h = layers.Conv2D(in_channels * expansion, 1, use_bias=False)(h)
        h = layers.BatchNormalization()(h)
        h = layers.ReLU(6.0)(h)
    h = layers.DepthwiseConv2D(3, strides=strides, padding="same", use_bias=False)(h)
    h = layers.BatchNormalization()(h)
    h = layers.ReLU(6.0)(h)
    h = layers.Conv2D(filters, 1, use_bias=False)(h)
    h = layers.BatchNormalization()(h)
    if strides == 1 and in_channels == filters:
        h = layers.Add()([x, h])
    return h


def mobilenet_v2():
    inputs = keras.Input((16, 16, 3))
    x = layers.Conv2D(8, 3, strides=2, padding="same", use_bias=False)(inputs)
    x = layers.BatchNormalization()(x)
    x = layers.ReLU(6.0)(x)
    x = _inverted_residual(x, expansion=1, filters=8)
    x = _inverted_residual(x, expansion=2, filters=8)
    x = layers.Conv2D(16, 1, use_bias=False)(x)
    x = layers.BatchNormalization()(x)
    x = layers.ReLU(6.0)(x)
    x = layers.GlobalAveragePooling2D()(x)
    outputs = layers.Dense(CLASSES)(x)  # logits
    return keras.Model(inputs, outputs, name="mobilenet_v2_like"), images(SAMPLES, 16, 3, CLASSES)


def residual_operator():
    """A ResNet basic block whose shortcut is written `h + x` (Keras records
    an `Add` operation, not an `Add` layer), as many tutorials write it."""
    inputs = keras.Input((SIZE, SIZE, CHANNELS))
    x = _conv_bn(inputs, 8, 3)
    h = _conv_bn(x, 8, 3)
    h = _conv_bn(h, 8, 3, activation=None)
    x = layers.ReLU()(h + x)
    x = layers.GlobalAveragePooling2D()(x)
    outputs = layers.Dense(CLASSES, activation="softmax")(x)
    return keras.Model(inputs, outputs, name="residual_operator"), images(SAMPLES, SIZE, CHANNELS, CLASSES)
