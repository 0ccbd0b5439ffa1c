"""A run's length and learning-rate schedule, as the bench trains a workload.

How many epochs each phase of a run trains (`phase_epochs`, and
`short_epochs` for `baseline-short`), how many optimizer steps its
schedule spans (`schedule_steps`) and the optimizer on that schedule
(`recipe_optimizer`).

Example:

```python
from keras_boost.bench import catalog, schedule
workload = catalog.realistic_workload()
total, warmup = schedule.schedule_steps(workload, 16, 125)   # (2000, 125)
optimizer = schedule.recipe_optimizer(workload, total, warmup)
```
"""

import keras

__all__ = ["phase_epochs", "recipe_optimizer", "schedule_steps", "short_epochs"]


def schedule_steps(workload, epochs, steps_per_epoch, ratio=1.0, warmup_epochs=None):
    """(total, warmup) optimizer steps of a run's learning-rate schedule.

    `ratio` < 1 is `baseline-short`'s rescaling: the warmup shrinks with the
    run (Composer's `scale_schedule_ratio` scales every phase).
    `warmup_epochs` (default: the workload's) is for the second phase of a
    fine-tuning run, whose warmup is `fine_tune.warmup_epochs`.

    Example:

    ```python
    schedule_steps(realistic_workload(), 16, 125)           # (2000, 125)
    schedule_steps(realistic_workload(), 13, 125, 0.8)      # (1625, 100)
    ```
    """
    warmup_epochs = workload.warmup_epochs if warmup_epochs is None else warmup_epochs
    total = max(int(epochs) * int(steps_per_epoch), 1)
    warmup = int(round(warmup_epochs * steps_per_epoch * ratio))
    return total, min(warmup, total - 1)


def phase_epochs(workload, short_ratio=None):
    """Epochs of each phase of a run: `[epochs]`, or `[head, fine-tune]`.

    A workload without `fine_tune` trains in one phase; with one, the last
    `fine_tune.epochs` epochs are the second phase. With `short_ratio`
    (`baseline-short`) the run is `short_epochs(workload.epochs,
    short_ratio)` epochs long, and each phase is rescaled: the second gets
    `round(fine_tune.epochs * short_ratio)`, kept between 1 and the run's
    epochs - 1, the first the rest.

    Example:

    ```python
    phase_epochs(finetune_workload())          # [4, 8]
    phase_epochs(finetune_workload(), 0.75)    # [3, 6]: 9 of its 12 epochs
    phase_epochs(tiny_workload(), 0.5)         # [1]
    ```
    """
    epochs = workload.epochs if short_ratio is None else short_epochs(workload.epochs, short_ratio)
    if workload.fine_tune is None:
        return [epochs]
    if epochs < 2:
        raise ValueError(
            f"baseline-short of fine-tuning workload {workload.name!r} would train {epochs} epoch, too few "
            f"for its two phases: give it a short_ratio of at least {1.5 / workload.epochs:.3g}."
        )
    second = workload.fine_tune.epochs
    if short_ratio is not None:
        second = workload.fine_tune.rescaled_epochs(short_ratio, epochs)
    return [epochs - second, second]


def short_epochs(epochs, short_ratio):
    """Epochs of `baseline-short`: `round(epochs * short_ratio)`, at least 1.

    Raises a `ValueError` when that is not fewer than `epochs`: the "short"
    baseline would then be the baseline again, and a comparison with it
    would compare the baseline with itself.

    Example:

    ```python
    short_epochs(16, 0.6875)   # 11
    short_epochs(2, 0.8)       # ValueError: round(2 x 0.8) = 2 epochs
    ```
    """
    short = max(1, int(round(epochs * short_ratio)))
    if short >= epochs:
        raise ValueError(
            f"baseline-short would train round({epochs} x {short_ratio}) = {short} epochs, as long as "
            f"the baseline's {epochs}: give the baseline more epochs or a smaller short_ratio "
            f"(below {(epochs - 0.5) / epochs:.3g})."
        )
    return short


def recipe_optimizer(workload, total_steps, warmup_steps=0, learning_rate=None):
    """The workload's optimizer on a warmup and cosine schedule (peak
    `learning_rate`, default the workload's), as the bench trains it.

    Example:

    ```python
    optimizer = recipe_optimizer(tiny_workload(), total_steps=100, warmup_steps=10)
    ```
    """
    learning_rate = workload.learning_rate if learning_rate is None else learning_rate
    if warmup_steps:
        schedule = keras.optimizers.schedules.CosineDecay(
            0.0, total_steps - warmup_steps, warmup_target=learning_rate,
            warmup_steps=warmup_steps,
        )
    else:
        schedule = keras.optimizers.schedules.CosineDecay(learning_rate, max(total_steps, 1))
    if workload.optimizer == "adamw":
        return keras.optimizers.AdamW(schedule, beta_1=workload.momentum,
                                      weight_decay=workload.weight_decay or 0.0)
    return keras.optimizers.SGD(schedule, momentum=workload.momentum, weight_decay=workload.weight_decay)
