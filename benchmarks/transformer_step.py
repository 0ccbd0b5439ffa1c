"""Where the zoo transformer's step time could come from: precision, batch size, steps per call.

No algorithm of O1 acts on the zoo's transformer (keras.io's text
classifier), and the time-matched short plain run reaches the plain run's
accuracy: a level can beat plain there only with a faster step. This script
times plain Keras' step of that model (Adam, the workload's data) under
the step-level levers a level could pull without changing the model:

- `mixed_bfloat16` instead of float32 (CPUs with AMX run bf16 matmuls in
  hardware);
- a batch of `--big-batch` instead of 64 (more work per call, fewer calls);
- `steps_per_execution=16` (several steps per compiled call, less Python;
  TensorFlow and JAX only: Keras' torch trainer refuses it).

Each setting trains a fresh model with the same seed: one untimed `fit` of
a few batches, then one timed `fit` of `--steps` batches. The settings are
interleaved and their order alternates between repeats, after one
untimed measurement of the reference (a process's first fits pay one-off
costs). Reported: the median ms per step and samples per second of each
setting, and per repeat each setting's time per sample over float32 batch
64's (median, min, max).
Only step cost is measured here; what a bigger batch does to accuracy per
epoch is not.

Example:

```shell
KERAS_BACKEND=jax python -m benchmarks.transformer_step --output benchmarks/results/transformer_step_jax.json
```
"""

import statistics
import time

import keras
import numpy as np

from benchmarks import runner
from keras_boost.bench.report import spread
from keras_boost.bench.zoo.transformer import transformer_workload

REFERENCE = "float32 batch 64"


def parse_args(argv=None):
    parser = runner.parser("transformer_step", __doc__, seed=0,
                           output="benchmarks/results/transformer_step_{backend}.json")
    parser.add_argument("--steps", type=int, default=100, help="timed steps per setting and repeat (default 100)")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved repeats (default 3)")
    parser.add_argument("--big-batch", type=int, default=256, help="the larger batch size tried (default 256)")
    return runner.parse(parser, argv, positive=("steps", "repeats", "big_batch"))


def settings(big_batch):
    """name -> (dtype policy, batch size, steps_per_execution)."""
    table = {
        REFERENCE: ("float32", 64, 1),
        "mixed_bfloat16 batch 64": ("mixed_bfloat16", 64, 1),
        f"float32 batch {big_batch}": ("float32", big_batch, 1),
    }
    if keras.backend.backend() != "torch":
        table["float32 batch 64, 16 steps per call"] = ("float32", 64, 16)
    return table


def ms_per_step(workload, x, y, policy, batch, per_call, args):
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(policy)
    try:
        model = workload.build(args.seed)
        model.compile(optimizer=keras.optimizers.Adam(1e-3), steps_per_execution=per_call,
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        n = batch * args.steps
        xs, ys = np.resize(x, (n, x.shape[1])), np.resize(y, n)
        warm = batch * 2 * per_call
        model.fit(xs[:warm], ys[:warm], batch_size=batch, epochs=1, verbose=0)
        start = time.perf_counter()
        model.fit(xs, ys, batch_size=batch, epochs=1, verbose=0)
        return (time.perf_counter() - start) / args.steps * 1e3
    finally:
        keras.config.set_dtype_policy(previous)


def measure(args):
    workload = transformer_workload()
    (x, y), _ = workload.data()
    table = settings(args.big_batch)
    ms = {name: [] for name in table}
    ms_per_step(workload, x, y, *table[REFERENCE], args)
    for repeat in range(args.repeats):
        order = list(table) if repeat % 2 == 0 else list(reversed(table))
        for name in order:
            ms[name].append(ms_per_step(workload, x, y, *table[name], args))
            print(f"repeat {repeat} {name:<38} {ms[name][-1]:7.1f} ms/step", flush=True)
    result = {"settings": {"steps": args.steps, "repeats": args.repeats}, "variants": {}}
    reference_batch = table[REFERENCE][1]
    for name, times in ms.items():
        batch = table[name][1]
        per_sample = [t / batch / (r / reference_batch) for t, r in zip(times, ms[REFERENCE])]
        result["variants"][name] = {
            "ms_per_step": times, "median_ms_per_step": statistics.median(times),
            "samples_per_second": batch * 1e3 / statistics.median(times),
            "time_per_sample_to_reference": spread(per_sample),
        }
    return result


def report(result):
    lines = ["| setting | ms per step | samples/s | time per sample × float32 batch 64, median [min, max] |",
             "|---|---|---|---|"]
    for name, row in result["variants"].items():
        r = row["time_per_sample_to_reference"]
        lines.append(f"| {name} | {row['median_ms_per_step']:.1f} | {row['samples_per_second']:.0f} | "
                     f"{r['median']:.2f} [{r['min']:.2f}, {r['max']:.2f}] |")
    return "\n".join(lines)


def main(argv=None):
    return runner.main("transformer_step", measure, parse_args, argv, report=report)


if __name__ == "__main__":
    main()
