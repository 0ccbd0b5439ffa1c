"""Keras' `jit_compile=True` on PyTorch (`torch.compile`) against eager: the zoo's MobileNetV2.

On torch Keras runs each train step eagerly, and about 30 of a MobileNetV2
step's 80 ms are Python outside the operators (journal, 2026-12-05). Keras
3.15 compiles the step with `torch.compile` when a model is compiled with
`jit_compile=True`. This script builds the zoo's MobileNetV2 (alpha 0.35,
32x32 colored digits, batch 32) once per mode, the same seed, and reports
per mode the seconds of its first two steps (`torch.compile`'s tracing and
code generation) and the milliseconds per step of `--repeats` timed `fit`
epochs of `--steps` batches, the modes interleaved.

Example:

```shell
python -m benchmarks.torch_compile --output benchmarks/results/torch_compile.json
```
"""

import statistics
import time

import keras

from benchmarks import runner
from keras_boost.bench import schedule
from keras_boost.bench import training
from keras_boost.bench.zoo import applications

MODES = {"eager": False, "torch.compile": True}


def parse_args(argv=None):
    parser = runner.parser("torch_compile", __doc__, backends=("torch",))
    parser.add_argument("--steps", type=int, default=40, help="timed steps per fit (default 40)")
    parser.add_argument("--repeats", type=int, default=3, help="timed fits per mode (default 3)")
    return runner.parse(parser, argv, positive=("steps", "repeats"))


def measure(args):
    workload = applications.applications_workload("MobileNetV2")
    (x, y), _ = workload.data()
    x, y = x[:32 * args.steps], y[:32 * args.steps]
    models, first = {}, {}
    for mode, jit in MODES.items():
        model = applications.application_model("MobileNetV2", seed=0)
        model.compile(optimizer=schedule.recipe_optimizer(workload, 1000, 125), loss=training.LOSS, jit_compile=jit)
        start = time.perf_counter()
        model.fit(x[:64], y[:64], batch_size=32, epochs=1, verbose=0)
        first[mode] = time.perf_counter() - start
        models[mode] = model
    ms = {mode: [] for mode in MODES}
    for repeat in range(args.repeats):
        for mode in (MODES if repeat % 2 == 0 else reversed(list(MODES))):
            start = time.perf_counter()
            models[mode].fit(x, y, batch_size=32, epochs=1, verbose=0)
            ms[mode].append(1e3 * (time.perf_counter() - start) / args.steps)
    result = {mode: {"first_two_steps_seconds": first[mode], "ms_per_step": ms[mode],
                     "median_ms_per_step": statistics.median(ms[mode])} for mode in MODES}
    for mode, row in result.items():
        print(f"{mode:14s} first two steps {row['first_two_steps_seconds']:6.1f} s, "
              f"{row['median_ms_per_step']:.1f} ms/step (median of {args.repeats})", flush=True)
    return {"settings": {"steps": args.steps, "repeats": args.repeats}, "modes": result}


def main(argv=None):
    return runner.main("torch_compile", measure, parse_args, argv)


if __name__ == "__main__":
    main()
