"""The accelerator check's names, defaults and command-line options."""

import benchmarks.accelerator as package

__all__ = ["BACKENDS", "DEFAULT_OUTPUT", "DEFAULTS", "MODELS", "NAME", "PRECISIONS", "SMOKE", "VARIANTS",
           "WORKLOADS", "add_options", "names", "parse_args"]

NAME = "accelerator"
WORKLOADS = ("applications", "transformer", "finetune")
PRECISIONS = ("float32", "mixed_bfloat16")
BACKENDS = ("tensorflow", "jax", "torch")
MODELS = ("plain", "O1")
VARIANTS = ("baseline", "O1")
DEFAULT_OUTPUT = "bench_results/accelerator_{backend}.json"
# The full run and --smoke; options left unset take these.
DEFAULTS = {"budget": 450.0, "steps": 60, "repeats": 5, "warmup_steps": 12, "tta_epochs": 4, "samples": None,
            "min_unit_seconds": 20.0}
SMOKE = {"budget": 120.0, "steps": 3, "repeats": 2, "warmup_steps": 2, "tta_epochs": 1, "samples": 64,
         "min_unit_seconds": 2.0, "tta_precisions": ["float32"]}


def names(text):
    return [name.strip() for name in text.split(",") if name.strip()]


def add_options(parser):
    """The options of the script, on `parser` (the runner's, or the parent's)."""
    parser.add_argument("--backends", type=names,
                        help="comma-separated backends, one process each in turn, sharing --budget "
                        "(default: only the current backend, in this process)")
    parser.add_argument("--budget", type=float,
                        help="hard wall-clock budget in seconds, from the process' start (default 450; smoke 120)")
    parser.add_argument("--workloads", type=names, default=list(WORKLOADS),
                        help=f"comma-separated zoo workloads (default {','.join(WORKLOADS)}); "
                        "one not registered is recorded as skipped")
    parser.add_argument("--precisions", type=names, default=list(PRECISIONS),
                        help=f"comma-separated dtype policies (default {','.join(PRECISIONS)})")
    parser.add_argument("--tta-precisions", type=names,
                        help="the precisions of the time-to-accuracy runs (default: --precisions; smoke float32)")
    parser.add_argument("--jit-compile", default="auto", choices=("auto", "true", "false"),
                        help="compile(jit_compile=...) of both models (default auto: Keras' own choice)")
    parser.add_argument("--steps", type=int, help="timed steps per fit (default 60; smoke 3)")
    parser.add_argument("--repeats", type=int, help="timed fits per model (default 5; smoke 2)")
    parser.add_argument("--warmup-steps", type=int,
                        help="steps of each model's untimed first fit (default 12; smoke 2)")
    parser.add_argument("--tta-epochs", type=int,
                        help="epochs of the time-to-accuracy runs (default 4; smoke 1; at least 2 for a "
                        "fine-tuning workload)")
    parser.add_argument("--skip-accuracy", action="store_true", help="only the step time")
    parser.add_argument("--samples", type=int,
                        help="train and test on the first N examples in the time-to-accuracy runs "
                        "(default all; smoke 64)")
    parser.add_argument("--min-unit-seconds", type=float,
                        help="time a unit must have left when nothing estimates it (default 20; smoke 2)")
    parser.add_argument("--journal", help="also write a draft results-journal entry (Markdown) here")
    parser.add_argument("--smoke", dest="quick", action="store_true",
                        help="tiny data and 2-3 steps per fit: a CPU check of the whole script")
    return parser


def parse_args(argv=None):
    from benchmarks import runner

    parser = runner.parser(NAME, package.__doc__, seed=0, output=DEFAULT_OUTPUT)
    add_options(parser)
    # `--smoke` is the runner's `quick`: the options it leaves unset take `SMOKE`.
    args = runner.parse(parser, argv, positive=("steps", "repeats", "warmup_steps", "tta_epochs"),
                        defaults=DEFAULTS, quick=SMOKE)
    if args.samples is not None and args.samples < 1:
        parser.error(f"--samples must be >= 1, got {args.samples}")
    if not args.budget > 0:
        parser.error(f"--budget must be > 0 seconds, got {args.budget}")
    if not args.workloads:
        parser.error("--workloads names no workload")
    if args.tta_precisions is None:
        args.tta_precisions = list(args.precisions)
    for option in ("precisions", "tta_precisions"):
        given = getattr(args, option)
        unknown = [p for p in given if p not in PRECISIONS]
        if unknown or not given:
            parser.error(f"--{option.replace('_', '-')}: {unknown or 'none given'}; valid: {','.join(PRECISIONS)}")
    if args.backends is not None:
        parser.error("--backends is handled by main(), one process per backend")
    return args
