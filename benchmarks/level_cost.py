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

Two measurements, both interleaved with the order alternating:

- whole calls: each repeat times `BoostModel.from_model` + `compile` +
  `fit` of each variant (tracing included). Each variant's ratio to O0 is
  given per repeat (median, min and max). Two separate 15-s fits differ by
  up to 10-30% on a shared 2-vCPU machine, so this cannot resolve 2%.
- steady state (`--steady-rounds`): one model per variant, compiled and fit
  for one untimed epoch, then in each round every variant fits one more
  epoch, one after the other. A variant's ratio to O0 is taken within one
  round, so load drifts that slow both fits cancel. Each timed `fit` call
  includes what O1 does per call: the prefix-cache analysis and the
  summary at its end. Also reported is each variant's set-up, from
  `from_model` through the first epoch, next to O0's.

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
from keras_boost.bench.report import spread
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
    parser.add_argument("--steady-rounds", type=int, default=0,
                        help="also measure steady-state epochs: rounds of one epoch per variant (default 0: not)")
    return runner.parse(parser, argv, positive=("epochs", "repeats"))


def compiled(variant, workload, seed):
    """A fresh `BoostModel` of `variant`, compiled."""
    level, config = VARIANTS[variant]
    model = workload.build(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # LessBN's "nothing to remove"
        boosted = boost.BoostModel.from_model(model, boost_level=level, boost_config_dict=config)
    boosted.compile(optimizer=keras.optimizers.Adam(1e-3),
                    loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return boosted


def timed_fit(model, x, y, epochs):
    start = time.perf_counter()
    model.fit(x, y, batch_size=64, epochs=epochs, shuffle=False, verbose=0)
    return time.perf_counter() - start


def run(variant, workload, x, y, args):
    """Seconds of one whole from_model + compile + fit, and the boost summary."""
    gc.collect()
    start = time.perf_counter()
    boosted = compiled(variant, workload, args.seed)
    timed_fit(boosted, x, y, args.epochs)
    return time.perf_counter() - start, boosted.boost_summary()


def ratios_to_o0(seconds):
    """Per variant: the median seconds and the median, min and max of the
    per-repeat (per-round) ratios to O0."""
    result = {}
    for variant, times in seconds.items():
        ratios = [t / o for t, o in zip(times, seconds["O0"])]
        result[variant] = {
            "seconds": times, "median_seconds": statistics.median(times),
            "ratio_to_o0": spread(ratios),
        }
    return result


def measure_steady(workload, x, y, args):
    """Set-up seconds (from_model through the first epoch) and steady epochs, interleaved."""
    models, setup = {}, {}
    for variant in VARIANTS:
        gc.collect()
        start = time.perf_counter()
        models[variant] = compiled(variant, workload, args.seed)
        timed_fit(models[variant], x, y, 1)
        setup[variant] = time.perf_counter() - start
    seconds = {name: [] for name in VARIANTS}
    for round_ in range(args.steady_rounds):
        order = list(VARIANTS) if round_ % 2 == 0 else list(reversed(VARIANTS))
        for variant in order:
            seconds[variant].append(timed_fit(models[variant], x, y, 1))
        print(f"round {round_} " + " ".join(f"{v} {seconds[v][-1]:.2f} s" for v in VARIANTS), flush=True)
    return {"setup_seconds": setup, "epochs": ratios_to_o0(seconds)}


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
    result = {"settings": {"epochs": args.epochs, "repeats": args.repeats, "steps": args.epochs * len(x) // 64,
                           "steady_rounds": args.steady_rounds},
              "summaries": summaries, "variants": ratios_to_o0(seconds)}
    if args.steady_rounds:
        result["steady"] = measure_steady(workload, x, y, args)
    return result


def table(rows, unit):
    lines = [f"| variant | median {unit} | × O0, median [min, max] |", "|---|---|---|"]
    for variant, row in rows.items():
        r = row["ratio_to_o0"]
        lines.append(f"| {variant} | {row['median_seconds']:.2f} | {r['median']:.3f} [{r['min']:.3f}, {r['max']:.3f}] |")
    return lines


def report(result):
    lines = ["Whole calls:", *table(result["variants"], "s")]
    steady = result.get("steady")
    if steady:
        lines += ["", "Steady epochs, interleaved:", *table(steady["epochs"], "s per epoch"), "",
                  "Set-up (from_model through the first epoch): "
                  + ", ".join(f"{v} {s:.2f} s" for v, s in steady["setup_seconds"].items())]
    return "\n".join(lines)


def main(argv=None):
    return runner.main("level_cost", measure, parse_args, argv, report=report)


if __name__ == "__main__":
    main()
