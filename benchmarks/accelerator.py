"""Accelerator check: the zoo's step time and a short time to accuracy, plain Keras against O1.

Issue 30, item 4: one prepared script that a session lent a GPU runs in one
call of the device tool, inside a hard wall-clock budget. On each backend it
runs, for each zoo workload (`applications`, `transformer`, `finetune`:
looked up in `keras_boost.bench.catalog.WORKLOADS` at run time; one not
registered is recorded as skipped) and each precision (`float32`,
`mixed_bfloat16`):

1. **Step time.** The plain `keras.Model` and the O1 model (the harness'
   `O1` variant: `AutoBoost("O1")` + `BoostModel.from_model`), built from
   the same seed and compiled with `jit_compile` as asked (default `"auto"`,
   Keras' own: XLA on JAX, and on TensorFlow when a GPU is present; eager on
   torch, whose jit is `torch.compile`). Each model first fits
   `--warmup-steps` batches (compilation, recorded as `warmup_seconds`);
   then `--repeats` interleaved fits of `--steps` full batches each, the
   order alternating (plain, O1 / O1, plain / ...), each timed over its
   epoch (`benchmarks.overhead.time_fit`). Reported: each model's ms per
   step and the O1 speed-up (plain ms / O1 ms) as median [min, max] over
   the repeats. The `finetune` workload is timed in its fine-tuning phase
   (the base's top unfrozen), two thirds of its run. O1's step here is its
   step at the start of a run: its freeze planner sees fits of `--steps`
   steps and traces a frozen depth only where that pays back within them.
2. **Time to accuracy**, if the budget remains: one seed of `baseline`
   and `O1` through `keras_boost.bench.training.run_once` on the workload
   shortened to `--tta-epochs` epochs (`Workload.with_epochs`: the
   schedule and a fine-tuning workload's phases rescaled), compiled as the
   harness compiles (`jit_compile="auto"`), the variant that runs first
   alternating from unit to unit; reported: both curves, final accuracies,
   training times, and the time each takes to reach the lower of the two
   final accuracies (`speedup_to_common`: baseline's over O1's).

**Budget.** `--budget` seconds of wall clock (default 450), counted from the
start of the process: a unit (one workload at one precision) starts only
when the time left covers its estimate (what the same workload cost before,
else `--min-unit-seconds`), a repeat only when the time left covers the last
one; anything not run is recorded as skipped with the reason. At the
deadline a watchdog ends the process (exit code 3) after marking, in the
JSON already written, the unit it cut and every unit not run. The JSON is
rewritten atomically after every unit (`benchmarks.runner`), so what was
measured is kept.

**Backends.** `--backends torch,jax` runs one process per backend in turn
(keras fixes its backend at import), each with an equal share of the time
left, a share unused passing to the next, and this parent process never
imports Keras (so it needs no TensorFlow). Each child writes its own JSON
(`--output` with `{backend}`); the parent prints, and with `--journal`
writes, a draft entry for `benchmarks/results/JOURNAL.md` from them. A child
that fails (e.g. a backend that does not import) is recorded in the draft
and its share passes on.

**Device.** The environment records `accelerator`: the GPU's name, memory
and driver from `nvidia-smi` when it is present, what the backend sees
(`jax.devices()`, `torch.cuda`, TensorFlow's GPUs) and `device`: the GPU's
name when the backend runs on it, else `"CPU: <model>"`. Without TensorFlow
(the GPU machine has none: its wheel is far over the 64 MiB a call may
carry) the harness feeds a NumPy generator of the same batches' shape and
order rule instead of `tf.data` (recorded as `input_pipeline`).

**On the lent GPU** (`nvidia-h200`; see `/work/.library/device/README.md`).
The machine has JAX and torch but neither Keras nor TensorFlow, and no
registry. Once, on the development machine, in the repository root:

```shell
bash benchmarks/accelerator.sh prepare    # wheels of keras, namex, optree for its Python 3.12 into .whl/
```

then the device tool's `run` with `carry: [".whl"]`, `timeout_s: 540` and the
command

```shell
bash benchmarks/accelerator.sh
```

It installs the wheels, records `nvidia-smi`, runs
`python3 -m benchmarks.accelerator --backends torch,jax --budget 450` (torch
first: eager, it compiles nothing and leaves time over, which passes to JAX)
and leaves in `$OUT` the JSON per backend, the journal draft and the log.
TensorFlow is not measured there.

**Smoke.** `--smoke`: tiny data (64 examples in the time-to-accuracy runs,
which train one epoch, two for `finetune`, in float32 only) and 2-3 steps per
fit, inside a 120 s budget: a check of the whole script on a CPU, where the
budget skips what does not fit (on 2 shared cores, TensorFlow: every unit
took 185 s; `--budget 300` runs them all).

Example:

```shell
python -m benchmarks.accelerator --smoke
python -m benchmarks.accelerator --backends tensorflow,jax,torch --budget 450 \\
    --output bench_results/accelerator_{backend}.json --journal bench_results/accelerator_journal.md
```
"""

import argparse
import dataclasses
import datetime
import gc
import inspect
import json
import os
import statistics
import subprocess
import sys
import threading
import time
import traceback

# The budget counts from the start of the process: Keras' import is part of it.
_STARTED = time.monotonic()

NAME = "accelerator"
WORKLOADS = ("applications", "transformer", "finetune")
PRECISIONS = ("float32", "mixed_bfloat16")
BACKENDS = ("tensorflow", "jax", "torch")
MODELS = ("plain", "O1")
VARIANTS = ("baseline", "O1")
DEFAULT_OUTPUT = "bench_results/accelerator_{backend}.json"
# Exit code of a process the watchdog ended at its deadline.
BUDGET_EXIT = 3
# Seconds a parent gives a child beyond its share before it kills it (the
# child's own watchdog ends it at its share).
_CHILD_GRACE = 30
# The full run and --smoke; options left unset take these.
_DEFAULTS = {"budget": 450.0, "steps": 60, "repeats": 5, "warmup_steps": 12, "tta_epochs": 4, "samples": None,
             "min_unit_seconds": 20.0}
_SMOKE = {"budget": 120.0, "steps": 3, "repeats": 2, "warmup_steps": 2, "tta_epochs": 1, "samples": 64,
          "min_unit_seconds": 2.0, "tta_precisions": ["float32"]}


# --- command line ------------------------------------------------------------------


def _names(text):
    return [name.strip() for name in text.split(",") if name.strip()]


def _add_options(parser):
    """The options of the script, on `parser` (the runner's, or the parent's)."""
    parser.add_argument("--backends", type=_names,
                        help="comma-separated backends, one process each in turn, sharing --budget "
                        "(default: only the current backend, in this process)")
    parser.add_argument("--budget", type=float,
                        help="hard wall-clock budget in seconds, from the process' start (default 450; smoke 120)")
    parser.add_argument("--workloads", type=_names, default=list(WORKLOADS),
                        help=f"comma-separated zoo workloads (default {','.join(WORKLOADS)}); "
                        "one not registered is recorded as skipped")
    parser.add_argument("--precisions", type=_names, default=list(PRECISIONS),
                        help=f"comma-separated dtype policies (default {','.join(PRECISIONS)})")
    parser.add_argument("--tta-precisions", type=_names,
                        help="the precisions of the time-to-accuracy runs (default: --precisions; smoke float32)")
    parser.add_argument("--jit-compile", default="auto", choices=("auto", "true", "false"),
                        help="compile(jit_compile=...) of both models (default auto: Keras' own choice)")
    parser.add_argument("--steps", type=int, help="timed steps per fit (default 60; smoke 3)")
    parser.add_argument("--repeats", type=int, help="timed fits per model (default 5; smoke 2)")
    parser.add_argument("--warmup-steps", type=int,
                        help="steps of each model's untimed first fit (default 12; smoke 2)")
    parser.add_argument("--tta-epochs", type=int,
                        help="epochs of the time-to-accuracy runs (default 4; smoke 1; at least 2 for a "
                        "fine-tuning workload)")
    parser.add_argument("--skip-accuracy", action="store_true", help="only the step time")
    parser.add_argument("--samples", type=int,
                        help="train and test on the first N examples in the time-to-accuracy runs "
                        "(default all; smoke 64)")
    parser.add_argument("--min-unit-seconds", type=float,
                        help="time a unit must have left when nothing estimates it (default 20; smoke 2)")
    parser.add_argument("--journal", help="also write a draft results-journal entry (Markdown) here")
    parser.add_argument("--smoke", dest="quick", action="store_true",
                        help="tiny data and 2-3 steps per fit: a CPU check of the whole script")
    return parser


def parse_args(argv=None):
    from benchmarks import runner

    parser = runner.parser(NAME, __doc__, seed=0, output=DEFAULT_OUTPUT)
    _add_options(parser)
    # `--smoke` is the runner's `quick`: the options it leaves unset take `_SMOKE`.
    args = runner.parse(parser, argv, positive=("steps", "repeats", "warmup_steps", "tta_epochs"),
                        defaults=_DEFAULTS, quick=_SMOKE)
    if args.samples is not None and args.samples < 1:
        parser.error(f"--samples must be >= 1, got {args.samples}")
    if not args.budget > 0:
        parser.error(f"--budget must be > 0 seconds, got {args.budget}")
    if not args.workloads:
        parser.error("--workloads names no workload")
    if args.tta_precisions is None:
        args.tta_precisions = list(args.precisions)
    for option in ("precisions", "tta_precisions"):
        given = getattr(args, option)
        unknown = [p for p in given if p not in PRECISIONS]
        if unknown or not given:
            parser.error(f"--{option.replace('_', '-')}: {unknown or 'none given'}; valid: {','.join(PRECISIONS)}")
    if args.backends is not None:
        parser.error("--backends is handled by main(), one process per backend")
    return args


# --- budget ------------------------------------------------------------------------


class Budget:
    """A hard wall-clock budget with a watchdog that ends the process at its deadline.

    The measurement asks `allows(estimate)` before each piece of work; the
    watchdog is the backstop for a piece that overruns (a compilation
    cannot be stopped halfway): at the deadline it completes the JSON
    already written at `path` (the unit it cut, and every unit of `plan`
    not in the file, marked skipped; `budget.stopped` says why), prints it
    and ends the process with exit code `BUDGET_EXIT`.

    Args:
        seconds: the budget, counted from `started` (`time.monotonic()`).
        started: when the budget began (default: the start of the process).
        path: the result's JSON, or None (nothing to complete).

    Example:

    ```python
    budget = Budget(450, path="bench_results/accelerator_jax.json")
    budget.plan = [("step_time", "applications", "float32")]
    budget.start()
    if budget.allows(30):
        ...
    budget.cancel()
    ```
    """

    def __init__(self, seconds, started=None, path=None):
        self.seconds = float(seconds)
        self.started = _STARTED if started is None else started
        self.deadline = self.started + self.seconds
        self.path = path
        self.plan = []          # (part, workload, precision) of every unit planned
        self.current = None     # the unit in progress
        self._timer = None

    def left(self):
        """Seconds until the deadline (negative after it)."""
        return self.deadline - time.monotonic()

    def used(self):
        return time.monotonic() - self.started

    def allows(self, estimate):
        """Whether `estimate` seconds of work fit in what is left."""
        return self.left() >= estimate

    def start(self):
        self._timer = threading.Timer(max(self.left(), 0.0), self._expire)
        self._timer.daemon = True
        self._timer.start()

    def cancel(self):
        if self._timer is not None:
            self._timer.cancel()

    def _expire(self):
        message = f"the {self.seconds:.0f} s budget ran out"
        if self.current is not None:
            part, workload, precision = self.current
            message += f" during the {part.replace('_', ' ')} of {workload} at {precision}"
        print(f"\nbudget: {message}; the process ends here", flush=True)
        if self.path is not None and os.path.exists(self.path):
            try:
                with open(self.path) as f:
                    result = json.load(f)
                stop(result, self.plan, message + "; the process was ended there", self.current)
                result["budget"]["used"] = round(self.used(), 1)
                result["environment"]["finished"] = _now()
                from benchmarks import runner

                runner.write_json(self.path, result)
                print(report(result), flush=True)
                print(f"Wrote {self.path}", flush=True)
            except Exception as error:  # the process ends anyway; say why the file is as it is
                print(f"budget: could not complete {self.path}: {error!r}", flush=True)
        os._exit(BUDGET_EXIT)


def stop(result, plan, reason, current=None):
    """Marks `current` and every unit of `plan` not in `result` as skipped for `reason`.

    Example:

    ```python
    stop(result, [("step_time", "transformer", "float32")], "the budget ran out")
    result["step_time"][-1]   # {'workload': 'transformer', 'precision': 'float32', 'skipped': '...'}
    ```
    """
    result.setdefault("budget", {})["stopped"] = reason
    for part, workload, precision in plan:
        records = result.setdefault(part, [])
        if not any(r["workload"] == workload and r["precision"] == precision for r in records):
            cut = current is not None and (part, workload, precision) == tuple(current)
            records.append({"workload": workload, "precision": precision,
                            "skipped": reason if cut else "not started: the budget ran out"})
    return result


# --- the machine ---------------------------------------------------------------------


def nvidia_smi():
    """The GPUs `nvidia-smi` lists: `[{"name", "memory_total", "driver"}]`, or None without it."""
    try:
        proc = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None
    gpus = []
    for line in proc.stdout.strip().splitlines():
        name, memory, driver = ([part.strip() for part in line.split(",")] + ["", ""])[:3]
        gpus.append({"name": name, "memory_total": memory, "driver": driver})
    return gpus


def backend_devices(backend):
    """What the backend runs on: `(accelerator name or None, details)`."""
    if backend == "jax":
        import jax

        devices = jax.devices()
        gpu = next((d for d in devices if d.platform in ("gpu", "cuda", "rocm")), None)
        details = {"default_backend": jax.default_backend(), "devices": [str(d) for d in devices]}
        return (getattr(gpu, "device_kind", str(gpu)) if gpu is not None else None), details
    if backend == "torch":
        import torch

        available = torch.cuda.is_available()
        name = torch.cuda.get_device_name(0) if available else None
        return name, {"cuda_available": available, "cuda_version": torch.version.cuda,
                      "device_count": torch.cuda.device_count() if available else 0}
    if backend == "tensorflow":
        import tensorflow as tf

        gpus = tf.config.list_physical_devices("GPU")
        name = None
        if gpus:
            name = tf.config.experimental.get_device_details(gpus[0]).get("device_name", gpus[0].name)
        return name, {"gpus": [g.name for g in gpus], "built_with_cuda": tf.test.is_built_with_cuda()}
    return None, {}


def accelerator_record(backend):
    """The device a run measured: `nvidia-smi`'s GPUs, the backend's view, and `device`.

    Example:

    ```python
    accelerator_record("jax")["device"]   # 'NVIDIA H200', or 'CPU: AMD EPYC ...'
    ```
    """
    from keras_boost.bench.machine import cpu_model

    gpus = nvidia_smi()
    try:
        name, details = backend_devices(backend)
    except Exception as error:  # record, do not fail: the CPU numbers are still numbers
        name, details = None, {"error": repr(error)}
    record = {"nvidia_smi": gpus, "backend_devices": details, "on_accelerator": name is not None,
              "device": name if name is not None else f"CPU: {cpu_model()}"}
    if gpus and name is None:
        record["warning"] = (f"nvidia-smi lists {gpus[0]['name']} but {backend} runs on the CPU "
                             "(a CPU-only build of the backend?)")
    return record


def _now():
    return datetime.datetime.now().astimezone().isoformat(timespec="seconds")


# --- workloads -----------------------------------------------------------------------


def find_workload(name, samples=None):
    """The registered zoo workload `name`, or `(None, reason)` when it is not registered.

    With `samples`, a factory that takes a `samples` argument (the
    `finetune` workload: its pretraining too) is asked for that small
    version.
    """
    from keras_boost.bench import catalog

    factory = catalog.WORKLOADS.get(name)
    if factory is None:
        return None, (f"workload {name!r} is not registered in keras_boost.bench.catalog.WORKLOADS "
                      f"(registered: {', '.join(sorted(catalog.WORKLOADS))})")
    if samples is not None and "samples" in inspect.signature(factory).parameters:
        return factory(samples=samples), None
    return factory(), None


def shortened(workload, epochs, samples=None):
    """`workload` trained for `epochs` epochs, on its first `samples` examples (None: all).

    `Workload.with_epochs` rescales the recipe (warmup, and a fine-tuning
    workload's two phases); a fine-tuning workload keeps at least 2 epochs
    (one per phase), and no workload gets more than its own.

    Example:

    ```python
    short = shortened(applications_workload(), 4)
    short.epochs, short.warmup_epochs   # 4, 1.0
    ```
    """
    epochs = min(max(int(epochs), 2 if workload.fine_tune is not None else 1), workload.epochs)
    short = workload.with_epochs(epochs)
    if samples is None:
        return short

    def data():
        (x, y), (x_test, y_test) = workload.data()
        return (x[:samples], y[:samples]), (x_test[:samples], y_test[:samples])

    return dataclasses.replace(short, data=data)


# --- step time -----------------------------------------------------------------------


def _optimizer(workload, learning_rate):
    import keras

    if workload.optimizer == "adamw":
        return keras.optimizers.AdamW(learning_rate, beta_1=workload.momentum,
                                      weight_decay=workload.weight_decay or 0.0)
    return keras.optimizers.SGD(learning_rate, momentum=workload.momentum, weight_decay=workload.weight_decay)


def _jit(text):
    return {"auto": "auto", "true": True, "false": False}[text]


def build_pair(workload, seed, jit_compile):
    """The plain and the O1 model of `workload`, same seed, compiled; `{"plain": m, "O1": m}`.

    O1 is the harness' `O1` variant (`AutoBoost` + `BoostModel.from_model`,
    as `run_once` builds it). A fine-tuning workload's models are in their
    second phase, as `run_once` makes it: the base's top unfrozen, then
    compiled with a fresh optimizer at the fine-tuning learning rate (which
    the `BoostModel` wraps in its level's chain). The optimizers keep a
    constant learning rate: the schedule costs nothing per step.
    """
    import warnings

    import keras

    import keras_boost as boost
    from keras_boost.bench import training
    from keras_boost.bench import variants

    fine_tune = workload.fine_tune
    learning_rate = fine_tune.learning_rate if fine_tune is not None else workload.learning_rate
    models = {}
    for name in MODELS:
        keras.utils.set_random_seed(seed)
        model = workload.build(seed)
        optimizer = _optimizer(workload, workload.learning_rate)
        if name == "O1":
            level, config = variants.variant_spec("O1")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", boost.config.BoostConfigWarning)
                processed, optimizer = boost.AutoBoost(level, config).network_auto_process_train(model, optimizer)
                model = boost.BoostModel.from_model(processed, boost_level=level, boost_config_dict=config)
        if fine_tune is not None:
            fine_tune.unfreeze(model)
            optimizer = _optimizer(workload, learning_rate)
        model.compile(optimizer=optimizer, loss=training.LOSS, jit_compile=jit_compile)
        models[name] = model
    return models


def _freezing(model):
    """What O1's gradient freezing ran: the traced depths and why it is off, or None."""
    planner = getattr(model, "freeze_planner", None)
    if planner is None:
        return None
    return {"traced": [int(d) for d in planner.traced], "switched_off": planner.off_reason}


def _spread(values):
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def step_time(workload, precision, args, budget):
    """One step-time unit: warm-up, then interleaved timed fits; returns its record."""
    import keras
    import numpy as np

    from benchmarks.overhead import time_fit

    record = {"workload": workload.name, "precision": precision, "batch_size": workload.batch_size,
              "steps": args.steps, "phase": "fine-tune" if workload.fine_tune is not None else "train"}
    started = time.monotonic()
    (x, y), _ = workload.data()
    index = np.arange(args.steps * workload.batch_size) % len(x)  # full batches only: no new shape
    x, y = x[index], y[index]
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(precision)
    try:
        models = build_pair(workload, args.seed, _jit(args.jit_compile))
        record["models"] = {}
        for name, model in models.items():
            warm = time.monotonic()
            n = args.warmup_steps * workload.batch_size
            model.fit(x[:n], y[:n], batch_size=workload.batch_size, epochs=1, shuffle=False, verbose=0)
            record["models"][name] = {"jit_compile": model.jit_compile, "params": int(model.count_params()),
                                      "warmup_seconds": round(time.monotonic() - warm, 3)}
            print(f"  {name}: warm-up {record['models'][name]['warmup_seconds']:.1f} s "
                  f"(jit_compile={model.jit_compile})", flush=True)
        repeats, last = [], 0.0
        for repeat in range(args.repeats):
            if repeats and not budget.allows(last):
                record["note"] = f"{len(repeats)} of {args.repeats} repeats: the budget left no time for more"
                break
            begun = time.monotonic()
            order = MODELS if repeat % 2 == 0 else MODELS[::-1]
            ms = {name: 1e3 / time_fit(models[name], x, y, workload.batch_size)[0] for name in order}
            repeats.append({"order": list(order), "plain_ms": ms["plain"], "O1_ms": ms["O1"],
                            "speedup": ms["plain"] / ms["O1"]})
            last = time.monotonic() - begun
            print(f"  repeat {repeat + 1}/{args.repeats}: plain {ms['plain']:.2f} ms  O1 {ms['O1']:.2f} ms  "
                  f"speed-up {ms['plain'] / ms['O1']:.3f}", flush=True)
        record["models"]["O1"]["freezing"] = _freezing(models["O1"])
    finally:
        keras.config.set_dtype_policy(previous)
        models = None
        gc.collect()
        keras.backend.clear_session()
    record["repeats"] = repeats
    for key in ("plain_ms", "O1_ms", "speedup"):
        record[key] = _spread([r[key] for r in repeats])
    record["seconds"] = round(time.monotonic() - started, 2)
    return record


# --- time to accuracy ----------------------------------------------------------------


def tta_estimate(unit, short):
    """Seconds a time-to-accuracy unit should take, from its step-time unit (None: unknown)."""
    if unit is None or "skipped" in unit:
        return None
    (x, _), _ = short.data()
    steps = short.epochs * -(-len(x) // short.batch_size)
    compiles = sum(m["warmup_seconds"] for m in unit["models"].values())
    phases = 2 if short.fine_tune is not None else 1
    per_step = (unit["plain_ms"]["median"] + unit["O1_ms"]["median"]) / 1e3
    # A train function per phase and a predict function (the evaluation
    # after every epoch) per model, each costing about a warm-up; 1.25x for
    # the models' construction and the evaluations themselves.
    return 1.25 * ((phases + 1) * compiles + steps * per_step)


def time_to_accuracy_unit(short, precision, seed, order=VARIANTS):
    """`baseline` and `O1` (in `order`) through `training.run_once` on the shortened workload; returns the record."""
    import keras

    from keras_boost.bench import clock
    from keras_boost.bench import training

    started = time.monotonic()
    record = {"workload": short.name, "precision": precision, "seed": seed, "epochs": short.epochs,
              "target": short.target, "order": list(order), "runs": {}}
    for variant in order:
        run = training.run_once(short, variant, precision, seed)
        record["runs"][variant] = run
        if "skipped" in run:
            print(f"  {variant}: skipped: {run['skipped']}", flush=True)
        else:
            print(f"  {variant}: train {run['train_seconds']:.1f} s, final accuracy {run['final_accuracy']:.4f}",
                  flush=True)
        gc.collect()
        keras.backend.clear_session()
    runs = record["runs"]
    if not any("skipped" in run for run in runs.values()):
        common = min(run["final_accuracy"] for run in runs.values())
        times = {v: clock.time_to_accuracy(run["curve"], common) for v, run in runs.items()}
        record.update(
            common_accuracy=common, time_to_common=times,
            speedup_to_common=times["baseline"] / times["O1"] if times["O1"] else None,
            train_time_ratio=runs["O1"]["train_seconds"] / runs["baseline"]["train_seconds"],
            reached_target={v: run["time_to_target"] is not None for v, run in runs.items()},
        )
    record["seconds"] = round(time.monotonic() - started, 2)
    return record


# --- the measurement -----------------------------------------------------------------


def measure(args):
    """The step-time units, then the time-to-accuracy units, inside the budget (a generator)."""
    import keras

    from keras_boost.bench.pipeline import input_pipeline

    backend = keras.backend.backend()
    output = args.output.format(backend=backend) if args.output else None
    budget = Budget(args.budget, path=output)
    pipeline = input_pipeline()
    accelerator = accelerator_record(backend)
    print(f"device: {accelerator['device']} | budget {args.budget:.0f} s ({budget.left():.0f} s left) | "
          f"input {pipeline}", flush=True)
    if "warning" in accelerator:
        print(f"WARNING: {accelerator['warning']}", flush=True)
    result = {
        "environment": {"accelerator": accelerator,
                        "input_pipeline": pipeline,
                        "xla_flags": os.environ.get("XLA_FLAGS")},
        "budget": {"seconds": args.budget, "used": None, "stopped": None},
        "step_time": [], "time_to_accuracy": [],
    }
    parts = ["step_time"] if args.skip_accuracy else ["step_time", "time_to_accuracy"]
    budget.plan = [(part, name, precision) for part in parts for name in args.workloads
                   for precision in args.precisions]
    yield result
    budget.start()
    try:
        workloads = {name: find_workload(name, args.samples) for name in args.workloads}
        costs = {}  # workload name -> seconds of its last step-time unit
        for part, name, precision in budget.plan:
            workload, missing = workloads[name]
            skip = missing
            if not skip and part == "time_to_accuracy" and precision not in args.tta_precisions:
                skip = f"not asked for (--tta-precisions {','.join(args.tta_precisions)})"
            if not skip:
                if part == "step_time":
                    estimate = costs.get(name, args.min_unit_seconds)
                else:
                    short = shortened(workload, args.tta_epochs, args.samples)
                    done = next((r for r in result["step_time"]
                                 if r["workload"] == name and r["precision"] == precision), None)
                    estimate = tta_estimate(done, short)
                if estimate is None:
                    skip = "its step time was not measured: nothing estimates its cost"
                elif not budget.allows(estimate):
                    skip = f"budget: {budget.left():.0f} s left, the estimate was {estimate:.0f} s"
            if skip:
                result[part].append({"workload": name, "precision": precision, "skipped": skip})
                continue
            print(f"{part.replace('_', ' ')}: {name} {precision} ({budget.left():.0f} s left)", flush=True)
            budget.current = (part, name, precision)
            try:
                if part == "step_time":
                    record = step_time(workload, precision, args, budget)
                    costs[name] = record["seconds"]
                else:
                    # Alternate which variant runs first: neither always pays a warm process' leftovers.
                    first = len([r for r in result[part] if "skipped" not in r]) % 2
                    record = time_to_accuracy_unit(short, precision, args.seed,
                                                   VARIANTS[::-1] if first else VARIANTS)
            except Exception as error:  # one unit's failure (memory, a kernel) must not cost the others
                traceback.print_exc()
                record = {"workload": name, "precision": precision,
                          "skipped": f"failed: {type(error).__name__}: {str(error)[-1000:]}"}
            budget.current = None
            result[part].append(record)
            result["budget"]["used"] = round(budget.used(), 1)
            yield result
    finally:
        budget.cancel()
    result["budget"]["used"] = round(budget.used(), 1)
    yield result


# --- report --------------------------------------------------------------------------


def _number(value, digits=2):
    return "—" if value is None else f"{value:.{digits}f}"


def report(result):
    """Markdown tables of one backend's result (plain dicts: no Keras needed).

    Example:

    ```python
    print(report(json.load(open("bench_results/accelerator_jax.json"))))
    ```
    """
    env = result.get("environment", {})
    accelerator = env.get("accelerator", {})
    lines = [f"### {env.get('backend', '?')} {env.get('backend_version', '')} on {accelerator.get('device', '?')}", ""]
    if result.get("failed"):
        return "\n".join(lines + [f"Failed: {result['failed']}", ""])
    skipped = []
    steps = [r for r in result.get("step_time", []) if "skipped" not in r]
    if steps:
        lines += ["| workload | precision | plain ms/step | O1 ms/step | O1 speed-up median [min, max] | "
                  "jit plain/O1 |", "|---|---|---|---|---|---|"]
    else:
        lines.append("No step time measured.")
    for r in result.get("step_time", []):
        if "skipped" in r:
            skipped.append((f"step time {r['workload']} {r['precision']}", r["skipped"]))
            continue
        s, models = r["speedup"], r["models"]
        lines.append(f"| {r['workload']} | {r['precision']} | {_number(r['plain_ms']['median'])} | "
                     f"{_number(r['O1_ms']['median'])} | {s['median']:.3f} [{s['min']:.3f}, {s['max']:.3f}] | "
                     f"{models['plain']['jit_compile']}/{models['O1']['jit_compile']} |")
    tta = [r for r in result.get("time_to_accuracy", []) if "skipped" not in r]
    if tta:
        lines += ["", "| workload | precision | epochs | final acc. baseline / O1 | train s baseline / O1 | "
                  "time to common acc. baseline / O1 (s) | O1 speed-up |", "|---|---|---|---|---|---|---|"]
    for r in result.get("time_to_accuracy", []):
        if "skipped" in r:
            skipped.append((f"time to accuracy {r['workload']} {r['precision']}", r["skipped"]))
            continue
        runs = r["runs"]
        if "common_accuracy" not in r:
            skipped.append((f"time to accuracy {r['workload']} {r['precision']}", "a variant was skipped: "
                            + "; ".join(run["skipped"] for run in runs.values() if "skipped" in run)))
            continue
        t = r["time_to_common"]
        lines.append(f"| {r['workload']} | {r['precision']} | {r['epochs']} | "
                     f"{runs['baseline']['final_accuracy']:.4f} / {runs['O1']['final_accuracy']:.4f} | "
                     f"{runs['baseline']['train_seconds']:.1f} / {runs['O1']['train_seconds']:.1f} | "
                     f"{_number(t['baseline'], 1)} / {_number(t['O1'], 1)} (to {r['common_accuracy']:.4f}) | "
                     f"{_number(r['speedup_to_common'], 3)} |")
    budget = result.get("budget", {})
    lines += ["", f"Budget {budget.get('seconds')} s, used {budget.get('used')} s"
              + (f"; stopped: {budget['stopped']}" if budget.get("stopped") else "") + "."]
    if skipped:
        reasons = {}  # the same reason once, with every unit it skipped
        for unit, reason in skipped:
            reasons.setdefault(reason, []).append(unit)
        lines += ["", "Skipped:"] + [f"- {', '.join(units)}: {reason}" for reason, units in reasons.items()]
    return "\n".join(lines) + "\n"


def _utc(text):
    return datetime.datetime.fromisoformat(text).astimezone(datetime.timezone.utc)


def journal_entry(results, command):
    """A draft entry of `benchmarks/results/JOURNAL.md` for the results of one check."""
    envs = [r.get("environment", {}) for r in results]
    dates = sorted(_utc(e[k]) for e in envs for k in ("date", "finished") if e.get(k))
    devices = sorted({e.get("accelerator", {}).get("device", "?") for e in envs if e.get("accelerator")})
    backends = ", ".join(f"{e.get('backend')} {e.get('backend_version', '')}".strip() for e in envs)
    keras_versions = sorted({e.get("keras_version") for e in envs if e.get("keras_version")})
    when = f"{dates[0]:%Y-%m-%d %H:%M}-{dates[-1]:%H:%M} UTC" if dates else f"{_utc(_now()):%Y-%m-%d %H:%M} UTC"
    lines = [
        f"## {when}: accelerator check, plain Keras against O1 ({', '.join(devices) or 'no device recorded'})",
        "",
        f"- Machine: {', '.join(devices) or '?'}; CPU {envs[0].get('cpu_model', '?') if envs else '?'} "
        f"x{envs[0].get('nproc', '?') if envs else '?'}; {backends} / Keras {', '.join(keras_versions) or '?'}",
        f"- Command: `{command}`",
        "- Data: " + (", ".join(f"`benchmarks/results/accelerator_{e.get('backend')}.json`" for e in envs
                                if e.get("date")) or "none written"),
        "",
        "Step time: interleaved fits of the same batches, median [min, max] over the repeats; "
        "time to accuracy: one seed, the workload shortened (see `benchmarks/accelerator.py`).",
        "",
    ]
    for result in results:
        lines.append(report(result))
    return "\n".join(lines)


# --- several backends: one process each -----------------------------------------------


def run_backends(backends, budget, output, journal, rest, started=None):
    """Runs the script once per backend, in turn, sharing `budget`; returns the results read back.

    Each child gets an equal share of the time left (an unused share passes
    on), its own `--output` (`output` with `{backend}`) and the arguments
    `rest`; it is killed `_CHILD_GRACE` s after its share if its watchdog
    has not ended it. This process imports neither Keras nor a backend.
    """
    started = _STARTED if started is None else started
    deadline = started + budget
    results = []
    for i, backend in enumerate(backends):
        share = (deadline - time.monotonic()) / (len(backends) - i)
        path = output.format(backend=backend)
        if share <= 0:
            results.append(_failed(backend, "no budget left"))
            continue
        print(f"\n=== {backend}: {share:.0f} s of the budget ===", flush=True)
        command = [sys.executable, "-m", f"benchmarks.{NAME}", "--backend", backend, "--budget", f"{share:.1f}",
                   "--output", path, *rest]
        environ = dict(os.environ, KERAS_BACKEND=backend, PYTHONUNBUFFERED="1")
        environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        before = os.path.getmtime(path) if os.path.exists(path) else None
        try:
            code = subprocess.run(command, env=environ, timeout=share + _CHILD_GRACE).returncode
        except subprocess.TimeoutExpired:
            code = "killed after its share"
        fresh = os.path.exists(path) and os.path.getmtime(path) != before
        if fresh:
            with open(path) as f:
                results.append(json.load(f))
        if code not in (0, BUDGET_EXIT):
            if not fresh:
                results.append(_failed(backend, f"the process ended with {code} before writing {path} (see its log)"))
            else:
                results[-1]["failed"] = f"the process ended with {code} (see its log)"
        print(f"=== {backend}: exit {code} ===", flush=True)
    command = " ".join(["python -m benchmarks.accelerator", "--backends", ",".join(backends),
                        "--budget", f"{budget:g}", *rest])
    entry = journal_entry(results, command)
    print("\n" + entry, flush=True)
    if journal:
        os.makedirs(os.path.dirname(os.path.abspath(journal)), exist_ok=True)
        with open(journal, "w") as f:
            f.write(entry)
        print(f"Wrote {journal}", flush=True)
    return results


def _failed(backend, reason):
    return {"benchmark": NAME, "environment": {"backend": backend}, "failed": reason}


def main(argv=None):
    """`python -m benchmarks.accelerator`: one backend here, or `--backends` one process each."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--backends" in argv or any(a.startswith("--backends=") for a in argv):
        if "-h" in argv or "--help" in argv:
            argv = [a for a in argv if a != "--backends" and not a.startswith("--backends")]
        else:
            return _main_backends(argv)
    from benchmarks import runner

    args = parse_args(argv)
    result = runner.main(NAME, measure, parse_args, argv, report=report)
    if args.journal and result is not None:
        with open(args.journal, "w") as f:
            f.write(journal_entry([result], " ".join(["python -m benchmarks.accelerator", *argv])))
        print(f"Wrote {args.journal}")
    return result


def _main_backends(argv):
    parser = argparse.ArgumentParser(prog=f"python -m benchmarks.{NAME}", add_help=False)
    parser.add_argument("--backends", type=_names, required=True)
    parser.add_argument("--budget", type=float)
    parser.add_argument("--output", default=DEFAULT_OUTPUT)
    parser.add_argument("--journal")
    parser.add_argument("--backend")
    known, rest = parser.parse_known_args(argv)
    if known.budget is None:
        known.budget = (_SMOKE if "--smoke" in rest else _DEFAULTS)["budget"]
    if known.backend:
        parser.error("give --backend or --backends, not both")
    wrong = [b for b in known.backends if b not in BACKENDS]
    if wrong or not known.backends:
        parser.error(f"--backends: {wrong or 'none given'}; valid: {','.join(BACKENDS)}")
    if "{backend}" not in known.output:
        parser.error(f"--output must hold {{backend}} with --backends (one file per backend), got {known.output!r}")
    if not known.budget > 0:
        parser.error(f"--budget must be > 0 seconds, got {known.budget}")
    return run_backends(known.backends, known.budget, known.output, known.journal, rest)


if __name__ == "__main__":
    main()
