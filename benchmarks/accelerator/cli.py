"""`python -m benchmarks.accelerator`: one backend in this process, or `--backends` one process each."""

import argparse
import sys

from benchmarks.accelerator.backends import run_backends
from benchmarks.accelerator.measure import measure
from benchmarks.accelerator.options import BACKENDS
from benchmarks.accelerator.options import DEFAULT_OUTPUT
from benchmarks.accelerator.options import DEFAULTS
from benchmarks.accelerator.options import NAME
from benchmarks.accelerator.options import SMOKE
from benchmarks.accelerator.options import names
from benchmarks.accelerator.options import parse_args
from benchmarks.accelerator.report import journal_entry
from benchmarks.accelerator.report import report

__all__ = ["main"]


def main(argv=None):
    """`python -m benchmarks.accelerator`: one backend here, or `--backends` one process each."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--backends" in argv or any(a.startswith("--backends=") for a in argv):
        if "-h" in argv or "--help" in argv:
            argv = [a for a in argv if a != "--backends" and not a.startswith("--backends")]
        else:
            return main_backends(argv)
    from benchmarks import runner

    args = parse_args(argv)
    result = runner.main(NAME, measure, parse_args, argv, report=report)
    if args.journal and result is not None:
        with open(args.journal, "w") as f:
            f.write(journal_entry([result], " ".join(["python -m benchmarks.accelerator", *argv])))
        print(f"Wrote {args.journal}")
    return result


def main_backends(argv):
    parser = argparse.ArgumentParser(prog=f"python -m benchmarks.{NAME}", add_help=False)
    parser.add_argument("--backends", type=names, required=True)
    parser.add_argument("--budget", type=float)
    parser.add_argument("--output", default=DEFAULT_OUTPUT)
    parser.add_argument("--journal")
    parser.add_argument("--backend")
    known, rest = parser.parse_known_args(argv)
    if known.budget is None:
        known.budget = (SMOKE if "--smoke" in rest else DEFAULTS)["budget"]
    if known.backend:
        parser.error("give --backend or --backends, not both")
    wrong = [b for b in known.backends if b not in BACKENDS]
    if wrong or not known.backends:
        parser.error(f"--backends: {wrong or 'none given'}; valid: {','.join(BACKENDS)}")
    if "{backend}" not in known.output:
        parser.error(f"--output must hold {{backend}} with --backends (one file per backend), got {known.output!r}")
    if not known.budget > 0:
        parser.error(f"--budget must be > 0 seconds, got {known.budget}")
    return run_backends(known.backends, known.budget, known.output, known.journal, rest)
