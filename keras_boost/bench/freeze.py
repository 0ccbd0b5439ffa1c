"""Gradient freezing: step time per freeze depth, and time to accuracy.

Two measurements on the quickstart residual CNN (embedded MNIST), in one run:

1. **Step time per depth.** One `BoostModel` per depth d = 0..n-1, each with
   a `FreezeOptimizer` that always trains group d (d = 0: full steps). After
   a warm-up (compilation excluded), repeats time an epoch of `--steps`
   steps per depth, in a rotating order so machine drift hits every depth.
   Reported: median seconds/step per depth and its ratio to depth 0, and the
   mean step time of the default O1 schedule (10 groups, interval strategy,
   freeze_p 0.7) = the schedule's depth frequencies x the measured times.
2. **Time to accuracy.** Full training (BoostModel O0) against the O1
   freezing schedule (LessBN off, to isolate freezing), same initial
   weights and batch order, `--epochs` epochs, test accuracy after every
   epoch; wall time includes compilation (O1 compiles one function per
   depth it meets). Reported: time to `--target` accuracy and final
   accuracy, per seed.

Example:

```shell
KERAS_BACKEND=tensorflow python -m keras_boost.bench.freeze --quick
KERAS_BACKEND=jax python -m keras_boost.bench.freeze --output freeze_jax.json
```
"""

import argparse
import json
import statistics

import keras
import numpy as np

import keras_boost as boost
from keras_boost.bench.harness import AccuracyClock
from keras_boost.bench.overhead import environment
from keras_boost.bench.overhead import make_data
from keras_boost.bench.overhead import time_fit
from keras_boost.bench.workloads import copy_weights
from keras_boost.bench.workloads import mnist_data
from keras_boost.bench.workloads import residual_cnn

FREEZE_ONLY = {"boost": {"mode": "manual", "less_bn": False}}
LOSS = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(prog="python -m keras_boost.bench.freeze", description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=40, help="timed steps per depth and repeat")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=4, help="epochs of the time-to-accuracy runs")
    parser.add_argument("--seeds", type=int, default=2, help="seeds of the time-to-accuracy runs")
    parser.add_argument("--target", type=float, default=0.90, help="target test accuracy")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--skip-accuracy", action="store_true", help="only the step-time part")
    parser.add_argument("--quick", action="store_true", help="a few-minute smoke run")
    parser.add_argument("--output", help="write the results as JSON here")
    args = parser.parse_args(argv)
    if args.quick:
        args.steps, args.repeats, args.epochs, args.seeds = 10, 2, 2, 1
    return args


def sgd():
    return keras.optimizers.SGD(0.05, momentum=0.9)


def depth_models(groups_count, seed=1234):
    """One BoostModel per depth, each always training its group."""
    models = []
    template = residual_cnn(seed=seed)
    for depth in range(groups_count):
        model = residual_cnn(seed=seed, model_cls=boost.BoostModel, name=f"depth{depth}")
        copy_weights(template, model)
        groups = boost.GradientFreeze().split_parameters_groups(model, groups_count)
        model.compile(optimizer=boost.FreezeOptimizer(sgd(), groups, [depth]), loss=LOSS)
        models.append(model)
    return models


def step_times(args, groups_count=10):
    x, y = make_data(args.steps, args.batch_size)
    warm_x, warm_y = x[: 2 * args.batch_size], y[: 2 * args.batch_size]
    models = depth_models(groups_count)
    for model in models:
        model.fit(warm_x, warm_y, batch_size=args.batch_size, verbose=0)
    times = {d: [] for d in range(groups_count)}
    for repeat in range(args.repeats):
        order = list(range(groups_count))
        order = order[repeat % groups_count :] + order[: repeat % groups_count]
        for depth in order:
            steps_per_second, _ = time_fit(models[depth], x, y, args.batch_size)
            times[depth].append(1.0 / steps_per_second)
        print(f"  repeat {repeat + 1}/{args.repeats}: " + ", ".join(
            f"d{d} {1e3 * times[d][-1]:.0f}ms" for d in range(groups_count)))
    median = {d: statistics.median(t) for d, t in times.items()}
    # The default O1 schedule's depth frequencies, over a long schedule.
    schedule = boost.GradientFreeze(seed=0).generate_freeze_index_sequence(groups_count, 1, 0.7, 100_000)
    freq = np.bincount(schedule, minlength=groups_count) / len(schedule)
    o1_mean = float(sum(freq[d] * median[d] for d in range(groups_count)))
    return {
        "seconds_per_step": {str(d): t for d, t in times.items()},
        "median_seconds_per_step": {str(d): m for d, m in median.items()},
        "ratio_to_full": {str(d): median[d] / median[0] for d in range(groups_count)},
        "o1_schedule_depth_frequency": {str(d): float(f) for d, f in enumerate(freq)},
        "o1_schedule_mean_ratio": o1_mean / median[0],
    }


def accuracy_run(level, seed, args):
    (x, y), (x_test, y_test) = mnist_data()
    template = residual_cnn(seed=seed)
    config = FREEZE_ONLY if level == "O1" else None
    model = residual_cnn(seed=seed, model_cls=boost.BoostModel, boost_level=level, boost_config_dict=config)
    copy_weights(template, model)
    model.compile(optimizer=boost.wrap(sgd(), level, config), loss=LOSS)
    clock = AccuracyClock(x_test, y_test)
    keras.utils.set_random_seed(seed)  # same shuffling for both levels
    model.fit(x, y, batch_size=args.batch_size, epochs=args.epochs, verbose=0, callbacks=[clock])
    reached = next((t for t, a in clock.curve if a >= args.target), None)
    return {"level": level, "seed": seed, "curve": clock.curve,
            "time_to_target": reached, "final_accuracy": clock.curve[-1][1]}


def accuracy_runs(args):
    runs = []
    for seed in range(args.seeds):
        for level in (("O0", "O1") if seed % 2 == 0 else ("O1", "O0")):
            run = accuracy_run(level, seed, args)
            runs.append(run)
            print(f"  seed {seed} {level}: final acc {run['final_accuracy']:.4f}, "
                  f"time to {args.target:.2f}: {run['time_to_target'] or 'not reached'}, "
                  f"total {run['curve'][-1][0]:.1f}s")
    return runs


def main(argv=None):
    args = parse_args(argv)
    env = environment()
    print(f"keras_boost freeze benchmark | backend {env['backend']} | {env['processor']} "
          f"x{env['nproc']} | {env['date']} | load {env['load_average']}")
    print("Step time per freeze depth (residual CNN, batch", args.batch_size, "):")
    result = {"environment": env, "settings": vars(args), "step_times": step_times(args)}
    st = result["step_times"]
    for d, ratio in st["ratio_to_full"].items():
        print(f"  depth {d}: {1e3 * st['median_seconds_per_step'][d]:.1f} ms/step, {ratio:.3f}x full")
    print(f"  default O1 schedule mean step time: {st['o1_schedule_mean_ratio']:.3f}x full "
          f"({100 * (1 - st['o1_schedule_mean_ratio']):.1f}% lower)")
    if not args.skip_accuracy:
        print("Time to accuracy (O0 full vs O1 freezing only):")
        result["accuracy_runs"] = accuracy_runs(args)
    if args.output:
        with open(args.output, "w") as f:
            json.dump(result, f, indent=1)
    return result


if __name__ == "__main__":
    main()
