"""Several backends, one process each, in turn, sharing the budget."""

import json
import os
import subprocess
import sys
import time

from benchmarks.accelerator.budget import BUDGET_EXIT
from benchmarks.accelerator.budget import STARTED
from benchmarks.accelerator.options import NAME
from benchmarks.accelerator.report import journal_entry

__all__ = ["failed", "run_backends"]

# Seconds a parent gives a child beyond its share before it kills it (the
# child's own watchdog ends it at its share).
CHILD_GRACE = 30


def run_backends(backends, budget, output, journal, rest, started=None):
    """Runs the script once per backend, in turn, sharing `budget`; returns the results read back.

    Each child gets an equal share of the time left (an unused share passes
    on), its own `--output` (`output` with `{backend}`) and the arguments
    `rest`; it is killed `CHILD_GRACE` s after its share if its watchdog
    has not ended it. This process imports neither Keras nor a backend.
    """
    started = STARTED if started is None else started
    deadline = started + budget
    results = []
    for i, backend in enumerate(backends):
        share = (deadline - time.monotonic()) / (len(backends) - i)
        path = output.format(backend=backend)
        if share <= 0:
            results.append(failed(backend, "no budget left"))
            continue
        print(f"\n=== {backend}: {share:.0f} s of the budget ===", flush=True)
        command = [sys.executable, "-m", f"benchmarks.{NAME}", "--backend", backend, "--budget", f"{share:.1f}",
                   "--output", path, *rest]
        environ = dict(os.environ, KERAS_BACKEND=backend, PYTHONUNBUFFERED="1")
        environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        before = os.path.getmtime(path) if os.path.exists(path) else None
        try:
            code = subprocess.run(command, env=environ, timeout=share + CHILD_GRACE).returncode
        except subprocess.TimeoutExpired:
            code = "killed after its share"
        fresh = os.path.exists(path) and os.path.getmtime(path) != before
        if fresh:
            with open(path) as f:
                results.append(json.load(f))
        if code not in (0, BUDGET_EXIT):
            if not fresh:
                results.append(failed(backend, f"the process ended with {code} before writing {path} (see its log)"))
            else:
                results[-1]["failed"] = f"the process ended with {code} (see its log)"
        print(f"=== {backend}: exit {code} ===", flush=True)
    command = " ".join(["python -m benchmarks.accelerator", "--backends", ",".join(backends),
                        "--budget", f"{budget:g}", *rest])
    entry = journal_entry(results, command)
    print("\n" + entry, flush=True)
    if journal:
        os.makedirs(os.path.dirname(os.path.abspath(journal)), exist_ok=True)
        with open(journal, "w") as f:
            f.write(entry)
        print(f"Wrote {journal}", flush=True)
    return results


def failed(backend, reason):
    return {"benchmark": NAME, "environment": {"backend": backend}, "failed": reason}
