"""The `applications` workloads: keras.applications models trained from scratch.

The models users start from (`weights=None`: nothing downloads), at 32x32,
the smallest input every one of them accepts, on `colored_digits`: the
embedded MNIST sample made an RGB image task (each digit drawn in a random
color on a random, darker background), harder than the gray digits and
shaped like what these models are built for.

Example:

```python
from keras_boost.bench.zoo import applications
workload = applications.applications_workload("MobileNetV2")
(x, y), (x_test, y_test) = workload.data()   # (4000, 32, 32, 3) in [-1, 1]
model = workload.build(seed=0)               # logits for 10 classes
```
"""

import functools
import warnings

import keras
import numpy as np

from keras_boost.bench.recipe import Workload
from keras_boost.bench.workloads import mnist_data

__all__ = ["APPLICATIONS", "LEARNING_RATES", "application_model", "applications_workload", "colored_digits"]

SIZE = 32
CLASSES = 10
# The applications' moving statistics follow the data at 0.99 (MobileNetV2:
# 0.999): after the few hundred steps of a bench run they are still near
# their initial 0 and 1, and test accuracy measured with them stays at chance
# (MobileNetV2: 0.100 after 4 epochs while it trained to 62%). The bench's
# other workloads use 0.9 for the same reason.
BN_MOMENTUM = 0.9
# name -> keyword arguments of the keras.applications constructor.
APPLICATIONS = {
    "MobileNetV2": {"alpha": 0.35},
    "EfficientNetB0": {},
    "ResNet50V2": {},
}
# name -> peak learning rate of its recipe. EfficientNetB0 (squeeze-excite,
# swish) barely trains at 0.01: a 4-epoch probe (TensorFlow, seed 0,
# 2026-12-06) reached 0.52 test accuracy at 0.01, 0.76 at 0.005, 0.83 at
# 0.003 and 0.75 at 0.002; at 0.01 its 8-epoch runs ended at 0.37-0.75.
LEARNING_RATES = {"MobileNetV2": 0.01, "EfficientNetB0": 0.003, "ResNet50V2": 0.01}


@functools.lru_cache(maxsize=2)
def colored_digits(seed=0):
    """The embedded MNIST sample as 32x32 RGB images in [-1, 1].

    Each 28x28 digit is padded to 32x32 and drawn with a random foreground
    color on a random background color at least 0.4 darker (per channel
    mean), both drawn per image from a generator seeded by `seed`: the
    label is the digit, whatever its colors. The split is
    `keras_boost.bench.workloads.mnist_data()`'s (4,000 train / 1,000 test).

    Cached: the arrays are shared and must not be written to.

    Args:
        seed: seed of the colors.

    Returns:
        `(x_train, y_train), (x_test, y_test)`: float32 images of shape
        (n, 32, 32, 3) and int32 labels.

    Example:

    ```python
    (x, y), (x_test, y_test) = colored_digits()
    x.shape, float(x.min()), float(x.max())   # (4000, 32, 32, 3), -1.0, <= 1.0
    ```
    """
    (x, y), (x_test, y_test) = mnist_data()
    rng = np.random.default_rng(seed)

    def colorize(images):
        n = len(images)
        foreground = rng.uniform(0.5, 1.0, size=(n, 1, 1, 3)).astype("float32")
        background = (foreground - rng.uniform(0.4, 0.5, size=(n, 1, 1, 1))) * rng.uniform(
            0.0, 1.0, size=(n, 1, 1, 3)
        )
        padded = np.pad(images, ((0, 0), (2, 2), (2, 2), (0, 0)))
        rgb = background + padded * (foreground - background)
        return (2.0 * rgb - 1.0).astype("float32")

    x, x_test = colorize(x), colorize(x_test)
    for array in (x, y, x_test, y_test):
        array.setflags(write=False)
    return (x, y), (x_test, y_test)


def application_model(name, seed=None, num_classes=CLASSES, size=SIZE, **kwargs):
    """A keras.applications model with random weights, returning logits.

    `weights=None`, `classifier_activation=None` (logits, for
    `from_logits=True`), input `(size, size, 3)`. Keras' applications take
    no seed: the initial weights come from Keras' global seed, set here
    from `seed`, so two models built with the same seed are identical.

    Args:
        name: one of `APPLICATIONS`.
        seed: int for reproducible weights, or None (Keras' global seed
            state decides).
        num_classes: number of logits.
        size: height and width of the input.

    Returns:
        The built functional model.

    Example:

    ```python
    model = application_model("EfficientNetB0", seed=0)
    model.output.shape   # (None, 10)
    ```
    """
    if name not in APPLICATIONS:
        raise ValueError(f"Unknown application {name!r}; valid: {sorted(APPLICATIONS)}.")
    if seed is not None:
        keras.utils.set_random_seed(int(seed))
    with warnings.catch_warnings():
        # "`input_shape` is undefined or non-square, or `rows` is not in
        # [96, 128, 160, 192, 224]": only the ImageNet weights need those.
        warnings.simplefilter("ignore", UserWarning)
        model = getattr(keras.applications, name)(
            input_shape=(size, size, 3), weights=None, classes=num_classes,
            classifier_activation=None, **{**APPLICATIONS[name], **kwargs},
        )
    for layer in model.layers:
        if isinstance(layer, keras.layers.BatchNormalization):
            layer.momentum = BN_MOMENTUM
    return model


def applications_workload(name="MobileNetV2"):
    """A keras.applications model trained from scratch on `colored_digits`.

    Recipe: batch 32 (125 steps per epoch), 8 epochs, SGD with momentum 0.9
    and weight decay 5e-5, a 1-epoch linear warmup to the peak rate (0.01;
    EfficientNetB0: 0.003, see `LEARNING_RATES`) then cosine decay to 0
    over the run; target 0.93 test accuracy. MobileNetV2 is built with
    `alpha=0.35` (423k weights).

    The peak learning rate comes from a probe (MobileNetV2, seed 0, 5
    epochs, TensorFlow, AMD EPYC 2 cores under load, 2026-12-04): SGD at
    0.05 reached 0.229 test accuracy (its first-epoch loss of 3.06 above
    chance's 2.30: unstable), SGD at 0.01 reached 0.925, AdamW at 0.002
    0.537. An epoch took 9-21 s on the loaded machine, the first 28-38 s
    with the step's compilation.

    Args:
        name: one of `APPLICATIONS` (`"MobileNetV2"`: the `applications`
            workload; the others are `applications-efficientnetb0` and
            `applications-resnet50v2`).

    Returns:
        The `Workload`.

    Example:

    ```shell
    keras-boost bench --workload applications --variants baseline,baseline-short,O1 --seeds 3
    ```
    """
    if name not in APPLICATIONS:
        raise ValueError(f"Unknown application {name!r}; valid: {sorted(APPLICATIONS)}.")
    label = "applications" if name == "MobileNetV2" else f"applications-{name.lower()}"
    return Workload(
        label, functools.partial(application_model, name), colored_digits, epochs=8, batch_size=32,
        learning_rate=LEARNING_RATES[name], target=0.93, warmup_epochs=1.0, momentum=0.9, weight_decay=5e-5,
    )
