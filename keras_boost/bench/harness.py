"""The benchmark's run order: every (variant, precision, seed), interleaved.

`run_benchmark` runs each job of `interleaved_jobs` with
`training.run_once` and collects the records into a result (see
`results`). Runs are interleaved: seed-major, every (precision, variant)
of a seed in turn, in reverse order on every other seed, so that a drift
of the machine's speed (another job starting, thermal limits) hits every
variant alike instead of the ones that happen to run last. An untimed
burn-in fit (`training.burn_in`) before the first run pays the process's
one-time costs (runtime start-up, first kernel compilations), which would
otherwise land in whichever variant runs first. The result records the
CPU model, the date, the backend and the versions (`environment`), and
each run its start time, position in the run order and the load average
before it.

Example:

```python
from keras_boost.bench import catalog, harness, report
result = harness.run_benchmark(catalog.tiny_workload(), ["baseline", "O1"],
                               ["float32"], seeds=2)
print(report.markdown_table(result))
```
"""

import datetime
import importlib
import os
import platform

import keras
import numpy as np

import keras_boost as boost
from keras_boost.bench.machine import cpu_model
from keras_boost.bench.machine import usable_cpus
from keras_boost.bench.results import RESULT_VERSION
from keras_boost.bench.results import workload_record
from keras_boost.bench.schedule import phase_epochs
from keras_boost.bench.training import burn_in
from keras_boost.bench.training import run_once
from keras_boost.bench.variants import DEFAULT_VARIANTS
from keras_boost.bench.variants import variant_recipe
from keras_boost.bench.variants import variant_spec

__all__ = ["PRECISIONS", "environment", "interleaved_jobs", "run_benchmark"]

PRECISIONS = ("float32", "mixed_bfloat16")


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
        # PyTorch's intra-op threads (`--quick` sets one); None on the other backends.
        "torch_threads": importlib.import_module("torch").get_num_threads() if backend == "torch" else None,
        "cpu_model": cpu_model(),
        "numpy_version": np.__version__,
    }


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
                outcome = (f"train {run['train_seconds']:.1f} s, final {workload.metric} "
                           f"{run['final_' + workload.metric]:.4f}, load {load[0] if load else 'n/a'}")
            print(f"[{order + 1}/{len(jobs)}] {variant} {precision} seed {seed}: {outcome}", flush=True)
        if on_run is not None:
            on_run(result)
    env["finished"] = _now()
    env["load_average_finished"] = _load_average()  # with `load_average`: the load the runs saw
    return result
