"""The time-to-accuracy unit: `baseline` and `O1` on the shortened workload, and its cost estimate."""

import gc
import time

from benchmarks.accelerator.options import VARIANTS

__all__ = ["time_to_accuracy_unit", "tta_estimate"]


def tta_estimate(unit, short):
    """Seconds a time-to-accuracy unit should take, from its step-time unit (None: unknown)."""
    if unit is None or "skipped" in unit:
        return None
    (x, _), _ = short.data()
    steps = short.epochs * -(-len(x) // short.batch_size)
    compiles = sum(m["warmup_seconds"] for m in unit["models"].values())
    phases = 2 if short.fine_tune is not None else 1
    per_step = (unit["plain_ms"]["median"] + unit["O1_ms"]["median"]) / 1e3
    # A train function per phase and a predict function (the evaluation
    # after every epoch) per model, each costing about a warm-up; 1.25x for
    # the models' construction and the evaluations themselves.
    return 1.25 * ((phases + 1) * compiles + steps * per_step)


def time_to_accuracy_unit(short, precision, seed, order=VARIANTS):
    """`baseline` and `O1` (in `order`) through `training.run_once` on the shortened workload; returns the record."""
    import keras

    from keras_boost.bench import clock
    from keras_boost.bench import training

    started = time.monotonic()
    record = {"workload": short.name, "precision": precision, "seed": seed, "epochs": short.epochs,
              "target": short.target, "order": list(order), "runs": {}}
    for variant in order:
        run = training.run_once(short, variant, precision, seed)
        record["runs"][variant] = run
        if "skipped" in run:
            print(f"  {variant}: skipped: {run['skipped']}", flush=True)
        else:
            print(f"  {variant}: train {run['train_seconds']:.1f} s, final accuracy {run['final_accuracy']:.4f}",
                  flush=True)
        gc.collect()
        keras.backend.clear_session()
    runs = record["runs"]
    if not any("skipped" in run for run in runs.values()):
        common = min(run["final_accuracy"] for run in runs.values())
        times = {v: clock.time_to_accuracy(run["curve"], common) for v, run in runs.items()}
        record.update(
            common_accuracy=common, time_to_common=times,
            speedup_to_common=times["baseline"] / times["O1"] if times["O1"] else None,
            train_time_ratio=runs["O1"]["train_seconds"] / runs["baseline"]["train_seconds"],
            reached_target={v: run["time_to_target"] is not None for v, run in runs.items()},
        )
    record["seconds"] = round(time.monotonic() - started, 2)
    return record
