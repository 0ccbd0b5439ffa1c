"""The hard wall-clock budget: `Budget` and its watchdog, and `stop` for what it cut."""

import json
import os
import threading
import time

from benchmarks.accelerator.report import now
from benchmarks.accelerator.report import report

__all__ = ["BUDGET_EXIT", "STARTED", "Budget", "stop"]

# The budget counts from the start of the process: Keras' import is part of it.
STARTED = time.monotonic()
# Exit code of a process the watchdog ended at its deadline.
BUDGET_EXIT = 3


class Budget:
    """A hard wall-clock budget with a watchdog that ends the process at its deadline.

    The measurement asks `allows(estimate)` before each piece of work; the
    watchdog is the backstop for a piece that overruns (a compilation
    cannot be stopped halfway): at the deadline it completes the JSON
    already written at `path` (the unit it cut, and every unit of `plan`
    not in the file, marked skipped; `budget.stopped` says why), prints it
    and ends the process with exit code `BUDGET_EXIT`.

    Args:
        seconds: the budget, counted from `started` (`time.monotonic()`).
        started: when the budget began (default: the start of the process).
        path: the result's JSON, or None (nothing to complete).

    Example:

    ```python
    budget = Budget(450, path="bench_results/accelerator_jax.json")
    budget.plan = [("step_time", "applications", "float32")]
    budget.start()
    if budget.allows(30):
        ...
    budget.cancel()
    ```
    """

    def __init__(self, seconds, started=None, path=None):
        self.seconds = float(seconds)
        self.started = STARTED if started is None else started
        self.deadline = self.started + self.seconds
        self.path = path
        self.plan = []          # (part, workload, precision) of every unit planned
        self.current = None     # the unit in progress
        self._timer = None

    def left(self):
        """Seconds until the deadline (negative after it)."""
        return self.deadline - time.monotonic()

    def used(self):
        return time.monotonic() - self.started

    def allows(self, estimate):
        """Whether `estimate` seconds of work fit in what is left."""
        return self.left() >= estimate

    def start(self):
        self._timer = threading.Timer(max(self.left(), 0.0), self._expire)
        self._timer.daemon = True
        self._timer.start()

    def cancel(self):
        if self._timer is not None:
            self._timer.cancel()

    def _expire(self):
        message = f"the {self.seconds:.0f} s budget ran out"
        if self.current is not None:
            part, workload, precision = self.current
            message += f" during the {part.replace('_', ' ')} of {workload} at {precision}"
        print(f"\nbudget: {message}; the process ends here", flush=True)
        if self.path is not None and os.path.exists(self.path):
            try:
                with open(self.path) as f:
                    result = json.load(f)
                stop(result, self.plan, message + "; the process was ended there", self.current)
                result["budget"]["used"] = round(self.used(), 1)
                result["environment"]["finished"] = now()
                from benchmarks import runner

                runner.write_json(self.path, result)
                print(report(result), flush=True)
                print(f"Wrote {self.path}", flush=True)
            except Exception as error:  # the process ends anyway; say why the file is as it is
                print(f"budget: could not complete {self.path}: {error!r}", flush=True)
        os._exit(BUDGET_EXIT)


def stop(result, plan, reason, current=None):
    """Marks `current` and every unit of `plan` not in `result` as skipped for `reason`.

    Example:

    ```python
    stop(result, [("step_time", "transformer", "float32")], "the budget ran out")
    result["step_time"][-1]   # {'workload': 'transformer', 'precision': 'float32', 'skipped': '...'}
    ```
    """
    result.setdefault("budget", {})["stopped"] = reason
    for part, workload, precision in plan:
        records = result.setdefault(part, [])
        if not any(r["workload"] == workload and r["precision"] == precision for r in records):
            cut = current is not None and (part, workload, precision) == tuple(current)
            records.append({"workload": workload, "precision": precision,
                            "skipped": reason if cut else "not started: the budget ran out"})
    return result
