"""keras.io's transfer-learning flow (guides/transfer_learning), at tiny size.

A "pretrained" base (a functional CNN whose BNs hold moved moving
statistics, as after pretraining) is frozen and called with
`training=False` under a new head; phase 1 trains the head. Phase 2
unfreezes the base, recompiles at a lower learning rate and trains again:
either all of it (keras.io's `base_model.trainable = True`; the BNs stay in
inference mode through `training=False`, their scale and offset train), or
only its top block with the BatchNormalization layers kept frozen.

Example:

```python
model, base, data = transfer_model()
compile_phase(model, keras.optimizers.Adam(1e-3))
fit_phase(model, data)
unfreeze_top(base)
compile_phase(model, keras.optimizers.Adam(1e-4))
fit_phase(model, data)
```
"""

import keras
import numpy as np
from keras import layers

from programs.base import SAMPLES
from programs.base import images

SIZE, CLASSES = 12, 3
BASE_NAME = "pretrained_base"
TOP = ("top_conv1", "top_bn1", "top_conv2", "top_bn2")  # what phase 2 unfreezes


def pretrained_base():
    """A small CNN whose top is a ResNet basic block (a LessBN pattern: a
    fresh copy would lose `top_bn1`), with pretrained-like BN statistics."""
    inputs = keras.Input((SIZE, SIZE, 3))
    x = layers.Conv2D(8, 3, padding="same", use_bias=False, name="stem_conv")(inputs)
    x = layers.ReLU(name="stem_relu")(layers.BatchNormalization(name="stem_bn")(x))
    y = layers.Conv2D(8, 3, padding="same", use_bias=False, name="top_conv1")(x)
    y = layers.ReLU(name="top_relu1")(layers.BatchNormalization(name="top_bn1")(y))
    y = layers.BatchNormalization(name="top_bn2")(
        layers.Conv2D(8, 3, padding="same", use_bias=False, name="top_conv2")(y))
    x = layers.ReLU(name="top_out")(layers.Add(name="top_add")([y, x]))
    base = keras.Model(inputs, x, name=BASE_NAME)
    rng = np.random.default_rng(0)
    for layer in base.layers:
        if isinstance(layer, layers.BatchNormalization):
            c = layer.gamma.shape[0]
            layer.set_weights([rng.uniform(0.5, 1.5, c), rng.normal(0, 0.1, c),
                               rng.normal(0, 0.2, c), rng.uniform(0.5, 2.0, c)])
    return base


def transfer_model():
    """The frozen base under a new head; returns `(model, base, data)`."""
    base = pretrained_base()
    base.trainable = False
    inputs = keras.Input((SIZE, SIZE, 3))
    x = base(inputs, training=False)  # the BNs stay in inference mode, even when unfrozen
    x = layers.GlobalAveragePooling2D(name="pool")(x)
    outputs = layers.Dense(CLASSES, name="new_head")(x)  # logits
    model = keras.Model(inputs, outputs, name="transfer")
    return model, base, images(SAMPLES, SIZE, 3, CLASSES)


def unfreeze_all(base):
    """Phase 2 as keras.io writes it."""
    base.trainable = True


def unfreeze_top(base):
    """Phase 2 for the top block only: the rest of the base and every
    BatchNormalization stay frozen."""
    base.trainable = True
    for layer in base.layers:
        layer.trainable = layer.name in TOP and not isinstance(layer, layers.BatchNormalization)


def compile_phase(model, optimizer):
    model.compile(optimizer=optimizer,
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))


def fit_phase(model, data):
    model.fit(data.x, data.y, batch_size=8, epochs=2, shuffle=False, verbose=0)
