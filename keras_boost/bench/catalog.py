"""The named workloads of `keras-boost bench --workload NAME` (`WORKLOADS`).

The MNIST CNNs defined here (`quick`, `quickstart`, `quickstart-augmented`,
`resnet`, `realistic`, `tiny`) and the zoo's (`keras_boost.bench.zoo`),
each a function returning a fresh `Workload`.

Example:

```python
from keras_boost.bench import catalog
workload = catalog.WORKLOADS["realistic"]()
model = workload.build(0)
```
"""

from keras_boost.bench import zoo
from keras_boost.bench.recipe import Workload
from keras_boost.bench.workloads import mnist_data
from keras_boost.bench.workloads import residual_cnn

__all__ = [
    "WORKLOADS", "quick_workload", "quickstart_augmented_workload", "quickstart_workload", "realistic_workload", "resnet_workload",
    "tiny_workload",
]


def quickstart_workload():
    """The quickstart residual CNN on the embedded MNIST sample."""
    return Workload("quickstart", lambda seed: residual_cnn(seed=seed), mnist_data,
                    epochs=5, target=0.93)


def quick_workload():
    """`keras-boost bench --quick`'s workload: the quickstart CNN at half resolution.

    The quickstart model (`residual_cnn`, width 16, one block per stage) on
    the first 2,000 training and 500 test images of the embedded MNIST
    sample, each 2x2-average-pooled to 14x14: a quarter of the pixels and
    half the images, so one run costs about an eighth of a `quickstart`
    run. On PyTorch, whose eager CPU convolutions are the slowest of the
    three backends, `--quick` on `quickstart` took 6-8.5 minutes on 2
    cores (TensorFlow 48 s, JAX 81 s); see `docs/api/bench.md` for what
    this one takes.

    Example:

    ```python
    workload = quick_workload()
    (x, y), _ = workload.data()
    x.shape   # (2000, 14, 14, 1)
    ```
    """
    return Workload("quick", lambda seed: residual_cnn(input_shape=(14, 14, 1), seed=seed, name="quick"),
                    _half_resolution_sample, epochs=5, target=0.9)


def _half_resolution_sample():
    (x, y), (x_test, y_test) = mnist_data()

    def pool(images):  # 2x2 average: (n, 28, 28, 1) -> (n, 14, 14, 1)
        return images.reshape(len(images), 14, 2, 14, 2, 1).mean(axis=(2, 4))

    return (pool(x[:2000]), y[:2000]), (pool(x_test[:500]), y_test[:500])


def resnet_workload():
    """A bigger ResNet-style CNN (2 blocks per stage, width 32) on the same data."""
    return Workload(
        "resnet",
        lambda seed: residual_cnn(seed=seed, width=32, blocks=(2, 2, 2), name="resnet"),
        mnist_data, epochs=5, target=0.95,
    )


def tiny_workload():
    """A seconds-long workload for tests: a small CNN on 512 MNIST images."""

    def data():
        (x, y), (x_test, y_test) = mnist_data()
        return (x[:512], y[:512]), (x_test[:256], y_test[:256])

    return Workload(
        "tiny", lambda seed: residual_cnn(seed=seed, width=4, blocks=(1,), name="tiny"),
        data, epochs=2, batch_size=64, target=0.3,
    )


def realistic_workload():
    """A ResNet-20 trained for 2,000 steps with augmentation: the long workload.

    Long enough for freezing's compilations and LessBN's slower start to
    pay off if they can (freezing's method card puts its break-even at
    2,000-4,000 steps), on the embedded MNIST sample (4,000 train / 1,000
    test images), still on CPU:

    - model: `residual_cnn(width=16, blocks=(3, 3, 3))`, the CIFAR ResNet-20
      layout (He et al. 2016: 3 stages of 3 basic blocks at 16 / 32 / 64
      channels, with projection shortcuts): 19 convs + 2 projections, 21
      BatchNormalization layers, 274k weights, a linear `Dense(10)` head.
      LessBN's patterns remove 11 of the 21 BNs (`bn1` of each block, both
      projection BNs) and it swaps the head; gradient freezing finds 22
      blocks (grouped into its 10 groups);
    - augmentation (model layers, active in training only):
      `RandomTranslation` by up to 10% (2.8 pixels) and `RandomRotation` by
      up to 0.03 of a turn (11 degrees), zero fill, so that 16 passes over
      4,000 images do not repeat the same images (seeded by the model's
      seed: every variant of a seed sees the same augmentations);
    - recipe: batch 32, 16 epochs of 125 steps = 2,000 optimizer steps; SGD
      with momentum 0.9 and weight decay 5e-4; a linear warmup from 0 over
      the first epoch to the peak learning rate 0.05, then cosine decay to
      0 at the end of the run;
    - target: 0.98 test accuracy.

    The learning rate comes from a probe (seed 0, this recipe compressed to
    6 epochs, TensorFlow, 2026-12-01): final test accuracy 0.979 at 0.025,
    0.975 at 0.05 and 0.978 at 0.1 (ResNet-14, `blocks=(2, 2, 2)`: 0.980 at
    0.05, 0.976 at 0.1, 0.973 at 0.2). 0.025-0.1 is a plateau within
    half a point, i.e. within seed noise; 0.05 is its middle (in log
    scale), safe on both sides.

    Batch 32 rather than 64 gives twice the optimizer steps for about the
    same cost per epoch on CPU. Measured (TensorFlow 2.21, AMD EPYC, 2
    cores at load average 1.5-2.3, 2026-12-01): the baseline's first epoch
    15 s (compilation included), then 8 s per epoch, plus about 0.7 s of
    untimed evaluation per epoch: about 2.5 minutes per 16-epoch run.

    Example:

    ```python
    workload = realistic_workload()
    model = workload.build(0)
    boost.surgery.find_less_bn(model).num_removed   # 11
    ```
    """
    return Workload(
        "realistic",
        lambda seed: residual_cnn(seed=seed, width=16, blocks=(3, 3, 3), translation=0.1,
                                  rotation=0.03, name="realistic"),
        mnist_data, epochs=16, batch_size=32, learning_rate=0.05, target=0.98,
        warmup_epochs=1.0, momentum=0.9, weight_decay=5e-4,
    )


def quickstart_augmented_workload():
    """The quickstart CNN trained with the realistic workload's recipe.

    Same model as `quickstart_workload` (same weights for a seed), with the
    realistic workload's augmentation layers and recipe: batch 32, 16
    epochs, SGD with momentum 0.9 and weight decay 5e-4, a 1-epoch warmup
    to 0.05 then cosine decay; target 0.98. Pairs with both: a result that
    differs between `quickstart` and `realistic` is the model's doing if it
    also differs between `quickstart-augmented` and `realistic`, the
    recipe's if it does not.

    Example:

    ```shell
    python -m benchmarks.dim_reduce --workload quickstart-augmented --stage1-epochs 8
    ```
    """
    return Workload(
        "quickstart-augmented",
        lambda seed: residual_cnn(seed=seed, translation=0.1, rotation=0.03, name="quickstart_augmented"),
        mnist_data, epochs=16, batch_size=32, learning_rate=0.05, target=0.98,
        warmup_epochs=1.0, momentum=0.9, weight_decay=5e-4,
    )


WORKLOADS = {
    "quick": quick_workload,
    "quickstart": quickstart_workload,
    "quickstart-augmented": quickstart_augmented_workload,
    "resnet": resnet_workload,
    "realistic": realistic_workload,
    "tiny": tiny_workload,
    **zoo.WORKLOADS,
}
