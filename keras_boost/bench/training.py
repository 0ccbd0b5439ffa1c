"""One timed training run of one variant (`run_once`), and the burn-in.

A run builds the workload's model for its seed, turns it into the
variant's (a boost variant through `AutoBoost` + `BoostModel.from_model`;
a wrap variant keeps the plain model and compiles it with
`boost.wrap(optimizer, level, config)`),
trains it on the seeded pipeline of `pipeline.training_dataset` with the
recipe's schedule, and records test accuracy (a loss workload: the test
loss, `final_loss`) after every epoch against training wall time
(`clock.AccuracyClock`), the steady steps/s, the time to the target and
the final accuracy. A variant that cannot run (an
algorithm not implemented yet) is recorded as skipped with the reason,
never silently dropped; AdaSum variants run (on one replica AdaSum is the
identity, which their record notes; `python -m benchmarks.adasum`
measures it on N replicas).

A workload with a `FineTune` (transfer learning) runs in two phases in
every variant: the head on the frozen base, then, after unfreezing the
base's top and recompiling with a fresh optimizer (a boost variant's
`BoostModel` wraps it in its level's chain), the fine-tuning; the clock
runs through both, recompilation included, and `baseline-short` shortens
both (see `schedule.phase_epochs`).

Example:

```python
from keras_boost.bench import catalog, training
record = training.run_once(catalog.tiny_workload(), "O1", "float32", seed=0)
record["final_accuracy"], record["train_seconds"]
```
"""

import itertools
import math
import time
import warnings

import keras
import numpy as np

import keras_boost as boost
from keras_boost.bench.clock import AccuracyClock
from keras_boost.bench.clock import time_to_target
from keras_boost.bench.pipeline import training_dataset
from keras_boost.bench.schedule import phase_epochs
from keras_boost.bench.schedule import recipe_optimizer
from keras_boost.bench.schedule import schedule_steps
from keras_boost.bench.variants import variant_door
from keras_boost.bench.variants import variant_recipe
from keras_boost.bench.variants import variant_spec

__all__ = ["LOSS", "burn_in", "run_once"]

LOSS = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def _milliseconds(seconds):
    return None if seconds is None else 1e3 * seconds


def run_once(workload, variant, precision, seed, short_ratio=0.8):
    """One training run; returns a record (see `validate_result`).

    A workload with `fine_tune` trains in two phases (see `phase_epochs`):
    the first fit trains what `build` leaves trainable; then
    `fine_tune.unfreeze(model)` and a recompile with a fresh optimizer on
    the second phase's schedule (a `BoostModel` wraps the plain optimizer
    in its level's chain, and recomputes its freezing groups from the
    variables trainable then); the second fit continues the first's clock,
    curve and batches. The record then also holds `phases` (the epochs of
    each) and, with gradient freezing, `phase_freeze_depths` (one entry per
    phase; `freeze_depths` is the last phase's). A boost variant's record
    holds `boost_summary`: `model.boost_summary()` after each phase.

    Example:

    ```python
    record = run_once(tiny_workload(), "O1", "float32", seed=0)
    record["final_accuracy"], record["curve"]   # [[train_seconds, accuracy], ...] per epoch
    ```
    """
    record = {"variant": variant, "precision": precision, "seed": seed}
    spec = variant_spec(variant)
    workload = variant_recipe(variant, workload)
    (x, y), (x_test, y_test) = workload.data()
    ratio = short_ratio if variant == "baseline-short" else 1.0
    phases = phase_epochs(workload, short_ratio if variant == "baseline-short" else None)
    epochs = sum(phases)
    steps_per_epoch = math.ceil(len(x) / workload.batch_size)
    total_steps, warmup_steps = schedule_steps(workload, phases[0], steps_per_epoch, ratio)
    previous_policy = keras.config.dtype_policy()
    keras.config.set_dtype_policy(precision)
    freeze_depths, summaries = [], []  # per phase
    try:
        keras.utils.set_random_seed(seed)
        model = workload.build(seed)
        optimizer = recipe_optimizer(workload, total_steps, warmup_steps)
        door = variant_door(variant)
        try:
            if door == "wrap":  # the optimizer door: the plain model, its optimizer wrapped
                optimizer = _wrap(optimizer, spec)
                record["optimizer_chain"] = repr(optimizer)
            elif door == "model":
                level, config = spec
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", boost.config.BoostConfigWarning)
                    processed, optimizer = boost.AutoBoost(level, config).network_auto_process_train(model, optimizer)
                    model = boost.BoostModel.from_model(processed, boost_level=level, boost_config_dict=config)
        except NotImplementedError as error:
            return {**record, "skipped": str(error)}
        if door is not None and (optimizer if door == "wrap" else model).boost_config["boost"]["adasum"]:
            record["note"] = ("one replica: AdaSum is the identity here; "
                              "python -m benchmarks.adasum measures it on N replicas")
        model.compile(optimizer=optimizer, loss=LOSS)
        _build_optimizer(model)
        clock = AccuracyClock(x_test, y_test, model, metric=workload.metric)
        keras.utils.set_random_seed(seed)
        # The same batches for every variant: a seeded dataset, or, for
        # fine-tuning, arrays that Keras shuffles from the seed (a level's
        # prefix caching acts on arrays only: a dataset's batches may change
        # per epoch).
        dataset = None if workload.fine_tune is not None else training_dataset(x, y, workload.batch_size, seed)[0]
        start = time.perf_counter()
        # The whole fit calls are timed: for prefix-cache that includes
        # computing the cached features before Keras' fit begins.
        clock.start = start
        for phase, phase_length in enumerate(phases):
            if phase:
                # Phase 2, on the clock: unfreeze the base's top, recompile
                # with a fresh optimizer (BoostModel.compile wraps it in the
                # level's chain, as AutoBoost did for phase 1).
                fine_tune = workload.fine_tune
                fine_tune.unfreeze(model)
                total, warmup = schedule_steps(workload, phase_length, steps_per_epoch, ratio,
                                               warmup_epochs=fine_tune.warmup_epochs)
                phase_optimizer = recipe_optimizer(workload, total, warmup, fine_tune.learning_rate)
                model.compile(optimizer=_wrap(phase_optimizer, spec) if door == "wrap" else phase_optimizer,
                              loss=LOSS)
                _build_optimizer(model)
            if variant == "prefix-cache":
                boost.fit_with_cached_prefix(model, x, y, batch_size=workload.batch_size, epochs=phase_length,
                                             shuffle=True, verbose=0, callbacks=[clock])
            elif dataset is None:
                model.fit(x, y, batch_size=workload.batch_size, epochs=phase_length, shuffle=True, verbose=0,
                          callbacks=[clock])
            else:
                model.fit(dataset, steps_per_epoch=steps_per_epoch, epochs=phase_length, shuffle=False, verbose=0,
                          callbacks=[clock])
            freeze_depths.append(_freeze_depths(model))
            if door == "model":
                summaries.append(model.boost_summary())
        fit_seconds = time.perf_counter() - start
    finally:
        keras.config.set_dtype_policy(previous_policy)
    # The steady speed leaves out each phase's first epoch (its compilation).
    firsts = set(itertools.accumulate([0, *phases[:-1]]))
    steady = [s for i, s in enumerate(clock.epoch_seconds) if i not in firsts] or clock.epoch_seconds
    if freeze_depths[-1] is not None:
        record["freeze_depths"] = freeze_depths[-1]
        if len(phases) > 1:
            record["phase_freeze_depths"] = freeze_depths
    if len(phases) > 1:
        record["phases"] = phases
    if summaries:
        record["boost_summary"] = summaries  # what the level did, per phase
    return {
        **record,
        "epochs": epochs,
        "steps": epochs * steps_per_epoch,
        "warmup_steps": warmup_steps,
        "fit_seconds": fit_seconds,
        "train_seconds": clock.curve[-1][0],
        "steps_per_second": steps_per_epoch / float(np.median(steady)),
        "curve": clock.curve,
        "time_to_target": time_to_target(clock.curve, workload.target, workload.lower_is_better),
        # `final_accuracy`, or `final_loss` for a workload with metric "loss".
        f"final_{workload.metric}": clock.curve[-1][1],
    }


def _build_optimizer(model):
    """Builds a compiled Keras model's optimizer before its first trace.

    On TensorFlow without a `tf.distribute` strategy, Keras builds the
    optimizer inside the first trace of `train_step`; `tf.function` then
    traces the step twice (variables created in a trace), which costs the
    first epoch 3-6 s on the zoo transformer (2 vCPU). `BoostModel` builds
    its optimizer before tracing, so without this every boost variant would
    gain that time over plain Keras for a reason that is not an algorithm.
    A one-line habit of a careful user, given to every variant alike.
    """
    if isinstance(model, boost.BoostModel) or model.optimizer.built:
        return  # BoostModel.make_train_function builds its own (its chain needs the model)
    model.optimizer.build(model.trainable_variables)


def _wrap(optimizer, spec):
    """`boost.wrap(optimizer, level, config)` of a wrap variant's spec."""
    level, config = spec
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", boost.config.BoostConfigWarning)
        return boost.wrap(optimizer, level, config)


def _freeze_depths(model):
    """Which freeze depths got a train function, or None without freezing."""
    planner = getattr(model, "freeze_planner", None)
    if planner is None:
        return None
    # In adaptive mode a short run may trace none, and then trains exactly
    # like the baseline.
    return {
        "traced": [int(d) for d in planner.traced],
        "dropped": sorted(int(d) for d in planner.dropped),
        "declined": sorted(int(d) for d in planner.declined),
        # Measured on the run's first calls: what the planner decided from.
        "step_ms": {str(d): _milliseconds(planner.step_time(d)) for d in planner.traced},
        "trace_s": {str(d): planner.trace_cost(d) for d in planner.traced},
        # Rule 6: why freezing was switched off (None: it ran).
        "switched_off": planner.off_reason,
    }


def burn_in(workload, precisions):
    """An untimed few-step fit per precision, before any timed run.

    The first fit of a process pays one-time costs (runtime and thread-pool
    start-up, the first kernel compilations) that would otherwise be timed
    in whichever variant runs first.
    """
    (x, y), _ = workload.data()
    n = min(len(x), 4 * workload.batch_size)
    previous_policy = keras.config.dtype_policy()
    try:
        for precision in precisions:
            keras.config.set_dtype_policy(precision)
            keras.utils.set_random_seed(0)
            model = workload.build(0)
            model.compile(optimizer=recipe_optimizer(workload, 4), loss=LOSS)
            model.fit(x[:n], y[:n], batch_size=workload.batch_size, epochs=1, verbose=0)
            model.predict(x[:n], batch_size=256, verbose=0)
    finally:
        keras.config.set_dtype_policy(previous_policy)
