"""The step-time unit: the plain and the O1 model, warmed up, then timed in interleaved fits."""

import gc
import statistics
import time

from benchmarks.accelerator.options import MODELS

__all__ = ["build_pair", "step_time"]


def _optimizer(workload, learning_rate):
    import keras

    if workload.optimizer == "adamw":
        return keras.optimizers.AdamW(learning_rate, beta_1=workload.momentum,
                                      weight_decay=workload.weight_decay or 0.0)
    return keras.optimizers.SGD(learning_rate, momentum=workload.momentum, weight_decay=workload.weight_decay)


def _jit(text):
    return {"auto": "auto", "true": True, "false": False}[text]


def build_pair(workload, seed, jit_compile):
    """The plain and the O1 model of `workload`, same seed, compiled; `{"plain": m, "O1": m}`.

    O1 is the harness' `O1` variant (`AutoBoost` + `BoostModel.from_model`,
    as `run_once` builds it). A fine-tuning workload's models are in their
    second phase, as `run_once` makes it: the base's top unfrozen, then
    compiled with a fresh optimizer at the fine-tuning learning rate (which
    the `BoostModel` wraps in its level's chain). The optimizers keep a
    constant learning rate: the schedule costs nothing per step.
    """
    import warnings

    import keras

    import keras_boost as boost
    from keras_boost.bench import training
    from keras_boost.bench import variants

    fine_tune = workload.fine_tune
    learning_rate = fine_tune.learning_rate if fine_tune is not None else workload.learning_rate
    models = {}
    for name in MODELS:
        keras.utils.set_random_seed(seed)
        model = workload.build(seed)
        optimizer = _optimizer(workload, workload.learning_rate)
        if name == "O1":
            level, config = variants.variant_spec("O1")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", boost.config.BoostConfigWarning)
                processed, optimizer = boost.AutoBoost(level, config).network_auto_process_train(model, optimizer)
                model = boost.BoostModel.from_model(processed, boost_level=level, boost_config_dict=config)
        if fine_tune is not None:
            fine_tune.unfreeze(model)
            optimizer = _optimizer(workload, learning_rate)
        model.compile(optimizer=optimizer, loss=training.LOSS, jit_compile=jit_compile)
        models[name] = model
    return models


def _freezing(model):
    """What O1's gradient freezing ran: the traced depths and why it is off, or None."""
    planner = getattr(model, "freeze_planner", None)
    if planner is None:
        return None
    return {"traced": [int(d) for d in planner.traced], "switched_off": planner.off_reason}


def _spread(values):
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def step_time(workload, precision, args, budget):
    """One step-time unit: warm-up, then interleaved timed fits; returns its record."""
    import keras
    import numpy as np

    from benchmarks.overhead import time_fit

    record = {"workload": workload.name, "precision": precision, "batch_size": workload.batch_size,
              "steps": args.steps, "phase": "fine-tune" if workload.fine_tune is not None else "train"}
    started = time.monotonic()
    (x, y), _ = workload.data()
    index = np.arange(args.steps * workload.batch_size) % len(x)  # full batches only: no new shape
    x, y = x[index], y[index]
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(precision)
    try:
        models = build_pair(workload, args.seed, _jit(args.jit_compile))
        record["models"] = {}
        for name, model in models.items():
            warm = time.monotonic()
            n = args.warmup_steps * workload.batch_size
            model.fit(x[:n], y[:n], batch_size=workload.batch_size, epochs=1, shuffle=False, verbose=0)
            record["models"][name] = {"jit_compile": model.jit_compile, "params": int(model.count_params()),
                                      "warmup_seconds": round(time.monotonic() - warm, 3)}
            print(f"  {name}: warm-up {record['models'][name]['warmup_seconds']:.1f} s "
                  f"(jit_compile={model.jit_compile})", flush=True)
        repeats, last = [], 0.0
        for repeat in range(args.repeats):
            if repeats and not budget.allows(last):
                record["note"] = f"{len(repeats)} of {args.repeats} repeats: the budget left no time for more"
                break
            begun = time.monotonic()
            order = MODELS if repeat % 2 == 0 else MODELS[::-1]
            ms = {name: 1e3 / time_fit(models[name], x, y, workload.batch_size)[0] for name in order}
            repeats.append({"order": list(order), "plain_ms": ms["plain"], "O1_ms": ms["O1"],
                            "speedup": ms["plain"] / ms["O1"]})
            last = time.monotonic() - begun
            print(f"  repeat {repeat + 1}/{args.repeats}: plain {ms['plain']:.2f} ms  O1 {ms['O1']:.2f} ms  "
                  f"speed-up {ms['plain'] / ms['O1']:.3f}", flush=True)
        record["models"]["O1"]["freezing"] = _freezing(models["O1"])
    finally:
        keras.config.set_dtype_policy(previous)
        models = None
        gc.collect()
        keras.backend.clear_session()
    record["repeats"] = repeats
    for key in ("plain_ms", "O1_ms", "speedup"):
        record[key] = _spread([r[key] for r in repeats])
    record["seconds"] = round(time.monotonic() - started, 2)
    return record
