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

# The package holds the docstring (the `--help` text) and imports nothing:
# `python -m benchmarks.accelerator` starts the clock in `budget` first.
__all__ = []
