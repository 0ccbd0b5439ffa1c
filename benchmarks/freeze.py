"""Gradient freezing: step time per freeze depth, and time to accuracy.

Two measurements on the quickstart residual CNN (embedded MNIST), in one run:

1. **Step time per depth.** One `BoostModel` per depth d = 0..n-1, each with
   a `FreezeOptimizer` that always trains group d (d = 0: full steps). After
   a warm-up (compilation excluded), repeats time an epoch of `--steps`
   steps per depth, in a rotating order so machine drift hits every depth.
   Reported: median seconds/step per depth and its ratio to depth 0, and the
   mean step time of the O1 schedule (10 groups, interval strategy, freeze_p
   0.7 or each `--freeze-p`) = the schedule's depth frequencies x the
   measured times (every depth compiled). `--workload realistic` times the
   bench's ResNet-20 with augmentation at batch 32; `--less-bn` times the
   depths of O1's LessBN model (surgery + gradient centralization) and the
   plain Keras model's step in the same rotation, so the mean O1 step is
   also given as a ratio to the plain step.
2. **Time to accuracy.** Full training (BoostModel O0) against the O1
   freezing schedule (LessBN off, to isolate freezing), same initial
   weights and batch order, `--epochs` epochs, test accuracy after every
   epoch; wall time includes compilation (O1 compiles one function per
   depth it meets). Reported: time to `--target` accuracy and final
   accuracy, per seed.

Example:

```shell
KERAS_BACKEND=tensorflow python -m benchmarks.freeze --quick
KERAS_BACKEND=jax python -m benchmarks.freeze --output freeze_jax.json
python -m benchmarks.freeze --workload realistic --less-bn --freeze-p 0.7,0.5,0.4 \
    --skip-accuracy --repeats 5 --output freeze_realistic.json
```
"""

import statistics

import keras
import numpy as np

import keras_boost as boost
from benchmarks import runner
from benchmarks.overhead import make_data
from benchmarks.overhead import time_fit
from keras_boost.bench.arguments import number_list
from keras_boost.bench.clock import AccuracyClock
from keras_boost.bench.workloads import copy_weights
from keras_boost.bench.workloads import mnist_data
from keras_boost.bench.workloads import residual_cnn

FREEZE_ONLY = {"boost": {"mode": "manual", "less_bn": False}}
LESS_BN_ONLY = {"boost": {"mode": "manual", "less_bn": True}}
MODELS = {
    "quickstart": (lambda seed, **kw: residual_cnn(seed=seed, **kw), 64),
    "realistic": (lambda seed, **kw: residual_cnn(seed=seed, width=16, blocks=(3, 3, 3), translation=0.1,
                                                  rotation=0.03, **kw), 32),
}
LOSS = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def parse_args(argv=None):
    parser = runner.parser("freeze", __doc__, seeds=2)
    parser.add_argument("--steps", type=int, default=40, help="timed steps per depth and repeat")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=4, help="epochs of the time-to-accuracy runs")
    parser.add_argument("--target", type=float, default=0.90, help="target test accuracy")
    parser.add_argument("--batch-size", type=int, help="default: 64 (quickstart), 32 (realistic)")
    parser.add_argument("--workload", choices=sorted(MODELS), default="quickstart",
                        help="the model whose depths are timed")
    parser.add_argument("--less-bn", action="store_true",
                        help="time O1's LessBN model per depth, and the plain model's step")
    parser.add_argument("--freeze-p", type=number_list(float, 0.0), default=[0.7],
                        help="comma-separated freeze_p values whose schedule mean step is reported")
    parser.add_argument("--skip-accuracy", action="store_true", help="only the step-time part")
    parser.add_argument("--quick", action="store_true", help="a few-minute smoke run")
    args = runner.parse(parser, argv, positive=("steps", "repeats", "epochs"))
    if args.quick:
        args.steps, args.repeats, args.epochs, args.seeds = 10, 2, 2, 1
    if args.batch_size is None:
        args.batch_size = MODELS[args.workload][1]
    bad = [p for p in args.freeze_p if not 0.0 < p <= 1.0]
    if bad:
        parser.error(f"--freeze-p values must be in (0, 1], got {bad}")
    if args.workload != "quickstart" and not args.skip_accuracy:
        parser.error("the time-to-accuracy part runs the quickstart model only: add --skip-accuracy, "
                     "or use `keras-boost bench --workload realistic`")
    return args


def sgd():
    return keras.optimizers.SGD(0.05, momentum=0.9)


def depth_models(groups_count, seed=1234, workload="quickstart", less_bn=False):
    """One BoostModel per depth, each always training its group.

    With `less_bn`, each is O1's LessBN model (surgery + gradient
    centralization) of the same seed, i.e. the same weights.
    """
    build = MODELS[workload][0]
    models = []
    template = None if less_bn else build(seed)
    for depth in range(groups_count):
        if less_bn:
            processed, _ = boost.AutoBoost("O0", LESS_BN_ONLY).network_auto_process_train(build(seed), sgd())
            model = boost.BoostModel.from_model(processed, boost_config_dict=LESS_BN_ONLY)
        else:
            model = build(seed, model_cls=boost.BoostModel, name=f"depth{depth}")
            copy_weights(template, model)
        groups = boost.GradientFreeze().split_parameters_groups(model, groups_count)
        model.compile(optimizer=boost.FreezeOptimizer(sgd(), groups, [depth]), loss=LOSS)
        models.append(model)
    return models


def schedule_mean_ratio(median, freeze_p, groups_count=10):
    """(depth frequencies, mean step / full step) of the interval schedule."""
    schedule = boost.GradientFreeze(seed=0).generate_freeze_index_sequence(groups_count, 1, freeze_p, 100_000)
    freq = np.bincount(schedule, minlength=groups_count) / len(schedule)
    return freq, float(sum(freq[d] * median[d] for d in range(groups_count))) / median[0]


def step_times(args, groups_count=10):
    x, y = make_data(args.steps, args.batch_size)
    warm_x, warm_y = x[: 2 * args.batch_size], y[: 2 * args.batch_size]
    models = dict(enumerate(depth_models(groups_count, workload=args.workload, less_bn=args.less_bn)))
    if args.less_bn:
        plain = MODELS[args.workload][0](1234)
        plain.compile(optimizer=sgd(), loss=LOSS)
        models["plain"] = plain
    for model in models.values():
        model.fit(warm_x, warm_y, batch_size=args.batch_size, verbose=0)
    keys = list(models)
    times = {key: [] for key in keys}
    for repeat in range(args.repeats):
        order = keys[repeat % len(keys) :] + keys[: repeat % len(keys)]  # drift hits every model
        for key in order:
            steps_per_second, _ = time_fit(models[key], x, y, args.batch_size)
            times[key].append(1.0 / steps_per_second)
        print(f"  repeat {repeat + 1}/{args.repeats}: " + ", ".join(
            f"{'d' if isinstance(k, int) else ''}{k} {1e3 * times[k][-1]:.0f}ms" for k in keys))
    median = {key: statistics.median(t) for key, t in times.items()}
    freq, o1_ratio = schedule_mean_ratio(median, 0.7, groups_count)
    result = {
        "seconds_per_step": {str(k): t for k, t in times.items()},
        "median_seconds_per_step": {str(k): m for k, m in median.items()},
        "ratio_to_full": {str(d): median[d] / median[0] for d in range(groups_count)},
        "o1_schedule_depth_frequency": {str(d): float(f) for d, f in enumerate(freq)},
        "o1_schedule_mean_ratio": o1_ratio,
        "schedule_mean_ratio": {str(p): schedule_mean_ratio(median, p, groups_count)[1] for p in args.freeze_p},
    }
    if args.less_bn:
        # The whole O1 step against plain Keras: LessBN's full step x the
        # schedule. Two estimates of LessBN's ratio: of the medians, and the
        # median of the per-repeat ratios (neighbours in time, less drift).
        paired = [a / b for a, b in zip(times[0], times["plain"])]
        result["less_bn_full_step_ratio_to_plain"] = median[0] / median["plain"]
        result["less_bn_full_step_ratio_to_plain_per_repeat"] = paired
        result["o1_mean_step_ratio_to_plain"] = {
            p: [ratio * median[0] / median["plain"], ratio * statistics.median(paired)]
            for p, ratio in result["schedule_mean_ratio"].items()
        }
    return result


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
    for seed in runner.seeds(args):
        for level in (("O0", "O1") if seed % 2 == 0 else ("O1", "O0")):
            run = accuracy_run(level, seed, args)
            runs.append(run)
            print(f"  seed {seed} {level}: final acc {run['final_accuracy']:.4f}, "
                  f"time to {args.target:.2f}: {run['time_to_target'] or 'not reached'}, "
                  f"total {run['curve'][-1][0]:.1f}s")
    return runs


def measure(args):
    print(f"Step time per freeze depth ({args.workload} residual CNN{', LessBN' if args.less_bn else ''}, "
          f"batch {args.batch_size}):")
    result = {"step_times": step_times(args)}
    st = result["step_times"]
    for d, ratio in st["ratio_to_full"].items():
        print(f"  depth {d}: {1e3 * st['median_seconds_per_step'][d]:.1f} ms/step, {ratio:.3f}x full")
    for p, ratio in st["schedule_mean_ratio"].items():
        print(f"  O1 schedule (freeze_p {p}) mean step time: {ratio:.3f}x full ({100 * (1 - ratio):.1f}% lower)")
    if args.less_bn:
        paired = statistics.median(st["less_bn_full_step_ratio_to_plain_per_repeat"])
        print(f"  plain Keras: {1e3 * st['median_seconds_per_step']['plain']:.1f} ms/step; LessBN full step "
              f"{st['less_bn_full_step_ratio_to_plain']:.3f}x plain (median of per-repeat ratios {paired:.3f}x)")
        for p, (of_medians, of_pairs) in st["o1_mean_step_ratio_to_plain"].items():
            print(f"  O1 mean step (freeze_p {p}): {of_medians:.3f}x / {of_pairs:.3f}x the plain step")
    if not args.skip_accuracy:
        print("Time to accuracy (O0 full vs O1 freezing only):")
        result["accuracy_runs"] = accuracy_runs(args)
    return result


def main(argv=None):
    return runner.main("freeze", measure, parse_args, argv)


if __name__ == "__main__":
    main()
