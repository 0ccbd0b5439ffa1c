"""Time-to-accuracy harness behind `keras-boost bench`.

For a workload (model factory + data), runs variants:

- `baseline`: plain `keras.Model.fit`, SGD with momentum and a cosine decay
  over the whole run (the tuned reference);
- `baseline-short`: the same with the run, and its schedule, rescaled to
  `short_ratio` of the epochs (Composer's `scale_schedule_ratio`: the
  honest "just train less" alternative every speed-up must beat);
- one variant per keras_boost algorithm, alone (manual mode), and one per
  level (O1, O2), through `AutoBoost` + `BoostModel.from_model`;

at each precision (`float32`, `mixed_bfloat16`), for N seeds. Each run
records test accuracy after every epoch against training wall time
(evaluation excluded, compilation included), the steady steps/s, the time
to the target accuracy and the final accuracy. A variant that cannot run
(an algorithm not implemented yet) is recorded as skipped with the reason,
never silently dropped; AdaSum variants run (on one replica AdaSum is the
identity, which their record notes; `python -m benchmarks.adasum`
measures it on N replicas).

A workload with a `FineTune` (transfer learning) runs in two phases in
every variant: the head on the frozen base, then, after unfreezing the
base's top and recompiling with a fresh optimizer (a boost variant's
`BoostModel` wraps it in its level's chain), the fine-tuning; the clock
runs through both, recompilation included, and `baseline-short` shortens
both (see `phase_epochs`).

Runs are interleaved (`interleaved_jobs`): seed-major, every (precision,
variant) of a seed in turn, in reverse order on every other seed, so that
a drift of the machine's speed (another job starting, thermal limits) hits
every variant alike instead of the ones that happen to run last. An
untimed burn-in fit before the first run pays the process's one-time costs
(runtime start-up, first kernel compilations), which would otherwise land
in whichever variant runs first. The result records the CPU model, the
date, the backend and the versions, and each run its start time, position
in the run order and the load average before it.

Example:

```python
from keras_boost.bench import harness, report
result = harness.run_benchmark(harness.tiny_workload(), ["baseline", "O1"],
                               ["float32"], seeds=2)
print(report.markdown_table(result))
```
"""

import copy
import dataclasses
import datetime
import importlib
import importlib.util
import itertools
import json
import math
import os
import platform
import time
import warnings

import keras
import numpy as np

import keras_boost as boost
from keras_boost.bench.machine import cpu_model
from keras_boost.bench.machine import usable_cpus
from keras_boost.bench.recipe import FineTune
from keras_boost.bench.recipe import Workload
from keras_boost.bench import zoo
from keras_boost.bench.workloads import mnist_data
from keras_boost.bench.workloads import residual_cnn

__all__ = [
    "ALGORITHM_CONFIGS", "AccuracyClock", "DEFAULT_VARIANTS", "FineTune", "LEVEL_CONFIGS", "LOSS", "PLAIN_VARIANTS",
    "PRECISIONS", "RECIPE_FIELDS", "RESULT_VERSION", "SUPPORTED_VERSIONS", "WORKLOADS", "Workload", "burn_in",
    "environment", "input_pipeline", "interleaved_jobs", "merge_results", "phase_epochs",
    "quickstart_augmented_workload", "quickstart_workload", "realistic_workload", "recipe_optimizer", "resnet_workload",
    "run_benchmark", "run_once", "schedule_steps", "short_epochs", "split_variants", "time_to_accuracy", "tiny_workload",
    "training_dataset", "validate_result", "variant_recipe", "variant_spec", "workload_record",
]

# 2: runs in interleaved order with `order`, `started` and `load_average`;
# workloads with warmup, momentum and weight decay; `environment.cpu_model`.
RESULT_VERSION = 2
SUPPORTED_VERSIONS = (1, 2)
PRECISIONS = ("float32", "mixed_bfloat16")
LOSS = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def quickstart_workload():
    """The quickstart residual CNN on the embedded MNIST sample."""
    return Workload("quickstart", lambda seed: residual_cnn(seed=seed), mnist_data,
                    epochs=5, target=0.93)


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
    "quickstart": quickstart_workload,
    "quickstart-augmented": quickstart_augmented_workload,
    "resnet": resnet_workload,
    "realistic": realistic_workload,
    "tiny": tiny_workload,
    **zoo.WORKLOADS,
}


# --- variants ---------------------------------------------------------------------

# Each algorithm alone, as a manual-mode config on top of O0.
ALGORITHM_CONFIGS = {
    "less_bn": {"boost": {"mode": "manual", "less_bn": True}},
    "grad_freeze": {"boost": {"mode": "manual", "grad_freeze": True}, "grad_freeze": {"total_steps": "auto"}},
    "grad_accumulation": {"boost": {"mode": "manual", "grad_accumulation": True},
                          "grad_accumulation": {"grad_accumulation_step": 2}},
    "adasum": {"boost": {"mode": "manual", "adasum": True}},
    "fused_batch_norm": {"boost": {"mode": "manual", "fused_batch_norm": True}},
}
LEVEL_CONFIGS = {"O1": {"grad_freeze": {"total_steps": "auto"}}, "O2": {"grad_freeze": {"total_steps": "auto"}}}
DEFAULT_VARIANTS = ("baseline", "baseline-short", *ALGORITHM_CONFIGS, *LEVEL_CONFIGS)
# Plain Keras runs: the baselines, and `prefix-cache`, the baseline's model
# and recipe trained by `boost.fit_with_cached_prefix` (the frozen part of
# the model computed once per phase; for fine-tuning workloads). Not in the
# defaults: on a model with nothing frozen it is the baseline.
PLAIN_VARIANTS = ("baseline", "baseline-short", "prefix-cache")


# Recipe fields a variant may override (`+recipe.batch_size=256`).
RECIPE_FIELDS = ("batch_size", "learning_rate", "warmup_epochs", "momentum", "weight_decay")


def split_variants(text):
    """The variant names of a comma-separated `--variants` list.

    Commas inside brackets belong to a JSON value:
    `O1+less_bn.exclude_patterns=["A","B"]` is one variant.

    Example:

    ```python
    split_variants('baseline, O1+less_bn.exclude_patterns=["A","B"]')
    # ['baseline', 'O1+less_bn.exclude_patterns=["A","B"]']
    ```
    """
    names, depth, start = [], 0, 0
    for index, char in enumerate(text):
        depth += {"[": 1, "{": 1, "]": -1, "}": -1}.get(char, 0)
        if char == "," and depth <= 0:
            names.append(text[start:index])
            start, depth = index + 1, 0
    names.append(text[start:])  # an unclosed bracket keeps the rest as one name
    return [name.strip() for name in names if name.strip()]


def _overrides(name):
    """(base, [(section, key, value)]) of a variant name."""
    base, *overrides = name.split("+")
    parsed = []
    for override in overrides:
        path, equals, text = override.partition("=")
        section, dot, key = path.partition(".")
        if not (equals and dot and section and key):
            raise ValueError(f"Bad config override {override!r} in variant {name!r}: expected section.key=value.")
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            value = text
        parsed.append((section, key, value))
    return base, parsed


def variant_recipe(name, workload):
    """`workload` with the variant's `recipe.*` overrides applied.

    `baseline+recipe.batch_size=256+recipe.learning_rate=0.006` trains the
    baseline's model with a 4x batch at twice the peak rate (the warmup,
    given in epochs, keeps its length in epochs). The fields that may be
    overridden are `RECIPE_FIELDS`; the values are checked as `Workload`
    checks its own. A variant with another batch size sees other batches
    than the baseline of its seed: its paired tables compare initial weights
    and recipe, not batch order.

    Example:

    ```python
    variant_recipe("baseline+recipe.batch_size=128", tiny_workload()).batch_size   # 128
    ```
    """
    _, overrides = _overrides(name)
    changes = {key: value for section, key, value in overrides if section == "recipe"}
    unknown = sorted(set(changes) - set(RECIPE_FIELDS))
    if unknown:
        raise ValueError(f"Variant {name!r} overrides recipe field(s) {unknown}; valid: {list(RECIPE_FIELDS)}.")
    return dataclasses.replace(workload, **changes) if changes else workload


def variant_spec(name):
    """(level, config) of a boost variant; None for the plain baselines.

    A variant may carry overrides after `+`, each `section.key=value` with
    a JSON value (or a bare string). Those of section `recipe` change the
    training recipe (`variant_recipe`; any variant, the baselines
    included); the others are deep-merged onto a boost variant's config:
    `O1+grad_freeze.freeze_p=0.5` is O1 with 50% full steps (the name
    stays the variant's label in the results).

    Example:

    ```python
    variant_spec("O1+grad_freeze.freeze_p=0.5")
    # ('O1', {'grad_freeze': {'total_steps': 'auto', 'freeze_p': 0.5}})
    variant_spec("baseline+recipe.batch_size=256")   # None: plain Keras
    ```
    """
    base = name.split("+")[0]
    if base in ALGORITHM_CONFIGS:
        level, config = "O0", ALGORITHM_CONFIGS[base]
    elif base in LEVEL_CONFIGS:
        level, config = base, LEVEL_CONFIGS[base]
    elif base not in PLAIN_VARIANTS or not all(o.startswith("recipe.") for o in name.split("+")[1:]):
        raise ValueError(
            f"Unknown variant {name!r}. Valid variants: {list(DEFAULT_VARIANTS) + ['prefix-cache']}, a boost variant "
            "optionally followed by config overrides such as '+grad_freeze.freeze_p=0.5', any of them followed by "
            "recipe overrides such as '+recipe.batch_size=256'."
        )
    _, overrides = _overrides(name)
    if base in PLAIN_VARIANTS:
        return None
    overrides = [o for o in overrides if o[0] != "recipe"]
    config = copy.deepcopy(config)
    for section, key, value in overrides:
        config.setdefault(section, {})[key] = value
    flags = [key for key in config.get("boost", {}) if key != "mode"]
    if flags and config["boost"].get("mode", "auto") == "auto":
        # Auto mode would ignore them (with a warning the runs silence).
        raise ValueError(
            f"Variant {name!r} sets the flags {flags}, which boost mode 'auto' ignores: add "
            "'+boost.mode=manual' to apply them."
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", boost.config.BoostConfigWarning)
        boost.config.resolve_config(level, config)  # a bad key or value fails before any run
    return level, config


class AccuracyClock(keras.callbacks.Callback):
    """Training wall time (evaluation excluded) and test accuracy per epoch.

    The clock starts at the first `fit` it is passed to and keeps running
    through later ones (the phases of a fine-tuning run): the time between
    two fits (unfreezing, recompiling) counts as training, the curve holds
    one point per epoch of all of them.

    Example:

    ```python
    clock = AccuracyClock(x_test, y_test)
    model.fit(dataset, steps_per_epoch=steps, epochs=2, callbacks=[clock])
    model.fit(dataset, steps_per_epoch=steps, epochs=3, callbacks=[clock])
    len(clock.curve)   # 5: [[train_seconds, accuracy], ...]
    ```
    """

    def __init__(self, x_test, y_test, evaluated_model=None):
        super().__init__()
        self.x_test, self.y_test = x_test, y_test
        # The model to evaluate, when the fit trains a part of it (the
        # suffix of `fit_with_cached_prefix`); default: the fit's model.
        self.evaluated_model = evaluated_model
        self.curve, self.epoch_seconds = [], []
        self.start, self.eval_seconds = None, 0.0

    def on_train_begin(self, logs=None):
        if self.start is None:
            self.start = time.perf_counter()

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch_start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        end = time.perf_counter()
        self.epoch_seconds.append(end - self.epoch_start)
        trained_for = end - self.start - self.eval_seconds
        logits = (self.evaluated_model or self.model).predict(self.x_test, batch_size=256, verbose=0)
        accuracy = float(np.mean(np.argmax(logits, -1) == self.y_test))
        self.eval_seconds += time.perf_counter() - end
        self.curve.append([trained_for, accuracy])


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


def time_to_accuracy(curve, accuracy):
    """Training time at the first evaluation whose accuracy is >= `accuracy`.

    Accuracy is measured at the end of each epoch only, so the time is that
    of the first epoch end at or above it (MLPerf's rule: the first
    evaluation that reaches the target); nothing is interpolated between
    evaluations. A tolerance of 1e-9 absorbs float rounding of the target.

    Args:
        curve: `[[train_seconds, accuracy], ...]`, one point per epoch.
        accuracy: the accuracy to reach.

    Returns:
        The seconds, or None when no evaluation reaches `accuracy`.

    Example:

    ```python
    time_to_accuracy([[10, 0.90], [20, 0.95], [30, 0.94]], 0.93)   # 20
    time_to_accuracy([[10, 0.90], [20, 0.95]], 0.96)               # None
    ```
    """
    return next((float(t) for t, a in curve if a >= accuracy - 1e-9), None)


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


def _milliseconds(seconds):
    return None if seconds is None else 1e3 * seconds


def run_once(workload, variant, precision, seed, short_ratio=0.8):
    """One training run; returns a record (see `validate_result`).

    A workload with `fine_tune` trains in two phases (see `phase_epochs`):
    the first fit trains what `build` leaves trainable; then
    `fine_tune.unfreeze(model)` and a recompile with a fresh optimizer on
    the second phase's schedule (a `BoostModel` wraps the plain optimizer
    in its level's chain, and recomputes its freezing groups from the
    variables trainable then); the second fit continues the first's clock,
    curve and batches. The record then also holds `phases` (the epochs of
    each) and, with gradient freezing, `phase_freeze_depths` (one entry per
    phase; `freeze_depths` is the last phase's). A boost variant's record
    holds `boost_summary`: `model.boost_summary()` after each phase.

    Example:

    ```python
    record = run_once(tiny_workload(), "O1", "float32", seed=0)
    record["final_accuracy"], record["curve"]   # [[train_seconds, accuracy], ...] per epoch
    ```
    """
    record = {"variant": variant, "precision": precision, "seed": seed}
    spec = variant_spec(variant)
    workload = variant_recipe(variant, workload)
    (x, y), (x_test, y_test) = workload.data()
    ratio = short_ratio if variant == "baseline-short" else 1.0
    phases = phase_epochs(workload, short_ratio if variant == "baseline-short" else None)
    epochs = sum(phases)
    steps_per_epoch = math.ceil(len(x) / workload.batch_size)
    total_steps, warmup_steps = schedule_steps(workload, phases[0], steps_per_epoch, ratio)
    previous_policy = keras.config.dtype_policy()
    keras.config.set_dtype_policy(precision)
    freeze_depths, summaries = [], []  # per phase
    try:
        keras.utils.set_random_seed(seed)
        model = workload.build(seed)
        optimizer = recipe_optimizer(workload, total_steps, warmup_steps)
        if spec is not None:
            level, config = spec
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", boost.config.BoostConfigWarning)
                    processed, optimizer = boost.AutoBoost(level, config).network_auto_process_train(model, optimizer)
                    model = boost.BoostModel.from_model(processed, boost_level=level, boost_config_dict=config)
            except NotImplementedError as error:
                return {**record, "skipped": str(error)}
            if model.boost_config["boost"]["adasum"]:
                record["note"] = ("one replica: AdaSum is the identity here; "
                                  "python -m benchmarks.adasum measures it on N replicas")
        model.compile(optimizer=optimizer, loss=LOSS)
        clock = AccuracyClock(x_test, y_test, model)
        keras.utils.set_random_seed(seed)
        # The same batches for every variant: a seeded dataset, or, for
        # fine-tuning, arrays that Keras shuffles from the seed (a level's
        # prefix caching acts on arrays only: a dataset's batches may change
        # per epoch).
        dataset = None if workload.fine_tune is not None else training_dataset(x, y, workload.batch_size, seed)[0]
        start = time.perf_counter()
        # The whole fit calls are timed: for prefix-cache that includes
        # computing the cached features before Keras' fit begins.
        clock.start = start
        for phase, phase_length in enumerate(phases):
            if phase:
                # Phase 2, on the clock: unfreeze the base's top, recompile
                # with a fresh optimizer (BoostModel.compile wraps it in the
                # level's chain, as AutoBoost did for phase 1).
                fine_tune = workload.fine_tune
                fine_tune.unfreeze(model)
                total, warmup = schedule_steps(workload, phase_length, steps_per_epoch, ratio,
                                               warmup_epochs=fine_tune.warmup_epochs)
                model.compile(optimizer=recipe_optimizer(workload, total, warmup, fine_tune.learning_rate), loss=LOSS)
            if variant == "prefix-cache":
                boost.fit_with_cached_prefix(model, x, y, batch_size=workload.batch_size, epochs=phase_length,
                                             shuffle=True, verbose=0, callbacks=[clock])
            elif dataset is None:
                model.fit(x, y, batch_size=workload.batch_size, epochs=phase_length, shuffle=True, verbose=0,
                          callbacks=[clock])
            else:
                model.fit(dataset, steps_per_epoch=steps_per_epoch, epochs=phase_length, shuffle=False, verbose=0,
                          callbacks=[clock])
            freeze_depths.append(_freeze_depths(model))
            if spec is not None:
                summaries.append(model.boost_summary())
        fit_seconds = time.perf_counter() - start
    finally:
        keras.config.set_dtype_policy(previous_policy)
    # The steady speed leaves out each phase's first epoch (its compilation).
    firsts = set(itertools.accumulate([0, *phases[:-1]]))
    steady = [s for i, s in enumerate(clock.epoch_seconds) if i not in firsts] or clock.epoch_seconds
    if freeze_depths[-1] is not None:
        record["freeze_depths"] = freeze_depths[-1]
        if len(phases) > 1:
            record["phase_freeze_depths"] = freeze_depths
    if len(phases) > 1:
        record["phases"] = phases
    if summaries:
        record["boost_summary"] = summaries  # what the level did, per phase
    return {
        **record,
        "epochs": epochs,
        "steps": epochs * steps_per_epoch,
        "warmup_steps": warmup_steps,
        "fit_seconds": fit_seconds,
        "train_seconds": clock.curve[-1][0],
        "steps_per_second": steps_per_epoch / float(np.median(steady)),
        "curve": clock.curve,
        "time_to_target": time_to_accuracy(clock.curve, workload.target),
        "final_accuracy": clock.curve[-1][1],
    }


def _freeze_depths(model):
    """Which freeze depths got a train function, or None without freezing."""
    planner = getattr(model, "freeze_planner", None)
    if planner is None:
        return None
    # In adaptive mode a short run may trace none, and then trains exactly
    # like the baseline.
    return {
        "traced": [int(d) for d in planner.traced],
        "dropped": sorted(int(d) for d in planner.dropped),
        "declined": sorted(int(d) for d in planner.declined),
        # Measured on the run's first calls: what the planner decided from.
        "step_ms": {str(d): _milliseconds(planner.step_time(d)) for d in planner.traced},
        "trace_s": {str(d): planner.trace_cost(d) for d in planner.traced},
        # Rule 6: why freezing was switched off (None: it ran).
        "switched_off": planner.off_reason,
    }


def interleaved_jobs(variants, precisions, seeds, first_seed=0):
    """The run order: seed-major, alternating direction between seeds.

    Every (precision, variant) pair of seed 0 runs in the given order, seed
    1 runs them in reverse, seed 2 in order again, and so on. A slow drift
    of the machine's speed then hits every variant about alike, and no
    variant always runs first or last.

    Args:
        variants: variant names.
        precisions: precision names.
        seeds: number of seeds (`first_seed`, `first_seed + 1`, ...).
        first_seed: the first seed (to add seeds to an earlier run).

    Returns:
        A list of `(variant, precision, seed)`.

    Example:

    ```python
    interleaved_jobs(["a", "b", "c"], ["float32"], 2)
    # [("a", "float32", 0), ("b", "float32", 0), ("c", "float32", 0),
    #  ("c", "float32", 1), ("b", "float32", 1), ("a", "float32", 1)]
    ```
    """
    pairs = [(v, p) for p in precisions for v in variants]
    jobs = []
    for seed in range(first_seed, first_seed + seeds):
        for variant, precision in pairs if seed % 2 == 0 else reversed(pairs):
            jobs.append((variant, precision, seed))
    return jobs


def _load_average():
    return [round(v, 2) for v in os.getloadavg()] if hasattr(os, "getloadavg") else None


def _now():
    return datetime.datetime.now().astimezone().isoformat(timespec="seconds")


def environment():
    """Machine, backend and versions, recorded with every result.

    Example:

    ```python
    env = environment()
    env["cpu_model"], env["backend"], env["keras_version"]
    ```
    """
    backend = keras.backend.backend()
    module = {"tensorflow": "tensorflow", "jax": "jax", "torch": "torch"}.get(backend)
    return {
        "date": _now(),
        "backend": backend,
        "backend_version": importlib.import_module(module).__version__ if module else None,
        "keras_version": keras.__version__,
        "keras_boost_version": boost.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "processor": cpu_model(),
        "nproc": usable_cpus(),
        "cpu_count": os.cpu_count(),
        # The load before the run: a busy machine makes the spread wide.
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "cpu_model": cpu_model(),
        "numpy_version": np.__version__,
    }


def burn_in(workload, precisions):
    """An untimed few-step fit per precision, before any timed run.

    The first fit of a process pays one-time costs (runtime and thread-pool
    start-up, the first kernel compilations) that would otherwise be timed
    in whichever variant runs first.
    """
    (x, y), _ = workload.data()
    n = min(len(x), 4 * workload.batch_size)
    previous_policy = keras.config.dtype_policy()
    try:
        for precision in precisions:
            keras.config.set_dtype_policy(precision)
            keras.utils.set_random_seed(0)
            model = workload.build(0)
            model.compile(optimizer=recipe_optimizer(workload, 4), loss=LOSS)
            model.fit(x[:n], y[:n], batch_size=workload.batch_size, epochs=1, verbose=0)
            model.predict(x[:n], batch_size=256, verbose=0)
    finally:
        keras.config.set_dtype_policy(previous_policy)


def run_benchmark(workload, variants=DEFAULT_VARIANTS, precisions=PRECISIONS, seeds=1,
                  short_ratio=0.8, progress=True, burn_in_fit=True, first_seed=0, on_run=None):
    """Runs every (variant, precision, seed), interleaved; returns the result dict.

    Args:
        workload: a `Workload`.
        variants: variant names (see `variant_spec`).
        precisions: `"float32"` and/or `"mixed_bfloat16"`.
        seeds: number of seeds; seed `s` gives every variant the same
            initial weights, augmentations and batch order.
        short_ratio: length of `baseline-short` relative to the baseline.
        progress: print one line per run.
        burn_in_fit: run `burn_in` first.
        first_seed: the first seed (seeds `first_seed` .. `first_seed +
            seeds - 1` run).
        on_run: optional `on_run(result)`, called after every run with the
            result so far (the same layout, without
            `environment.finished`): e.g. to save it, so that an
            interrupted benchmark loses at most the run in progress.

    Returns:
        A dict with `version`, `workload`, `short_ratio`, `environment` and
        `runs` (in the order they ran, see `interleaved_jobs`).

    Example:

    ```python
    result = run_benchmark(tiny_workload(), ["baseline", "baseline-short"],
                           ["float32"], seeds=3, short_ratio=0.5)
    [(r["variant"], r["seed"]) for r in result["runs"]]
    # [('baseline', 0), ('baseline-short', 0), ('baseline-short', 1),
    #  ('baseline', 1), ('baseline', 2), ('baseline-short', 2)]
    ```
    """
    for variant in variants:  # validate every name before running anything
        variant_spec(variant)
        variant_recipe(variant, workload)
    for precision in precisions:
        if precision not in PRECISIONS:
            raise ValueError(f"Unknown precision {precision!r}. Valid: {list(PRECISIONS)}.")
    if isinstance(seeds, bool) or not isinstance(seeds, int) or seeds < 1:
        raise ValueError(f"seeds must be an int >= 1, got {seeds!r}.")
    if isinstance(first_seed, bool) or not isinstance(first_seed, int) or first_seed < 0:
        raise ValueError(f"first_seed must be an int >= 0, got {first_seed!r}.")
    if not 0 < short_ratio < 1:
        raise ValueError(f"short_ratio must be in (0, 1), got {short_ratio!r}.")
    if "baseline-short" in variants:
        phase_epochs(workload, short_ratio)  # raises when the short run cannot be made
    jobs = interleaved_jobs(variants, precisions, seeds, first_seed)
    env = environment()
    if burn_in_fit:
        burn_in(workload, precisions)
    runs = []
    result = {
        "version": RESULT_VERSION,
        "workload": workload_record(workload),
        "short_ratio": short_ratio,
        "burn_in": bool(burn_in_fit),
        "environment": env,
        "runs": runs,
    }
    for order, (variant, precision, seed) in enumerate(jobs):
        started, load = _now(), _load_average()
        run = run_once(workload, variant, precision, seed, short_ratio)
        run.update(order=order, started=started, load_average=load)
        runs.append(run)
        if progress:
            if "skipped" in run:
                outcome = "skipped"
            else:
                outcome = (f"train {run['train_seconds']:.1f} s, final accuracy "
                           f"{run['final_accuracy']:.4f}, load {load[0] if load else 'n/a'}")
            print(f"[{order + 1}/{len(jobs)}] {variant} {precision} seed {seed}: {outcome}", flush=True)
        if on_run is not None:
            on_run(result)
    env["finished"] = _now()
    return result


def workload_record(workload):
    """The workload as the result records it: its recipe, in JSON types.

    `dataclasses.asdict` without the callables (`build`, `data`); a
    `FineTune` becomes a dict, its layer names a list, so that a result
    read back from JSON compares equal to a new one (`merge_results`). A
    workload without one records no `fine_tune` key, as results did before
    it existed (they can still be appended to).

    Example:

    ```python
    workload_record(tiny_workload())
    # {'name': 'tiny', 'epochs': 2, 'batch_size': 64, 'learning_rate': 0.05, ...}
    workload_record(finetune_workload())["fine_tune"]
    # {'epochs': 8, 'learning_rate': 0.01, 'layers': ['stage3_block2_conv1', ...], 'base': 'base', ...}
    ```
    """
    record = {k: v for k, v in dataclasses.asdict(workload).items() if k not in ("build", "data")}
    if record.get("fine_tune") is None:
        record.pop("fine_tune", None)
    return json.loads(json.dumps(record))


def merge_results(earlier, later):
    """One result holding the runs of two runs of the same benchmark.

    For adding seeds to an earlier run (`keras-boost bench --first-seed N
    --append-to earlier.json`): the workload, `short_ratio` and burn-in must
    agree, and no (variant, precision, seed) may appear in both. The later
    runs keep their own `started` and `load_average`; their `order`
    continues the earlier one's, and the later environment is kept under
    `environment["appended"]`, so the table says where every number came
    from.

    Example:

    ```python
    merged = merge_results(load_json("seeds_0_2.json"), run_benchmark(..., first_seed=3))
    ```
    """
    for key in ("version", "workload", "short_ratio", "burn_in"):
        if earlier.get(key) != later.get(key):
            raise ValueError(
                f"Cannot merge results whose {key!r} differ: {earlier.get(key)!r} vs {later.get(key)!r}."
            )

    def key(run):
        return run["variant"], run["precision"], run["seed"]

    both = sorted({key(r) for r in earlier["runs"]} & {key(r) for r in later["runs"]})
    if both:
        raise ValueError(f"Both results hold the runs {both}: use --first-seed to run other seeds.")
    offset = 1 + max((r.get("order", -1) for r in earlier["runs"]), default=-1)
    runs = list(earlier["runs"]) + [{**r, "order": offset + r.get("order", i)} for i, r in enumerate(later["runs"])]
    environment = dict(earlier["environment"])
    environment["appended"] = list(environment.get("appended", [])) + [later["environment"]]
    return {**earlier, "environment": environment, "runs": runs}


_RUN_FIELDS = {
    "variant": str, "precision": str, "seed": int, "epochs": int, "steps": int,
    "fit_seconds": float, "train_seconds": float, "steps_per_second": float,
    "curve": list, "final_accuracy": float,
}


def validate_result(result):
    """Raises `ValueError` naming the first malformed field of a result dict.

    Example:

    ```python
    validate_result(json.load(open("bench_realistic_tensorflow.json")))
    ```
    """
    if not isinstance(result, dict):
        raise ValueError(f"A benchmark result must be a dict, got {type(result).__name__}.")
    for key in ("version", "workload", "environment", "runs"):
        if key not in result:
            raise ValueError(f"Benchmark result lacks {key!r}.")
    if result["version"] not in SUPPORTED_VERSIONS:
        raise ValueError(f"Result version {result['version']!r}, expected one of {list(SUPPORTED_VERSIONS)}.")
    for i, run in enumerate(result["runs"]):
        if "skipped" in run:
            continue
        for key, kind in _RUN_FIELDS.items():
            if not isinstance(run.get(key), kind) or isinstance(run.get(key), bool):
                raise ValueError(f"runs[{i}].{key} must be {kind.__name__}, got {run.get(key)!r}.")
        if not 0.0 <= run["final_accuracy"] <= 1.0:
            raise ValueError(f"runs[{i}].final_accuracy out of [0, 1]: {run['final_accuracy']}.")
        if run["time_to_target"] is not None and run["time_to_target"] > run["train_seconds"] + 1e-9:
            raise ValueError(f"runs[{i}].time_to_target exceeds the run's training time.")
        times = [t for t, _ in run["curve"]]
        if times != sorted(times) or len(times) != run["epochs"]:
            raise ValueError(f"runs[{i}].curve must hold one increasing point per epoch.")
    return result
