"""Shared benchmark workloads: a small residual CNN and the embedded MNIST.

The model is deliberately built from plain, standard Keras layers
(`Conv2D(use_bias=False)` -> `BatchNormalization` -> `ReLU`, `Add` for the
shortcut) with predictable names, because keras_boost's graph algorithms
(LessBN pattern matching, gradient freezing by blocks) walk this graph and
are tested on it.

Layer names:

- optional augmentation (training only): `augment_translation`,
  `augment_rotation`;
- stem: `stem_conv`, `stem_bn`, `stem_relu`;
- block `b` of stage `s` (both from 1), prefix `stage{s}_block{b}_`:
  `conv1`, `bn1`, `relu1`, `conv2`, `bn2`, optional `proj_conv`, `proj_bn`
  (projection shortcut), `add`, `out` (the ReLU after the `Add`);
- head: `pool`, `logits`.

Example:

```python
from keras_boost.bench import workloads
(x, y), (x_test, y_test) = workloads.mnist_data()
model = workloads.residual_cnn(seed=0)
model.compile(optimizer="adam", metrics=["accuracy"],
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
model.fit(x, y, epochs=1)
```
"""

import itertools

import keras

from keras_boost.datasets import load_mnist_sample

__all__ = ["Seeds", "basic_block", "copy_weights", "extra_seed", "mnist_data", "residual_cnn"]

# Short runs (a few hundred steps) on small data: the Keras default momentum
# of 0.99 leaves the moving statistics far from the data's after so few
# updates, and test accuracy would then measure BN lag, not training.
_BN_MOMENTUM = 0.9
_BN_EPSILON = 1e-5


class Seeds:
    """Hands out a distinct seed per initializer, reproducibly.

    A Keras initializer built with an int seed returns the same values on
    every call, so each layer needs its own seed; with `seed=None` the
    initializers are unseeded (Keras' global seed state decides).

    Example:

    ```python
    seeds = Seeds(0)
    keras.layers.Dense(8, kernel_initializer=keras.initializers.HeNormal(seed=seeds.next()))
    ```
    """

    def __init__(self, seed):
        self._counter = None if seed is None else itertools.count(int(seed) * 1000)

    def next(self):
        return None if self._counter is None else next(self._counter)


def _conv_bn(x, filters, kernel_size, strides, seeds, prefix, conv_name, bn_name):
    """`Conv2D(use_bias=False)` then `BatchNormalization` (the bias is BN's beta)."""
    x = keras.layers.Conv2D(
        filters,
        kernel_size,
        strides=strides,
        padding="same",
        use_bias=False,
        kernel_initializer=keras.initializers.HeNormal(seed=seeds.next()),
        name=f"{prefix}{conv_name}",
    )(x)
    return keras.layers.BatchNormalization(
        momentum=_BN_MOMENTUM, epsilon=_BN_EPSILON, name=f"{prefix}{bn_name}"
    )(x)


def basic_block(x, filters, strides, seeds, prefix):
    """A ResNet (v1) basic block.

    `relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x))`, where the shortcut
    is the identity when the shape is unchanged, else a strided 1x1
    `Conv2D` + `BatchNormalization` projection.

    Args:
        x: the block's input tensor (channels last).
        filters: output channels.
        strides: stride of `conv1` and of the projection.
        seeds: the `Seeds` of the model being built.
        prefix: prefix of every layer name of the block.

    Returns:
        The block's output tensor.
    """
    shortcut = x
    y = _conv_bn(x, filters, 3, strides, seeds, prefix, "conv1", "bn1")
    y = keras.layers.ReLU(name=f"{prefix}relu1")(y)
    y = _conv_bn(y, filters, 3, 1, seeds, prefix, "conv2", "bn2")
    if strides != 1 or x.shape[-1] != filters:
        shortcut = _conv_bn(x, filters, 1, strides, seeds, prefix, "proj_conv", "proj_bn")
    y = keras.layers.Add(name=f"{prefix}add")([y, shortcut])
    return keras.layers.ReLU(name=f"{prefix}out")(y)


def residual_cnn(
    input_shape=(28, 28, 1),
    num_classes=10,
    width=16,
    blocks=(1, 1, 1),
    seed=None,
    translation=0.0,
    rotation=0.0,
    model_cls=None,
    **model_kwargs,
):
    """A small ResNet for image classification, returning logits.

    Stem `Conv2D(3x3)`-BN-ReLU with `width` channels, then one stage per
    entry of `blocks` holding that many basic blocks (see `basic_block`);
    stage `s` has `width * 2**(s-1)` channels and its first block has stride
    2 from the second stage on. Then `GlobalAveragePooling2D` and
    `Dense(num_classes)` (no softmax: train with `from_logits=True`).

    With the defaults (28x28x1 input, width 16, blocks (1, 1, 1)) the model
    has about 78k weights and trains on CPU in seconds per epoch.

    `translation` and `rotation` put Keras' augmentation layers between the
    input and the stem (`RandomTranslation`, `RandomRotation`, zero fill):
    they act in training only (`predict` and `evaluate` see the images as
    they are), carry no weights, and are seeded from `seed`, so a copy of
    the model (e.g. by LessBN's surgery) draws the same augmentations.

    Args:
        input_shape: input shape without the batch axis (channels last).
        num_classes: number of logits.
        width: channels of the stem and of the first stage.
        blocks: number of basic blocks per stage.
        seed: int for reproducible initial weights (two models built with
            the same seed and arguments have identical weights), or None.
        translation: maximum shift as a fraction of the height and of the
            width (`RandomTranslation`); 0 for none.
        rotation: maximum rotation as a fraction of a full turn
            (`RandomRotation`); 0 for none.
        model_cls: the model class (or any callable) that receives
            `(inputs, outputs, name=..., **model_kwargs)`; default
            `keras.Model`. Pass `keras_boost.BoostModel` to train the same
            graph with keras_boost.
        **model_kwargs: forwarded to `model_cls` (e.g. `boost_level`,
            `loss_scale` for `BoostModel`, or `name`).

    Returns:
        The functional model built by `model_cls`.

    Example:

    ```python
    import keras_boost as boost
    from keras_boost.bench import residual_cnn

    plain = residual_cnn(seed=0)
    boosted = residual_cnn(seed=0, model_cls=boost.BoostModel, boost_level="O0")
    # Same graph, same initial weights.
    boosted.compile(optimizer=boost.wrap(keras.optimizers.SGD(0.05), "O0"),
                    loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    # ResNet-14 with shifts of up to 10% and rotations of up to 11 degrees:
    augmented = residual_cnn(seed=0, blocks=(2, 2, 2), translation=0.1, rotation=0.03)
    ```
    """
    blocks = tuple(blocks)
    if not blocks or any(int(n) < 1 for n in blocks):
        raise ValueError(f"blocks must be a non-empty sequence of ints >= 1, got {blocks!r}.")
    if int(width) < 1:
        raise ValueError(f"width must be >= 1, got {width!r}.")
    if not 0.0 <= translation < 1.0:
        raise ValueError(f"translation must be in [0, 1), got {translation!r}.")
    if not 0.0 <= rotation <= 0.5:
        raise ValueError(f"rotation must be in [0, 0.5] (a fraction of a full turn), got {rotation!r}.")
    seeds = Seeds(seed)

    inputs = keras.Input(shape=tuple(input_shape), name="image")
    x = inputs
    if translation:
        # Seeds of their own (offset 500 of the model's range), so that the
        # initial weights do not depend on the augmentation.
        x = keras.layers.RandomTranslation(
            translation, translation, fill_mode="constant", seed=extra_seed(seed, 0),
            name="augment_translation",
        )(x)
    if rotation:
        x = keras.layers.RandomRotation(
            rotation, fill_mode="constant", seed=extra_seed(seed, 1), name="augment_rotation"
        )(x)
    x = _conv_bn(x, width, 3, 1, seeds, "stem_", "conv", "bn")
    x = keras.layers.ReLU(name="stem_relu")(x)
    for stage, num_blocks in enumerate(blocks, start=1):
        filters = int(width) * 2 ** (stage - 1)
        for block in range(1, int(num_blocks) + 1):
            strides = 2 if stage > 1 and block == 1 else 1
            x = basic_block(x, filters, strides, seeds, f"stage{stage}_block{block}_")
    x = keras.layers.GlobalAveragePooling2D(name="pool")(x)
    outputs = keras.layers.Dense(
        num_classes,
        kernel_initializer=keras.initializers.GlorotUniform(seed=seeds.next()),
        name="logits",
    )(x)

    model_kwargs.setdefault("name", "residual_cnn")
    return (model_cls or keras.Model)(inputs, outputs, **model_kwargs)


def extra_seed(seed, index):
    """The `index`-th seed of a model's random layers (augmentation,
    dropout), apart from its initializers' (offset 500 of the model's range
    of `Seeds`), so that the initial weights do not depend on them; None for
    an unseeded model.

    Example:

    ```python
    keras.layers.Dropout(0.1, seed=extra_seed(seed, 0))
    ```
    """
    return None if seed is None else int(seed) * 1000 + 500 + index


def copy_weights(source, target):
    """Copies the weights of `source` into `target`, layer by layer.

    For two models built by `residual_cnn` with the same arguments. Layer by
    layer rather than `target.set_weights(source.get_weights())` because a
    `BoostModel` with loss scaling on holds two extra model-level weights
    (the loss-scale state) that a plain `keras.Model` does not have.

    Example:

    ```python
    plain = residual_cnn()
    boosted = residual_cnn(model_cls=boost.BoostModel, loss_scale="dynamic")
    copy_weights(plain, boosted)
    ```
    """
    if len(source.layers) != len(target.layers):
        raise ValueError(
            f"Models {source.name!r} and {target.name!r} have different layers "
            f"({len(source.layers)} vs {len(target.layers)})."
        )
    for source_layer, target_layer in zip(source.layers, target.layers):
        target_layer.set_weights(source_layer.get_weights())


def mnist_data(test_fraction=0.2, seed=0):
    """The embedded MNIST sample, as the benchmarks use it.

    A thin wrapper of `keras_boost.datasets.load_mnist_sample` (normalized):
    float32 images in [0, 1] of shape (n, 28, 28, 1) and int32 labels.

    Args:
        test_fraction: fraction of each digit held out for the test split.
        seed: seed of the (stratified) split.

    Returns:
        `(x_train, y_train), (x_test, y_test)`; 4,000 / 1,000 images with
        the defaults.

    Example:

    ```python
    (x, y), (x_test, y_test) = mnist_data()
    x.shape, x_test.shape  # (4000, 28, 28, 1), (1000, 28, 28, 1)
    ```
    """
    return load_mnist_sample(test_fraction=test_fraction, seed=seed, normalize=True)
