"""What O1 costs on a model where its algorithms cannot act: whole fits, O0 vs O1.

The zoo's transformer (keras.io's text classifier) has no BatchNormalization
(LessBN and the fused kernel find nothing), no frozen prefix (prefix caching
finds nothing) and, on a short run, gradient freezing switches itself off;
only gradient centralization acts. Three variants of `BoostModel`, each
built fresh from the same seed and fit for `--epochs` epochs on the
workload's data (batch 64, Adam 1e-3):

- `O0`: the reference;
- `O1-no-gc`: O1 with `less_bn.gc_flag=false`, so that nothing of O1 acts:
  its ratio to O0 is the cost of the algorithms that cannot act (the
  surgery's search, the freeze planner's timing and its summary, the
  prefix cache's analysis);
- `O1`: the level as users get it (gradient centralization acting).

Each repeat times the whole `BoostModel.from_model` + `compile` + `fit`
call of each variant (tracing included), interleaved, the order alternating
between repeats. Reported: per variant the median seconds and the
per-repeat ratio to O0 (median, min, max).

Example:

```shell
KERAS_BACKEND=tensorflow python -m benchmarks.level_cost --output benchmarks/results/level_cost_tensorflow.json
```
"""

import gc
import statistics
import time
import warnings

import keras

import keras_boost as boost
from benchmarks import runner
from keras_boost.bench.zoo.transformer import transformer_workload

VARIANTS = {
    "O0": ("O0", None),
    "O1-no-gc": ("O1", {"less_bn": {"gc_flag": False}}),
    "O1": ("O1", None),
}


def parse_args(argv=None):
    parser = runner.parser("level_cost", __doc__, seed=0,
                           output="benchmarks/results/level_cost_{backend}.json")
    parser.add_argument("--epochs", type=int, default=2, help="epochs per fit (default 2: 250 steps)")
    parser.add_argument("--repeats", type=int, default=4, help="timed fits per variant (default 4)")
    return runner.parse(parser, argv, positive=("epochs", "repeats"))


def run(variant, workload, x, y, args):
    """Seconds of one whole from_model + compile + fit, and the boost summary."""
    level, config = VARIANTS[variant]
    model = workload.build(args.seed)
    gc.collect()
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # LessBN's "nothing to remove"
        boosted = boost.BoostModel.from_model(model, boost_level=level, boost_config_dict=config)
    boosted.compile(optimizer=keras.optimizers.Adam(1e-3),
                    loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    boosted.fit(x, y, batch_size=64, epochs=args.epochs, shuffle=False, verbose=0)
    return time.perf_counter() - start, boosted.boost_summary()


def measure(args):
    workload = transformer_workload()
    (x, y), _ = workload.data()
    run("O0", workload, x[:640], y[:640], args)  # warm-up: imports, first traces of the process
    seconds = {name: [] for name in VARIANTS}
    summaries = {}
    for repeat in range(args.repeats):
        order = list(VARIANTS) if repeat % 2 == 0 else list(reversed(VARIANTS))
        for variant in order:
            took, summaries[variant] = run(variant, workload, x, y, args)
            seconds[variant].append(took)
            print(f"repeat {repeat} {variant:<9} {took:6.2f} s", flush=True)
    result = {"settings": {"epochs": args.epochs, "repeats": args.repeats, "steps": args.epochs * len(x) // 64},
              "summaries": summaries, "variants": {}}
    for variant, times in seconds.items():
        ratios = [t / o for t, o in zip(times, seconds["O0"])]
        result["variants"][variant] = {
            "seconds": times, "median_seconds": statistics.median(times),
            "ratio_to_o0": {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios)},
        }
    return result


def report(result):
    lines = ["| variant | median s | × O0, median [min, max] |", "|---|---|---|"]
    for variant, row in result["variants"].items():
        r = row["ratio_to_o0"]
        lines.append(f"| {variant} | {row['median_seconds']:.2f} | {r['median']:.3f} [{r['min']:.3f}, {r['max']:.3f}] |")
    return "\n".join(lines)


def main(argv=None):
    return runner.main("level_cost", measure, parse_args, argv, report=report)


if __name__ == "__main__":
    main()
