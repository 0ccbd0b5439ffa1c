"""The training input of every timed run (`training_dataset`).

Example:

```python
from keras_boost.bench.pipeline import training_dataset
dataset, steps = training_dataset(x, y, batch_size=32, seed=0)
model.fit(dataset, steps_per_epoch=steps, epochs=16)
```
"""

import importlib.util
import math

import numpy as np

__all__ = ["input_pipeline", "training_dataset"]


def training_dataset(x, y, batch_size, seed):
    """The training input of every timed run: one pipeline for the whole run.

    `fit(x, y)` on NumPy arrays builds a new `tf.data` iterator every epoch.
    On the 2-vCPU benchmark VM (TensorFlow, realistic workload,
    2026-12-02) some epochs then trained on one core only (process CPU
    0.95 cores instead of 1.75, the same CPU seconds), at about 82 ms per
    step whatever the model: plain and O1 epochs both took 10.2-10.4 s
    where they otherwise take 8.1 s and 5.5 s. 102 of the 387 epochs of
    the 6-seed O1 run ran at 1.3x or more of their run's fastest epoch. A
    fresh iterator per epoch without AUTOTUNE stalled too. With one
    iterator for the whole run (a repeated dataset and `steps_per_epoch`)
    none of the 336 epochs of the next 8-seed run took 1.3x its run's
    median. Such stalls hide speed-ups and add noise, so every variant
    trains from this one pipeline.

    Each pass reshuffles with a seeded order: all variants of a seed see
    the same batches in the same order. Where TensorFlow is not installed
    (a JAX or torch machine), an endless NumPy generator gives batches of
    the same shapes, reshuffled each pass by a generator seeded by `seed`
    (`input_pipeline()` says which).

    Returns:
        `(dataset, steps_per_epoch)`, to pass as `fit(dataset,
        steps_per_epoch=steps_per_epoch, ...)`.

    Example:

    ```python
    dataset, steps = training_dataset(x, y, batch_size=32, seed=0)
    model.fit(dataset, steps_per_epoch=steps, epochs=16)
    ```
    """
    steps = math.ceil(len(x) / batch_size)
    if input_pipeline() != "tf.data":
        return _numpy_batches(x, y, batch_size, seed), steps
    import tensorflow as tf  # tf.data feeds every backend; imported only when a run starts

    dataset = (
        tf.data.Dataset.from_tensor_slices((x, y))
        .shuffle(len(x), seed=seed, reshuffle_each_iteration=True)
        .batch(batch_size)
        .repeat()
        .prefetch(1)
    )
    return dataset, steps


def input_pipeline():
    """What `training_dataset` feeds: "tf.data", or "numpy generator (no
    TensorFlow)" where TensorFlow is not installed."""
    return "tf.data" if importlib.util.find_spec("tensorflow") is not None else "numpy generator (no TensorFlow)"


def _numpy_batches(x, y, batch_size, seed):
    rng = np.random.default_rng(seed)
    while True:
        order = rng.permutation(len(x))
        for start in range(0, len(x), batch_size):
            index = order[start:start + batch_size]
            yield x[index], y[index]
