"""The result of a benchmark, as `keras-boost bench` writes it to JSON.

Its layout (`RESULT_VERSION`): `version`, `workload` (`workload_record`),
`short_ratio`, `burn_in`, `environment` and `runs`, one record per
(variant, precision, seed) in the order they ran. `validate_result` checks
one read back; `merge_results` joins two runs of the same benchmark (more
seeds).

Example:

```python
import json
from keras_boost.bench import results
result = results.validate_result(json.load(open("bench_results/bench_quickstart_tensorflow.json")))
```
"""

import dataclasses
import json

__all__ = ["RESULT_VERSION", "SUPPORTED_VERSIONS", "merge_results", "result_metric", "validate_result",
           "workload_record"]

# 2: runs in interleaved order with `order`, `started` and `load_average`;
# workloads with warmup, momentum and weight decay; `environment.cpu_model`.
RESULT_VERSION = 2
SUPPORTED_VERSIONS = (1, 2)


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
    if record.get("metric") == "accuracy":
        record.pop("metric")  # as results recorded it before workloads had a metric
    return json.loads(json.dumps(record))


def result_metric(result):
    """The metric of a result's workload: `"accuracy"` (also for results
    written before workloads had a metric) or `"loss"`; its runs record
    `final_accuracy` or `final_loss`."""
    return result["workload"].get("metric", "accuracy")


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
    "curve": list,
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
    metric = result_metric(result)
    if metric not in ("accuracy", "loss"):
        raise ValueError(f"workload.metric must be 'accuracy' or 'loss', got {metric!r}.")
    final = f"final_{metric}"
    for i, run in enumerate(result["runs"]):
        if "skipped" in run:
            continue
        for key, kind in {**_RUN_FIELDS, final: float}.items():
            if not isinstance(run.get(key), kind) or isinstance(run.get(key), bool):
                raise ValueError(f"runs[{i}].{key} must be {kind.__name__}, got {run.get(key)!r}.")
        if metric == "accuracy" and not 0.0 <= run[final] <= 1.0:
            raise ValueError(f"runs[{i}].final_accuracy out of [0, 1]: {run[final]}.")
        if metric == "loss" and run[final] < 0.0:  # NaN passes: a diverged run is a result too
            raise ValueError(f"runs[{i}].final_loss must be >= 0: {run[final]}.")
        if run["time_to_target"] is not None and run["time_to_target"] > run["train_seconds"] + 1e-9:
            raise ValueError(f"runs[{i}].time_to_target exceeds the run's training time.")
        times = [t for t, _ in run["curve"]]
        if times != sorted(times) or len(times) != run["epochs"]:
            raise ValueError(f"runs[{i}].curve must hold one increasing point per epoch.")
    return result
