"""One backend's measurement: the step-time units, then the time-to-accuracy units, inside the budget."""

import os
import traceback

from benchmarks.accelerator.accuracy import time_to_accuracy_unit
from benchmarks.accelerator.accuracy import tta_estimate
from benchmarks.accelerator.budget import Budget
from benchmarks.accelerator.machine import accelerator_record
from benchmarks.accelerator.options import VARIANTS
from benchmarks.accelerator.step_time import step_time
from benchmarks.accelerator.workloads import find_workload
from benchmarks.accelerator.workloads import shortened

__all__ = ["measure"]


def measure(args):
    """The step-time units, then the time-to-accuracy units, inside the budget (a generator)."""
    import keras

    from keras_boost.bench.pipeline import input_pipeline

    backend = keras.backend.backend()
    output = args.output.format(backend=backend) if args.output else None
    budget = Budget(args.budget, path=output)
    pipeline = input_pipeline()
    accelerator = accelerator_record(backend)
    print(f"device: {accelerator['device']} | budget {args.budget:.0f} s ({budget.left():.0f} s left) | "
          f"input {pipeline}", flush=True)
    if "warning" in accelerator:
        print(f"WARNING: {accelerator['warning']}", flush=True)
    result = {
        "environment": {"accelerator": accelerator,
                        "input_pipeline": pipeline,
                        "xla_flags": os.environ.get("XLA_FLAGS")},
        "budget": {"seconds": args.budget, "used": None, "stopped": None},
        "step_time": [], "time_to_accuracy": [],
    }
    parts = ["step_time"] if args.skip_accuracy else ["step_time", "time_to_accuracy"]
    budget.plan = [(part, name, precision) for part in parts for name in args.workloads
                   for precision in args.precisions]
    yield result
    budget.start()
    try:
        workloads = {name: find_workload(name, args.samples) for name in args.workloads}
        costs = {}  # workload name -> seconds of its last step-time unit
        for part, name, precision in budget.plan:
            workload, missing = workloads[name]
            skip = missing
            if not skip and part == "time_to_accuracy" and precision not in args.tta_precisions:
                skip = f"not asked for (--tta-precisions {','.join(args.tta_precisions)})"
            if not skip:
                if part == "step_time":
                    estimate = costs.get(name, args.min_unit_seconds)
                else:
                    short = shortened(workload, args.tta_epochs, args.samples)
                    done = next((r for r in result["step_time"]
                                 if r["workload"] == name and r["precision"] == precision), None)
                    estimate = tta_estimate(done, short)
                if estimate is None:
                    skip = "its step time was not measured: nothing estimates its cost"
                elif not budget.allows(estimate):
                    skip = f"budget: {budget.left():.0f} s left, the estimate was {estimate:.0f} s"
            if skip:
                result[part].append({"workload": name, "precision": precision, "skipped": skip})
                continue
            print(f"{part.replace('_', ' ')}: {name} {precision} ({budget.left():.0f} s left)", flush=True)
            budget.current = (part, name, precision)
            try:
                if part == "step_time":
                    record = step_time(workload, precision, args, budget)
                    costs[name] = record["seconds"]
                else:
                    # Alternate which variant runs first: neither always pays a warm process' leftovers.
                    first = len([r for r in result[part] if "skipped" not in r]) % 2
                    record = time_to_accuracy_unit(short, precision, args.seed,
                                                   VARIANTS[::-1] if first else VARIANTS)
            except Exception as error:  # one unit's failure (memory, a kernel) must not cost the others
                traceback.print_exc()
                record = {"workload": name, "precision": precision,
                          "skipped": f"failed: {type(error).__name__}: {str(error)[-1000:]}"}
            budget.current = None
            result[part].append(record)
            result["budget"]["used"] = round(budget.used(), 1)
            yield result
    finally:
        budget.cancel()
    result["budget"]["used"] = round(budget.used(), 1)
    yield result
