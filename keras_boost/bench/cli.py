"""`keras-boost bench`: time-to-accuracy of every algorithm and level.

Example:

```shell
keras-boost bench --quick                         # baseline, baseline-short, O1: ~2 min on 2 cores
keras-boost bench --workload realistic --seeds 3 \
    --variants baseline,baseline-short,O1,less_bn,grad_freeze --precisions float32
keras-boost bench --workload resnet --seeds 3 --backend jax --output-dir results/
keras-boost bench --factory mypackage.bench:workload --variants baseline,O1
keras-boost bench --report bench_results/bench_realistic_tensorflow.json   # re-render only
keras-boost                                       # the commands (`keras-boost bench --help`: the options)
# the short baseline given O1's time (O1 took 0.68x the baseline's time in an earlier run):
keras-boost bench --workload realistic --seeds 10 --short-ratio 0.6875 --precisions float32 \
    --variants baseline,baseline-short,O1
keras-boost bench --workload realistic --seeds 2 --first-seed 3 --precisions float32 \
    --variants baseline,baseline-short,O1 --append-to bench_results/bench_realistic_tensorflow.json
python -m keras_boost.bench bench --quick          # the same as keras-boost bench --quick
```

The command line is parsed by the console script `keras_boost_cli` (outside
this package, so `--help` answers before Keras is imported); `run` does the
work.
"""

import importlib
import os
import sys

from keras_boost_cli import BACKENDS
from keras_boost_cli import QUICK
from keras_boost_cli import add_bench_arguments
from keras_boost_cli import build_parser
from keras_boost_cli import check_bench_arguments
from keras_boost_cli import main
from keras_boost_cli import parse_args

__all__ = [
    "BACKENDS", "QUICK", "add_bench_arguments", "build_parser", "check_bench_arguments", "main", "parse_args",
    "run",
]


def _reexec_with_backend(backend, argv):
    """The backend is fixed when keras is imported: start again with it set."""
    env = dict(os.environ, KERAS_BACKEND=backend)
    os.execve(sys.executable, [sys.executable, "-m", "keras_boost.bench", "bench", *argv], env)


def _load_workload(args):
    from keras_boost.bench import harness

    if args.factory:
        module_name, _, function = args.factory.partition(":")
        if not function:
            raise SystemExit(f"--factory must look like module:function, got {args.factory!r}")
        workload = getattr(importlib.import_module(module_name), function)()
        if not isinstance(workload, harness.Workload):
            raise SystemExit(f"{args.factory} must return a keras_boost.bench.Workload, got {type(workload).__name__}")
    elif args.workload in harness.WORKLOADS:
        workload = harness.WORKLOADS[args.workload]()
    else:
        raise SystemExit(f"Unknown workload {args.workload!r}; valid: {sorted(harness.WORKLOADS)}")
    epochs = args.epochs or (min(workload.epochs, QUICK["epochs"]) if args.quick else workload.epochs)
    try:
        workload = workload.with_epochs(epochs)
    except ValueError as error:
        raise SystemExit(f"--epochs: {error}")
    return workload


def _write_reports(result, stem, accuracy_drop):
    from keras_boost.bench import report

    table = report.markdown_table(result, accuracy_drop)
    with open(stem + ".md", "w") as f:
        f.write(table)
    print("\n" + table)
    try:
        report.plot(result, stem + ".png", accuracy_drop)
        print(f"Wrote {stem}.md and {stem}.png")
    except ImportError as error:
        print(f"Wrote {stem}.md; no plot: {error}")


def run(argv=None):
    """Runs `keras-boost bench` on `argv` (its options) and returns the result dict."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["bench"]:  # `keras-boost bench ...`
        argv = argv[1:]
    args = parse_args(argv)
    if args.report:
        from keras_boost.bench import report

        try:
            result = report.load_json(args.report)
        except (OSError, ValueError) as error:
            raise SystemExit(f"Cannot read the result {args.report!r}: {error}")
        stem = args.report[: -len(".json")] if args.report.endswith(".json") else args.report
        _write_reports(result, stem, args.accuracy_drop)
        return result
    if args.backend and args.backend != os.environ.get("KERAS_BACKEND", "tensorflow"):
        _reexec_with_backend(args.backend, argv)

    import keras

    from keras_boost.bench import harness
    from keras_boost.bench import report

    workload = _load_workload(args)
    if args.variants:
        variants = harness.split_variants(args.variants)
    else:
        variants = list(QUICK["variants"] if args.quick else harness.DEFAULT_VARIANTS)
    precisions = [p.strip() for p in args.precisions.split(",") if p.strip()]
    try:
        for variant in variants:
            harness.variant_spec(variant)
            harness.variant_recipe(variant, workload)
    except ValueError as error:
        raise SystemExit(f"--variants: {error}")
    if "baseline-short" in variants:
        try:
            harness.short_epochs(workload.epochs, args.short_ratio)
        except ValueError as error:
            raise SystemExit(f"--short-ratio / --epochs: {error}")
    earlier = report.load_json(args.append_to) if args.append_to else None  # fail before running
    os.makedirs(args.output_dir, exist_ok=True)
    stem = os.path.join(args.output_dir, f"bench_{workload.name}_{keras.backend.backend()}")
    # Saved after every run: an interrupted benchmark keeps what it measured
    # (`--report` renders it, `--append-to` extends it).
    partial = stem + "_partial.json"
    result = harness.run_benchmark(
        workload, variants, precisions, args.seeds, args.short_ratio, progress=not args.no_progress,
        burn_in_fit=not args.no_burn_in, first_seed=args.first_seed,
        on_run=lambda result_so_far: report.write_json(result_so_far, partial),
    )
    if earlier is not None:
        try:
            result = harness.merge_results(earlier, result)
        except ValueError as error:
            report.write_json(result, stem + "_unmerged.json")  # the runs are not lost
            raise SystemExit(f"--append-to {args.append_to!r}: {error} This run: {stem}_unmerged.json.")
    report.write_json(result, stem + ".json")
    os.remove(partial)
    print(f"Wrote {stem}.json")
    _write_reports(result, stem, args.accuracy_drop)
    return result
