"""`keras-boost`: keras_boost's command line, parsed before Keras is imported.

This module is the console script. It lives outside the `keras_boost`
package on purpose: importing `keras_boost` imports Keras and its backend
(the package registers its classes for `.keras` loading on import), which
takes seconds; `keras-boost --help` and a mistyped option answer at once.
The work itself is `keras_boost.bench.cli.run`, imported once the command
line is valid.

Example:

```shell
keras-boost                     # the commands
keras-boost bench --help        # the options of the benchmark
keras-boost bench --quick       # plain Keras against O1: ~2 min on 2 cores
```
"""

import argparse
import sys

__all__ = [
    "BACKENDS", "QUICK", "add_bench_arguments", "build_parser", "check_bench_arguments", "main", "parse_args",
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
                        help="quickstart (default), resnet, realistic (2,000 steps, ~2-3 min per run), tiny; "
                        "the zoo (~1-2 min per run): applications (MobileNetV2; applications-efficientnetb0, "
                        "applications-resnet50v2), transformer, finetune")
    parser.add_argument("--factory", help="module:function returning a keras_boost.bench.Workload")
    parser.add_argument("--variants", help="comma-separated subset (default: all but prefix-cache, the "
                        "baseline trained by fit_with_cached_prefix, for fine-tuning); a boost variant may "
                        "carry config overrides, e.g. O1+grad_freeze.freeze_p=0.5, and any variant recipe overrides, "
                        "e.g. baseline+recipe.batch_size=256+recipe.learning_rate=0.006")
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
    parse_args(argv[1:])  # a bad option fails here, before Keras is imported
    from keras_boost.bench.cli import run

    run(argv)


if __name__ == "__main__":
    main()
