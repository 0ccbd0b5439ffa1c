"""`keras-boost`: keras_boost's command line, parsed before Keras is imported.

This module is the console script. It lives outside the `keras_boost`
package on purpose: importing `keras_boost` imports Keras and its backend
(the package registers its classes for `.keras` loading on import), which
takes seconds; `keras-boost --help`, `--version` and a mistyped option
answer at once. The work itself is `keras_boost.bench.cli.run`, imported
once the command line is valid; it imports nothing from here (the parsed
options are all it needs), so the two modules import each other in one
direction only.

Example:

```shell
keras-boost                     # the commands
keras-boost --version           # keras_boost's version
keras-boost bench --help        # the options of the benchmark, and what its columns mean
keras-boost bench --quick       # plain Keras against O1, one seed: a first look
keras-boost bench --seeds 5 --variants baseline,baseline-short,O1 --precisions float32   # a real comparison
```
"""

import argparse
import importlib.util
import os
import pathlib
import sys

__all__ = [
    "BACKENDS", "QUICK", "add_bench_arguments", "build_parser", "check_bench_arguments", "main", "parse_args",
    "package_version",
]

BACKENDS = ("tensorflow", "jax", "torch")
# `--quick`: one seed of the plain model, its short baseline and O1, in
# float32, on the half-resolution `quick` workload (5 epochs, the short
# baseline 4): the quickstart's CNN on `quickstart` took 6-8.5 minutes on
# PyTorch on 2 cores.
QUICK = {"workload": "quick", "epochs": 5, "variants": ("baseline", "baseline-short", "O1"),
         "precisions": "float32", "seeds": 1}
FULL = {"workload": "quickstart", "precisions": "float32,mixed_bfloat16", "seeds": 3}
BENCH_DESCRIPTION = ("Time to accuracy of keras_boost's algorithms against a tuned and a rescaled-shorter "
                     "baseline; writes JSON, a Markdown table and a PNG plot.")
# What every column of the tables means (`--quick` prints the first six,
# the .md file holds them all).
BENCH_EPILOG = """\
the table (one row per variant and precision; median [min, max] over the seeds):
  variant         baseline: plain Keras, the tuned reference; baseline-short: the
                  same trained for --short-ratio of the epochs, its schedule
                  rescaled (the "just train less" alternative); O1, O2, less_bn, ...:
                  keras_boost's levels and algorithms on the same model and data,
                  through BoostModel.from_model; wrap-O1, wrap-O2: the plain
                  keras.Model compiled with boost.wrap(optimizer, level), the
                  optimizer door (wrap-O0+boost.SWITCH=true:
                  one optimizer-level algorithm alone through it)
  final acc.      test accuracy after the last epoch
  train time (s)  training wall time: compilation included, evaluation excluded
  × baseline      train time / the baseline's (below 1: faster)
  time to base -0.5pt (s)
                  training time until the test accuracy first reaches the
                  baseline's median final accuracy minus --accuracy-drop (half a
                  point), read at the end of each epoch; "not reached": no epoch did
  beats short     yes: better than baseline-short in time or final accuracy and
                  no worse in the other (faster at equal or higher accuracy, or
                  more accurate in equal or less time); no: not; "—": a baseline
the .md file next to the JSON adds:
  precision       float32 or mixed_bfloat16 (--precisions)
  × f32 baseline  train time / the float32 baseline's
  steps/s         optimizer steps per second, the first epoch (compilation) left out
  time to T (s)   time to the workload's target accuracy T; "not reached": never
a loss workload (lm) reports the validation loss instead of the accuracy
(lower is better): final val. loss, and time to base +0.02 (s), the time
until the loss first falls to the baseline's median final loss plus
--loss-rise (0.02 nats); "beats short" then means a lower loss
  reached         seeds that reached it, as k/n
  × base's        time to base -0.5pt / the baseline's own; "not reached": the
                  variant never reached it
  paired tables   each seed against the baseline (or baseline-short) run of the
                  same seed; "ref. never": only the reference never reached the
                  accuracy (the ratio would be 0); "n/a": nothing to compare with
how sure: one seed (--quick) is a first look: its ratios swing with the
machine's load (the last line prints the load average it saw). A real
comparison runs several seeds and reads the spreads:
  keras-boost bench --seeds 5 --variants baseline,baseline-short,O1 --precisions float32
and, later, more seeds onto the same result:
  keras-boost bench --seeds 2 --first-seed 5 ... --append-to bench_results/bench_quickstart_tensorflow.json
"""


def package_version():
    """keras_boost's version, read from `keras_boost/version.py` without importing the package.

    `find_spec` locates the package without running its `__init__` (which
    imports Keras).

    Example:

    ```python
    package_version()   # "0.1.0"
    ```
    """
    package = importlib.util.find_spec("keras_boost")
    path = pathlib.Path(package.origin).with_name("version.py")
    spec = importlib.util.spec_from_file_location("keras_boost_version_file", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.__version__


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
        epilog="`keras-boost bench --quick`: a first look, one seed (1-2 minutes on 2 idle cores); "
        "`keras-boost bench --help`: its options and what its columns mean.",
    )
    parser.add_argument("--version", action="version", version=f"keras-boost {package_version()}",
                        help="print keras_boost's version and exit")
    commands = parser.add_subparsers(title="commands", dest="command", metavar="COMMAND",
                                     help="what to run (one command today)")
    add_bench_arguments(commands.add_parser(
        "bench", prog="keras-boost bench", description=BENCH_DESCRIPTION, epilog=BENCH_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        help="time to accuracy of keras_boost's levels and algorithms against plain Keras"))
    return parser


def parse_args(argv):
    """The options of `keras-boost bench` (`argv` without the command), checked.

    Example:

    ```python
    parse_args(["--quick"]).workload   # "quick"
    ```
    """
    parser = argparse.ArgumentParser(prog="keras-boost bench", description=BENCH_DESCRIPTION,
                                     epilog=BENCH_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_bench_arguments(parser)
    return check_bench_arguments(parser, parser.parse_args(argv))


def add_bench_arguments(parser):
    """Adds the options of `keras-boost bench` to `parser`."""
    parser.add_argument("--workload",
                        help="quickstart (default), quick (--quick's: quickstart at half resolution on 2,000 "
                        "images), resnet, realistic (2,000 steps, ~2-3 min per run), tiny; the zoo (~1-2 min "
                        "per run): applications (MobileNetV2; applications-efficientnetb0, "
                        "applications-resnet50v2), transformer, finetune, lm (a miniature GPT on generated "
                        "text, to a validation loss)")
    parser.add_argument("--factory", help="module:function returning a keras_boost.bench.Workload")
    parser.add_argument("--variants", help="comma-separated subset (default: all but prefix-cache, the "
                        "baseline trained by fit_with_cached_prefix, for fine-tuning); a boost variant may "
                        "carry config overrides, e.g. O1+grad_freeze.freeze_p=0.5, and any variant recipe overrides, "
                        "e.g. baseline+recipe.batch_size=256+recipe.learning_rate=0.006; wrap-O0, wrap-O1, "
                        "wrap-O2: the plain model compiled with boost.wrap(optimizer, level) (not in the "
                        "default), e.g. --variants baseline,wrap-O1,O1, and "
                        "wrap-O0+boost.SWITCH=true for one optimizer-level algorithm alone")
    parser.add_argument("--precisions", help="comma-separated (default: float32,mixed_bfloat16; "
                        "--quick: float32)")
    parser.add_argument("--seeds", type=int,
                        help="seeds per variant, each the same initial weights and batches for every variant "
                        "(default 3, --quick 1); 5 or more for a real comparison")
    parser.add_argument("--first-seed", type=int, default=0,
                        help="seeds run are first-seed .. first-seed + seeds - 1: the same numbers repeat a "
                        "run, new ones add seeds to it (with --append-to)")
    parser.add_argument("--epochs", type=int, help="override the workload's epochs")
    parser.add_argument("--short-ratio", type=float, default=0.8,
                        help="length of baseline-short, as a fraction of the baseline's epochs (default "
                        "0.8); set it to a variant's measured time ratio to compare the two at equal time")
    parser.add_argument("--accuracy-drop", "--loss-rise", type=float, dest="accuracy_drop", metavar="MARGIN",
                        help="the reports' threshold is the baseline's median final accuracy minus this "
                        "(default 0.005: half a point); on a loss workload (lm) the baseline's median final "
                        "validation loss plus this (default 0.02)")
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
                        help=f"a first look: {QUICK['seeds']} seed of {', '.join(QUICK['variants'])} in "
                        f"{QUICK['precisions']}, on workload {QUICK['workload']} (up to {QUICK['epochs']} "
                        "epochs on another one), PyTorch on one thread, a narrower table; 1-2 minutes on 2 "
                        "idle cores, longer under load (the options above override it)")
    parser.add_argument("--no-progress", action="store_true", help="print no line per finished run")


def check_bench_arguments(parser, args):
    """Fills the defaults `--quick` changes; `parser.error` for a value out of range.

    `--quick` also sets `max_epochs` (the most epochs a workload trains,
    None otherwise) and, without `--variants`, the variants it compares.
    """
    defaults = QUICK if args.quick else FULL
    args.workload = args.workload or defaults["workload"]
    args.precisions = args.precisions or defaults["precisions"]
    args.seeds = defaults["seeds"] if args.seeds is None else args.seeds
    args.max_epochs = QUICK["epochs"] if args.quick else None
    if args.quick and not args.variants:
        args.variants = ",".join(QUICK["variants"])
    if args.seeds < 1:
        parser.error(f"--seeds must be >= 1, got {args.seeds}")
    if args.first_seed < 0:
        parser.error(f"--first-seed must be >= 0, got {args.first_seed}")
    if not 0 < args.short_ratio < 1:
        parser.error(f"--short-ratio must be in (0, 1), got {args.short_ratio}")
    if args.accuracy_drop is not None and not 0 <= args.accuracy_drop < 1:
        parser.error(f"--accuracy-drop must be in [0, 1), got {args.accuracy_drop}")
    if args.epochs is not None and args.epochs < 1:
        parser.error(f"--epochs must be >= 1, got {args.epochs}")
    return args


def _select_backend(backend, argv):
    """Keras reads KERAS_BACKEND once, when it is imported: set it before,
    or start again with it set when Keras is in already (`python -m
    keras_boost.bench` imports the package, and with it Keras)."""
    if backend is None or backend == os.environ.get("KERAS_BACKEND", "tensorflow"):
        return
    if "keras" not in sys.modules:
        os.environ["KERAS_BACKEND"] = backend
        return
    env = dict(os.environ, KERAS_BACKEND=backend)
    os.execve(sys.executable, [sys.executable, "-m", "keras_boost_cli", *argv], env)


def main(argv=None):
    """Console entry point: `keras-boost [--version | bench [options]]`; exits 0 on success.

    Without a command it prints the help and trains nothing (a bare
    `keras-boost` once started the full benchmark).
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if argv[:1] in ([], ["-h"], ["--help"]):
        parser.print_help()
        raise SystemExit(0)
    if argv[:1] == ["--version"]:
        parser.parse_args(argv)  # prints the version and exits
    if argv[0] != "bench":
        parser.print_usage(sys.stderr)
        parser.exit(2, f"keras-boost: unknown command {argv[0]!r}; valid: bench, --version\n")
    args = parse_args(argv[1:])  # a bad option fails here, before Keras is imported
    _select_backend(args.backend, argv)
    from keras_boost.bench.cli import run

    run(args)


if __name__ == "__main__":
    main()
