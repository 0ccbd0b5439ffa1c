"""`keras-boost bench`: time-to-accuracy of every algorithm and level.

Example:

```shell
keras-boost bench --quick                         # a few minutes on 2 CPU cores
keras-boost bench --workload resnet --seeds 3 --backend jax --output-dir results/
keras-boost bench --factory mypackage.bench:workload --variants baseline,O1
python -m keras_boost.bench --quick
```
"""

import argparse
import importlib
import os
import sys

BACKENDS = ("tensorflow", "jax", "torch")


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog="keras-boost bench",
        description="Time to accuracy of keras_boost's algorithms against a tuned and a "
        "rescaled-shorter baseline; writes JSON, a Markdown table and a PNG plot.",
    )
    parser.add_argument("--workload", default="quickstart", help="quickstart (default), resnet or tiny")
    parser.add_argument("--factory", help="module:function returning a keras_boost.bench.Workload")
    parser.add_argument("--variants", help="comma-separated subset (default: all)")
    parser.add_argument("--precisions", default="float32,mixed_bfloat16", help="comma-separated")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--epochs", type=int, help="override the workload's epochs")
    parser.add_argument("--short-ratio", type=float, default=0.8, help="length of baseline-short")
    parser.add_argument("--backend", choices=BACKENDS, help="Keras backend (default: KERAS_BACKEND)")
    parser.add_argument("--output-dir", default="bench_results", help="where the reports go")
    parser.add_argument("--quick", action="store_true",
                        help="1 seed, 2 epochs, baselines + O1 + freezing: a few minutes on 2 cores")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    if args.seeds < 1:
        parser.error(f"--seeds must be >= 1, got {args.seeds}")
    if not 0 < args.short_ratio < 1:
        parser.error(f"--short-ratio must be in (0, 1), got {args.short_ratio}")
    return args


def _reexec_with_backend(backend, argv):
    """The backend is fixed when keras is imported: start again with it set."""
    env = dict(os.environ, KERAS_BACKEND=backend)
    os.execve(sys.executable, [sys.executable, "-m", "keras_boost.bench", *argv], env)


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
    if args.epochs:
        workload.epochs = args.epochs
    if args.quick:
        workload.epochs = min(workload.epochs, 2)
    return workload


def run(argv=None):
    """Runs the CLI on `argv` and returns the result dict."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["bench"]:  # `keras-boost bench ...`
        argv = argv[1:]
    args = parse_args(argv)
    if args.backend and args.backend != os.environ.get("KERAS_BACKEND", "tensorflow"):
        _reexec_with_backend(args.backend, argv)

    from keras_boost.bench import harness
    from keras_boost.bench import report

    workload = _load_workload(args)
    if args.variants:
        variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    elif args.quick:
        variants = ["baseline", "baseline-short", "grad_freeze", "O1"]
    else:
        variants = list(harness.DEFAULT_VARIANTS)
    seeds = 1 if args.quick else args.seeds
    precisions = [p.strip() for p in args.precisions.split(",") if p.strip()]
    result = harness.run_benchmark(
        workload, variants, precisions, seeds, args.short_ratio, progress=not args.no_progress
    )
    os.makedirs(args.output_dir, exist_ok=True)
    stem = os.path.join(args.output_dir, f"bench_{workload.name}_{result['environment']['backend']}")
    report.write_json(result, stem + ".json")
    table = report.markdown_table(result)
    with open(stem + ".md", "w") as f:
        f.write(table)
    print("\n" + table)
    try:
        report.plot(result, stem + ".png")
        print(f"Wrote {stem}.json, {stem}.md and {stem}.png")
    except ImportError as error:
        print(f"Wrote {stem}.json and {stem}.md; no plot: {error}")
    return result


def main(argv=None):
    """Console entry point (`keras-boost bench`); exits 0 on success."""
    run(argv)


if __name__ == "__main__":
    main()
