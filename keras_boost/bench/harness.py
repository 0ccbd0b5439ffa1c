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
(an algorithm not implemented yet, AdaSum on one replica) is recorded as
skipped with the reason, never silently dropped.
"""

import dataclasses
import math
import time
import warnings

import keras
import numpy as np

import keras_boost as boost
from keras_boost.bench.workloads import mnist_data
from keras_boost.bench.workloads import residual_cnn

RESULT_VERSION = 1
PRECISIONS = ("float32", "mixed_bfloat16")
LOSS = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


@dataclasses.dataclass
class Workload:
    """A named model factory and dataset with its training recipe.

    Args:
        name: short name used in reports.
        build: `build(seed) -> keras.Model`, a built functional model that
            outputs logits.
        data: `data() -> ((x, y), (x_test, y_test))`, integer labels.
        epochs: epochs of the baseline run.
        batch_size: batch size.
        learning_rate: peak learning rate of SGD(momentum 0.9) with cosine decay.
        target: target test accuracy for "time to accuracy".

    Example:

    ```python
    def build(seed):
        return keras.Sequential([keras.Input((8,)), keras.layers.Dense(3)])
    Workload("mine", build, my_data, epochs=3, target=0.8)
    ```
    """

    name: str
    build: object
    data: object
    epochs: int = 5
    batch_size: int = 64
    learning_rate: float = 0.05
    target: float = 0.9


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


WORKLOADS = {"quickstart": quickstart_workload, "resnet": resnet_workload, "tiny": tiny_workload}


# --- variants ---------------------------------------------------------------------

# Each algorithm alone, as a manual-mode config on top of O0.
ALGORITHM_CONFIGS = {
    "less_bn": {"boost": {"mode": "manual", "less_bn": True}},
    "grad_freeze": {"boost": {"mode": "manual", "grad_freeze": True}, "grad_freeze": {"total_steps": "auto"}},
    "grad_accumulation": {"boost": {"mode": "manual", "grad_accumulation": True},
                          "grad_accumulation": {"grad_accumulation_step": 2}},
    "adasum": {"boost": {"mode": "manual", "adasum": True}},
}
LEVEL_CONFIGS = {"O1": {"grad_freeze": {"total_steps": "auto"}}, "O2": {"grad_freeze": {"total_steps": "auto"}}}
DEFAULT_VARIANTS = ("baseline", "baseline-short", *ALGORITHM_CONFIGS, *LEVEL_CONFIGS)


def variant_spec(name):
    """(level, config) of a boost variant; None for the plain baselines."""
    if name in ("baseline", "baseline-short"):
        return None
    if name in ALGORITHM_CONFIGS:
        return "O0", ALGORITHM_CONFIGS[name]
    if name in LEVEL_CONFIGS:
        return name, LEVEL_CONFIGS[name]
    raise ValueError(f"Unknown variant {name!r}. Valid variants: {list(DEFAULT_VARIANTS)}.")


class AccuracyClock(keras.callbacks.Callback):
    """Training wall time (evaluation excluded) and test accuracy per epoch."""

    def __init__(self, x_test, y_test):
        super().__init__()
        self.x_test, self.y_test = x_test, y_test
        self.curve, self.epoch_seconds = [], []

    def on_train_begin(self, logs=None):
        self.start = time.perf_counter()
        self.eval_seconds = 0.0

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch_start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        end = time.perf_counter()
        self.epoch_seconds.append(end - self.epoch_start)
        trained_for = end - self.start - self.eval_seconds
        logits = self.model.predict(self.x_test, batch_size=256, verbose=0)
        accuracy = float(np.mean(np.argmax(logits, -1) == self.y_test))
        self.eval_seconds += time.perf_counter() - end
        self.curve.append([trained_for, accuracy])


def _optimizer(workload, total_steps):
    schedule = keras.optimizers.schedules.CosineDecay(workload.learning_rate, max(total_steps, 1))
    return keras.optimizers.SGD(schedule, momentum=0.9)


def run_once(workload, variant, precision, seed, short_ratio=0.8):
    """One training run; returns a record (see `validate_result`)."""
    record = {"variant": variant, "precision": precision, "seed": seed}
    spec = variant_spec(variant)
    (x, y), (x_test, y_test) = workload.data()
    epochs = workload.epochs
    if variant == "baseline-short":
        epochs = max(1, int(round(workload.epochs * short_ratio)))
    steps_per_epoch = math.ceil(len(x) / workload.batch_size)
    previous_policy = keras.config.dtype_policy()
    keras.config.set_dtype_policy(precision)
    try:
        keras.utils.set_random_seed(seed)
        model = workload.build(seed)
        optimizer = _optimizer(workload, epochs * steps_per_epoch)
        if spec is not None:
            level, config = spec
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", boost.config.BoostConfigWarning)
                    processed, optimizer = boost.AutoBoost(level, config).network_auto_process_train(model, optimizer)
                    model = boost.BoostModel.from_model(processed, boost_level=level, boost_config_dict=config)
            except NotImplementedError as error:
                return {**record, "skipped": str(error)}
            if variant == "adasum" or (level == "O2"):
                record["note"] = "one replica: AdaSum has nothing to combine"
        model.compile(optimizer=optimizer, loss=LOSS)
        clock = AccuracyClock(x_test, y_test)
        keras.utils.set_random_seed(seed)  # same shuffling for every variant
        start = time.perf_counter()
        model.fit(x, y, batch_size=workload.batch_size, epochs=epochs, verbose=0, callbacks=[clock])
        fit_seconds = time.perf_counter() - start
    finally:
        keras.config.set_dtype_policy(previous_policy)
    steady = clock.epoch_seconds[1:] or clock.epoch_seconds
    reached = next((t for t, a in clock.curve if a >= workload.target), None)
    return {
        **record,
        "epochs": epochs,
        "steps": epochs * steps_per_epoch,
        "fit_seconds": fit_seconds,
        "train_seconds": clock.curve[-1][0],
        "steps_per_second": steps_per_epoch / float(np.median(steady)),
        "curve": clock.curve,
        "time_to_target": reached,
        "final_accuracy": clock.curve[-1][1],
    }


def run_benchmark(workload, variants=DEFAULT_VARIANTS, precisions=PRECISIONS, seeds=1,
                  short_ratio=0.8, progress=True):
    """Runs every (variant, precision, seed); returns the result dict."""
    from keras_boost.bench.overhead import environment

    for variant in variants:
        variant_spec(variant)  # validate every name before running anything
    for precision in precisions:
        if precision not in PRECISIONS:
            raise ValueError(f"Unknown precision {precision!r}. Valid: {list(PRECISIONS)}.")
    jobs = [(v, p, s) for s in range(seeds) for p in precisions for v in variants]
    bar = keras.utils.Progbar(len(jobs), unit_name="run") if progress else None
    runs = []
    for i, (variant, precision, seed) in enumerate(jobs):
        runs.append(run_once(workload, variant, precision, seed, short_ratio))
        if bar is not None:
            bar.update(i + 1, values=[("fit_s", runs[-1].get("fit_seconds", 0.0))])
    return {
        "version": RESULT_VERSION,
        "workload": {k: v for k, v in dataclasses.asdict(workload).items() if k not in ("build", "data")},
        "short_ratio": short_ratio,
        "environment": environment(),
        "runs": runs,
    }


_RUN_FIELDS = {
    "variant": str, "precision": str, "seed": int, "epochs": int, "steps": int,
    "fit_seconds": float, "train_seconds": float, "steps_per_second": float,
    "curve": list, "final_accuracy": float,
}


def validate_result(result):
    """Raises `ValueError` naming the first malformed field of a result dict."""
    for key in ("version", "workload", "environment", "runs"):
        if key not in result:
            raise ValueError(f"Benchmark result lacks {key!r}.")
    if result["version"] != RESULT_VERSION:
        raise ValueError(f"Result version {result['version']!r}, expected {RESULT_VERSION}.")
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
