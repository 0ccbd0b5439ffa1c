"""Precision and optimizers: step time per dtype policy, time to accuracy per optimizer.

Two measurements, in one run:

1. **Step time per precision** (`float32`, `mixed_bfloat16`,
   `mixed_float16`) on the quickstart CNN and the ResNet-style workload:
   one copy of each model per policy (`keras_boost.precision.with_precision`,
   same weights), compiled once; after a warm-up, `--repeats` blocks of
   `--steps` training steps per policy, in a rotating order so machine drift
   hits every policy. Reported: median seconds per step and the ratio to
   float32, with the CPU model and its precision-relevant flags (whether a
   lower precision wins depends on them: AVX512-BF16/AMX for bfloat16).
2. **Time to accuracy per optimizer** on the quickstart workload: SGD with
   momentum, Adam, and keras_boost's `AdaBelief`, `AdaBound` and `LARS`,
   same initial weights and batch order, cosine decay; test accuracy after
   every epoch; time to the workload's target and final accuracy per seed.

Example:

```shell
KERAS_BACKEND=tensorflow python -m benchmarks.precision --output benchmarks/results/precision_tensorflow.json
KERAS_BACKEND=jax python -m benchmarks.precision --quick
```
"""

import statistics
import time

import keras
import numpy as np

import keras_boost as boost
from benchmarks import runner
from keras_boost.bench.catalog import quickstart_workload
from keras_boost.bench.catalog import resnet_workload
from keras_boost.bench.clock import AccuracyClock
from keras_boost.bench.clock import time_to_accuracy
from keras_boost.bench.machine import cpu_flags
from keras_boost.bench.training import LOSS
from keras_boost.precision import PRECISIONS
from keras_boost.precision import with_precision

# Peak learning rates: SGD's is the workload's; the Adam family uses the
# papers' default. LARS scales each layer's step by 0.001 |w| / |g|, so its
# global rate is far larger: 4.0 won a probe of {1, 4, 16} (seed 0, TF,
# 2026-12-01: final 0.955 / 0.970 / 0.696) on this workload.
OPTIMIZERS = {
    "sgd": lambda lr: keras.optimizers.SGD(lr, momentum=0.9),
    "adam": lambda lr: keras.optimizers.Adam(lr),
    "adabelief": lambda lr: boost.AdaBelief(lr),
    "adabound": lambda lr: boost.AdaBound(lr),
    "lars": lambda lr: boost.LARS(lr, momentum=0.9),
}
PEAK_LR = {"sgd": 0.05, "adam": 1e-3, "adabelief": 1e-3, "adabound": 1e-3, "lars": 4.0}


def parse_args(argv=None):
    parser = runner.parser("precision", __doc__, seeds=2)
    parser.add_argument("--steps", type=int, default=20, help="timed steps per policy and repeat")
    parser.add_argument("--repeats", type=int, default=5, help="timed repeats per policy (default 5)")
    parser.add_argument("--epochs", type=int, default=None, help="override the quickstart's 5 epochs")
    parser.add_argument("--skip-optimizers", action="store_true", help="only the step-time part")
    parser.add_argument("--quick", action="store_true", help="a few-minute smoke run")
    args = runner.parse(parser, argv, positive=("steps", "repeats"))
    if args.quick:
        args.steps, args.repeats, args.seeds, args.epochs = 5, 2, 1, 1
    return args


def _time_block(model, x, y, steps):
    start = time.perf_counter()
    for _ in range(steps):
        loss = model.train_on_batch(x, y)
    float(np.asarray(loss).reshape(-1)[0])  # wait for the last step
    return (time.perf_counter() - start) / steps


def precision_step_times(workload, args):
    """Median seconds per step of each policy, interleaved."""
    (x, y), _ = workload.data()
    x, y = x[: workload.batch_size], y[: workload.batch_size]
    base = workload.build(0)
    models = {}
    for policy in PRECISIONS:
        model = with_precision(base, policy)
        if model is base:
            model = keras.models.clone_model(base)
            model.set_weights(base.get_weights())
        optimizer = keras.optimizers.SGD(0.01, momentum=0.9)
        if policy == "mixed_float16":
            optimizer = boost.DynamicLossScaleOptimizer(optimizer)
        model.compile(optimizer=optimizer, loss=LOSS)
        _time_block(model, x, y, 2)  # compile and warm up
        models[policy] = model
    times = {policy: [] for policy in PRECISIONS}
    for repeat in range(args.repeats):
        order = list(PRECISIONS[repeat % 3:] + PRECISIONS[: repeat % 3])
        for policy in order:
            times[policy].append(_time_block(models[policy], x, y, args.steps))
        print(f"  {workload.name} repeat {repeat + 1}/{args.repeats}: " + ", ".join(
            f"{p} {1e3 * times[p][-1]:.1f}ms" for p in PRECISIONS), flush=True)
    median = {p: statistics.median(t) for p, t in times.items()}
    return {
        "batch_size": workload.batch_size,
        "seconds_per_step": times,
        "median_seconds_per_step": median,
        "ratio_to_float32": {p: median[p] / median["float32"] for p in PRECISIONS},
        "spread_ratio_to_float32": {
            p: [min(times[p]) / median["float32"], max(times[p]) / median["float32"]] for p in PRECISIONS},
        "fastest": min(median, key=median.get),
    }


def optimizer_run(name, seed, workload, epochs):
    (x, y), (x_test, y_test) = workload.data()
    model = workload.build(seed)
    steps = epochs * (len(x) // workload.batch_size)
    schedule = keras.optimizers.schedules.CosineDecay(PEAK_LR[name], steps)
    model.compile(optimizer=OPTIMIZERS[name](schedule), loss=LOSS)
    clock = AccuracyClock(x_test, y_test)
    keras.utils.set_random_seed(seed)  # same batch order for every optimizer
    model.fit(x, y, batch_size=workload.batch_size, epochs=epochs, verbose=0, callbacks=[clock])
    return {"optimizer": name, "seed": seed, "peak_learning_rate": PEAK_LR[name], "curve": clock.curve,
            "time_to_target": time_to_accuracy(clock.curve, workload.target),
            "final_accuracy": clock.curve[-1][1]}


def optimizer_runs(args):
    workload = quickstart_workload()
    epochs = args.epochs or workload.epochs
    runs = []
    for seed in runner.seeds(args):
        names = list(OPTIMIZERS)
        names = names[seed % len(names):] + names[: seed % len(names)]
        for name in names:
            run = optimizer_run(name, seed, workload, epochs)
            runs.append(run)
            reached = run["time_to_target"]
            print(f"  seed {seed} {name}: final {run['final_accuracy']:.3f}, time to "
                  f"{workload.target}: {'not reached' if reached is None else f'{reached:.1f}s'}", flush=True)
    summary = {}
    for name in OPTIMIZERS:
        mine = [r for r in runs if r["optimizer"] == name]
        reached = [r["time_to_target"] for r in mine if r["time_to_target"] is not None]
        summary[name] = {
            "median_final_accuracy": statistics.median(r["final_accuracy"] for r in mine),
            "median_time_to_target": statistics.median(reached) if reached else None,
            "reached": f"{len(reached)}/{len(mine)}",
        }
    return {"workload": workload.name, "epochs": epochs, "target": workload.target,
            "runs": runs, "summary": summary}


def measure(args):
    flags = cpu_flags()
    print(f"CPU flags {flags}")
    result = {"environment": {"cpu_flags": flags}, "step_times": {}}
    for workload in (quickstart_workload(), resnet_workload()):
        measured = precision_step_times(workload, args)
        result["step_times"][workload.name] = measured
        ratios = ", ".join(f"{p} {r:.2f}x" for p, r in measured["ratio_to_float32"].items())
        print(f"{workload.name}: {ratios}; fastest: {measured['fastest']}")
    if not args.skip_optimizers:
        print("Time to accuracy per optimizer (quickstart):")
        result["optimizers"] = optimizer_runs(args)
        for name, s in result["optimizers"]["summary"].items():
            print(f"  {name}: median final {s['median_final_accuracy']:.3f}, median time to target "
                  f"{s['median_time_to_target']}, reached {s['reached']}")
    return result


def main(argv=None):
    return runner.main("precision", measure, parse_args, argv)


if __name__ == "__main__":
    main()
