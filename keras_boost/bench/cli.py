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

The command line is parsed before Keras (and its backend) is imported, so
`--help` and a mistyped option answer at once.
"""

import argparse
import dataclasses
import importlib
import os
import sys

__all__ = [
    "BACKENDS", "QUICK", "add_bench_arguments", "build_parser", "check_bench_arguments", "main", "parse_args",
    "run",
]

BACKENDS = ("tensorflow", "jax", "torch")
# `--quick`: one seed of the plain model, its short baseline and O1, in
# float32, for at most 5 epochs (the quickstart's own: its short baseline
# trains 4): about 2 minutes on 2 CPU cores.
QUICK = {"epochs": 5, "variants": ("baseline", "baseline-short", "O1"), "precisions": "float32", "seeds": 1}
BENCH_DESCRIPTION = ("Time to accuracy of keras_boost's algorithms against a tuned and a rescaled-shorter "
                     "baseline; writes JSON, a Markdown table and a PNG plot.")


def build_parser():
    """The `keras-boost` parser: its commands, each with its options (only `bench` today).

    Example:

    ```python
    build_parser().print_help()
    ```
    """
    parser = argparse.ArgumentParser(
        prog="keras-boost", usage="keras-boost bench [options]",
        description="keras_boost's command line: train Keras 3 models to the same accuracy in less time.",
        epilog="`keras-boost bench --quick`: about 2 minutes on 2 cores; `keras-boost bench --help`: its options.",
    )
    commands = parser.add_subparsers(title="commands", dest="command", metavar="COMMAND",
                                     help="what to run (one command today)")
    add_bench_arguments(commands.add_parser(
        "bench", prog="keras-boost bench", description=BENCH_DESCRIPTION,
        help="time to accuracy of keras_boost's levels and algorithms against plain Keras"))
    return parser


def parse_args(argv):
    """The options of `keras-boost bench` (`argv` without the command), checked."""
    parser = argparse.ArgumentParser(prog="keras-boost bench", description=BENCH_DESCRIPTION)
    add_bench_arguments(parser)
    return check_bench_arguments(parser, parser.parse_args(argv))


def add_bench_arguments(parser):
    """Adds the options of `keras-boost bench` to `parser`."""
    parser.add_argument("--workload", default="quickstart",
                        help="quickstart (default), resnet, realistic (2,000 steps, ~2-3 min per run) or tiny")
    parser.add_argument("--factory", help="module:function returning a keras_boost.bench.Workload")
    parser.add_argument("--variants", help="comma-separated subset (default: all); a boost variant may "
                        "carry config overrides, e.g. O1+grad_freeze.freeze_p=0.5")
    parser.add_argument("--precisions", help="comma-separated (default: float32,mixed_bfloat16; "
                        "--quick: float32)")
    parser.add_argument("--seeds", type=int, help="default 3 (--quick: 1)")
    parser.add_argument("--first-seed", type=int, default=0,
                        help="seeds run are first-seed .. first-seed + seeds - 1 (to add seeds to a run)")
    parser.add_argument("--epochs", type=int, help="override the workload's epochs")
    parser.add_argument("--short-ratio", type=float, default=0.8,
                        help="length of baseline-short, as a fraction of the baseline's epochs (default "
                        "0.8); set it to a variant's measured time ratio to compare the two at equal time")
    parser.add_argument("--accuracy-drop", type=float, default=0.005,
                        help="the reports' threshold is the baseline's median final accuracy minus this "
                        "(default 0.005: half a point)")
    parser.add_argument("--append-to", metavar="JSON",
                        help="add this run's runs to an earlier result of the same workload (with "
                        "--first-seed for new seeds) and report them together")
    parser.add_argument("--report", metavar="JSON",
                        help="only re-render the table and plot of a result written before (next to it)")
    parser.add_argument("--no-burn-in", action="store_true",
                        help="skip the untimed few-step fit before the first timed run")
    parser.add_argument("--backend", choices=BACKENDS, help="Keras backend (default: KERAS_BACKEND)")
    parser.add_argument("--output-dir", default="bench_results", help="where the reports go")
    parser.add_argument("--quick", action="store_true",
                        help=f"{QUICK['seeds']} seed, up to {QUICK['epochs']} epochs, {', '.join(QUICK['variants'])} "
                        f"in {QUICK['precisions']}: about 2 minutes on 2 cores (the options above override it)")
    parser.add_argument("--no-progress", action="store_true", help="print no line per finished run")


def check_bench_arguments(parser, args):
    """Fills the defaults `--quick` changes; `parser.error` for a value out of range."""
    defaults = QUICK if args.quick else {"precisions": "float32,mixed_bfloat16", "seeds": 3}
    args.precisions = args.precisions or defaults["precisions"]
    args.seeds = defaults["seeds"] if args.seeds is None else args.seeds
    if args.seeds < 1:
        parser.error(f"--seeds must be >= 1, got {args.seeds}")
    if args.first_seed < 0:
        parser.error(f"--first-seed must be >= 0, got {args.first_seed}")
    if not 0 < args.short_ratio < 1:
        parser.error(f"--short-ratio must be in (0, 1), got {args.short_ratio}")
    if not 0 <= args.accuracy_drop < 1:
        parser.error(f"--accuracy-drop must be in [0, 1), got {args.accuracy_drop}")
    if args.epochs is not None and args.epochs < 1:
        parser.error(f"--epochs must be >= 1, got {args.epochs}")
    return args


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
    if epochs != workload.epochs:
        # A warmup as long as the run would leave no decay: keep it under half.
        warmup = min(workload.warmup_epochs, epochs / 2)
        workload = dataclasses.replace(workload, epochs=epochs, warmup_epochs=warmup)
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
        variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    else:
        variants = list(QUICK["variants"] if args.quick else harness.DEFAULT_VARIANTS)
    precisions = [p.strip() for p in args.precisions.split(",") if p.strip()]
    try:
        for variant in variants:
            harness.variant_spec(variant)
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


def main(argv=None):
    """Console entry point: `keras-boost [bench [options]]`; exits 0 on success.

    Without a command it prints the help and trains nothing (a bare
    `keras-boost` once started the full benchmark).
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if argv[:1] in ([], ["-h"], ["--help"]):
        parser.print_help()
        raise SystemExit(0)
    if argv[0] != "bench":
        parser.print_usage(sys.stderr)
        parser.exit(2, f"keras-boost: unknown command {argv[0]!r}; valid: bench\n")
    run(argv)


if __name__ == "__main__":
    main()
