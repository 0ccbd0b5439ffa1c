"""`search`: tune the boost level, learning rate, accumulation and precision.

Built on KerasTuner (the optional extra `pip install 'keras-boost[tune]'`),
which is imported only when `search` is called, so `import keras_boost`
works without it.

Each trial builds a fresh model, wraps it with
`BoostModel.from_model(model, boost_level=..., boost_config_dict=...)`,
compiles it with the trial's learning rate and fits it; the objective
(`val_accuracy` by default) is the best epoch's value. The search stops
starting new trials once `time_budget` seconds have passed since the call
began, and stops the running trial at its next epoch end. Its state lives
in `directory/project_name`: calling `search` again with the same directory
(and `overwrite=False`) reloads the finished trials and runs only the
missing ones; a trial that was interrupted is run again.

The result's `best_config` is a `boost_config_dict` that
`AutoBoost(result.best_level, result.best_config)` and
`BoostModel.from_model(model, result.best_level, result.best_config)`
accept without warnings.
"""

import gc
import json
import math
import numbers
import os
import time

import keras

from keras_boost import config as config_lib
from keras_boost.algorithms.precision import PRECISIONS
from keras_boost.model import BoostModel

__all__ = ["boost_config_for", "search", "SearchResult"]

_HP_LEVEL = "boost_level"
_HP_LR = "learning_rate"
_HP_STEPS = "accumulation_steps"
_HP_PRECISION = "precision"
_TUNERS = ("random", "bayesian")
_WHOLE_SECONDS = 1e-9  # a trial's own clock never reads 0


def boost_config_for(accumulation_steps=1, precision=None):
    """The `boost_config_dict` a trial uses on top of its level.

    Accumulation > 1 switches the `grad_accumulation` flag on in
    `"manual"` mode (which keeps the level's preset flags and adds the
    given ones; `"auto"` mode would ignore it with a warning).

    Example:

    ```python
    cfg = boost.tune.boost_config_for(4, "mixed_bfloat16")
    boost.AutoBoost("O1", cfg).enabled  # ['less_bn', 'grad_freeze', 'grad_accumulation']
    ```
    """
    steps = config_lib.check_value("grad_accumulation", "grad_accumulation_step", accumulation_steps)
    cfg = {"boost": {"mode": "manual", "grad_accumulation": steps > 1}}
    if steps > 1:
        cfg["grad_accumulation"] = {"grad_accumulation_step": steps}
    if precision is not None:
        cfg["common"] = {"precision": config_lib.check_value("common", "precision", precision)}
    return cfg


class SearchResult:
    """What `search` found.

    Attributes:
        best_level: the best trial's boost level.
        best_config: its `boost_config_dict` (for `AutoBoost`/`BoostModel`).
        best_learning_rate: its learning rate.
        best_hyperparameters: its values, by name (`boost_level`,
            `learning_rate`, `accumulation_steps`, `precision`).
        best_score: its objective value.
        objective, direction: the objective's name and `"max"`/`"min"`.
        trials: one dict per trial, in start order, resumed trials included:
            `trial_id`, `status`, the four hyperparameters, `score`,
            `seconds` (the trial's fit time), `epochs`, `stopped_by_budget`.
        new_trials: how many trials this call ran (the rest were reloaded).
        seconds: wall time of this call.
        project_dir: where KerasTuner keeps the search state.

    Example:

    ```python
    result = boost.tune.search(build, x, y, validation_data=(xv, yv), max_trials=4)
    print(result)
    result.to_json("best_boost.json")
    model = boost.BoostModel.from_model(build(), result.best_level, result.best_config)
    ```
    """

    def __init__(self, trials, objective, direction, new_trials, seconds, project_dir):
        self.trials, self.objective, self.direction = trials, objective, direction
        self.new_trials, self.seconds, self.project_dir = new_trials, seconds, project_dir
        scored = [t for t in trials if t["status"] == "COMPLETED" and t["score"] is not None]
        sign = 1.0 if direction == "max" else -1.0
        best = max(scored, key=lambda t: sign * t["score"])  # search checks scored is non-empty
        self.best_trial = best
        self.best_hyperparameters = {k: best[k] for k in (_HP_LEVEL, _HP_LR, _HP_STEPS, _HP_PRECISION)}
        self.best_level = best[_HP_LEVEL]
        self.best_learning_rate = best[_HP_LR]
        self.best_score = best["score"]
        self.best_config = boost_config_for(best[_HP_STEPS], best[_HP_PRECISION])

    def to_dict(self):
        """The JSON payload of `to_json`."""
        return {
            "boost_level": self.best_level,
            "boost_config_dict": self.best_config,
            "learning_rate": self.best_learning_rate,
            "objective": self.objective,
            "score": self.best_score,
        }

    def to_json(self, path=None):
        """The best configuration as JSON: `{"boost_level", "boost_config_dict",
        "learning_rate", "objective", "score"}`; written to `path` if given.

        `AutoBoost(d["boost_level"], d["boost_config_dict"])` loads it.
        Returns the JSON string.
        """
        text = json.dumps(self.to_dict(), indent=2)
        if path is not None:
            with open(os.fspath(path), "w", encoding="utf-8") as f:
                f.write(text + "\n")
        return text

    def __repr__(self):
        return (f"SearchResult(best_level={self.best_level!r}, best_learning_rate="
                f"{self.best_learning_rate:.3g}, {self.objective}={self.best_score:.4f}, "
                f"trials={len(self.trials)})")

    def __str__(self):
        header = (f"{'trial':<7}{'level':<7}{'lr':>10}{'accum':>7}  {'precision':<16}"
                  f"{self.objective:>14}{'seconds':>9}{'epochs':>7}  status")
        lines = [header, "-" * len(header)]
        for t in self.trials:
            score = "-" if t["score"] is None else f"{t['score']:.4f}"
            seconds = "-" if t["seconds"] is None else f"{t['seconds']:.1f}"
            epochs = "-" if t["epochs"] is None else str(t["epochs"])
            mark = " *" if t is self.best_trial else ""
            status = t["status"] + (" (budget)" if t["stopped_by_budget"] else "")
            lines.append(f"{t['trial_id']:<7}{t[_HP_LEVEL]:<7}{t[_HP_LR]:>10.3g}{t[_HP_STEPS]:>7}  "
                         f"{t[_HP_PRECISION]:<16}{score:>14}{seconds:>9}{epochs:>7}  {status}{mark}")
        lines.append(f"best (*): level {self.best_level}, learning rate {self.best_learning_rate:.3g}, "
                     f"config {json.dumps(self.best_config)}; {self.new_trials} new trial(s) in "
                     f"{self.seconds:.1f} s; state in {self.project_dir}")
        return "\n".join(lines)


# --- argument checks --------------------------------------------------------


def _choices(name, values, valid=None, check=None):
    if isinstance(values, (str, numbers.Number)):
        values = (values,)
    values = list(values)
    if not values:
        raise ValueError(f"search: {name} is empty; give at least one value.")
    for value in values:
        if valid is not None and value not in valid:
            raise ValueError(f"search: unknown {name} value {value!r}; valid values: {list(valid)}.")
        if check is not None:
            check(value)
    return list(dict.fromkeys(values))  # de-duplicated, order kept


def _check_steps(value):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"search: accumulation_steps values must be ints >= 1, got {value!r}.")


def _positive_lr(value):
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if not ok or not math.isfinite(value) or value <= 0:
        raise ValueError(f"search: learning rates must be finite numbers > 0, got {value!r}.")


def _learning_rates(learning_rates):
    """A `(lo, hi)` tuple is a log-uniform range; a list, or one number, choices."""
    if isinstance(learning_rates, tuple) and len(learning_rates) == 2:
        lo, hi = learning_rates
        _positive_lr(lo)
        _positive_lr(hi)
        if not lo < hi:
            raise ValueError(f"search: learning_rates range (lo, hi) needs lo < hi, got {learning_rates!r}.")
        return ("range", float(lo), float(hi))
    values = _choices("learning_rates", learning_rates, check=_positive_lr)
    return ("choice", [float(v) for v in values])


def _positive(name, value, integer=False):
    kind = numbers.Integral if integer else numbers.Real
    if isinstance(value, bool) or not isinstance(value, kind) or not value > 0:
        what = "an int >= 1" if integer else "a number > 0 (seconds)"
        raise ValueError(f"search: {name} must be {what}, got {value!r}.")
    return value


def _model_factory(build_model):
    """`build_model` as a callable returning a fresh model; checked once."""
    if isinstance(build_model, keras.Model):
        template = build_model
        if not template.built:
            raise ValueError(f"search: model {template.name!r} is not built; give it an Input or call it once.")
        weights = template.get_weights()

        def fresh():
            clone = keras.models.clone_model(template)
            clone.set_weights(weights)  # every trial starts from the same weights
            return clone

        return fresh
    if not callable(build_model):
        raise TypeError("search: build_model must be a callable returning a fresh (uncompiled) keras.Model, "
                        f"or a built keras.Model to clone per trial; got {type(build_model).__name__}.")
    probe = build_model()
    if not isinstance(probe, keras.Model):
        raise TypeError(f"search: build_model() must return a keras.Model, got {type(probe).__name__}.")
    del probe
    return build_model


def _optimizer_factory(optimizer):
    if callable(optimizer) and not isinstance(optimizer, (str, keras.optimizers.Optimizer)):
        return optimizer
    if isinstance(optimizer, str):
        keras.optimizers.get(optimizer)  # raises on an unknown name

        def make(learning_rate):
            return keras.optimizers.get({"class_name": optimizer, "config": {"learning_rate": learning_rate}})

        return make
    raise TypeError("search: optimizer must be a Keras optimizer name ('sgd', 'adam', ...) or a factory "
                    f"learning_rate -> optimizer (each trial needs a fresh one), got {optimizer!r}.")


def _copy_metric(metric):
    if isinstance(metric, str):
        return metric
    return keras.metrics.deserialize(keras.metrics.serialize(metric))


# --- KerasTuner glue (classes made on first use: keras_tuner is optional) ---

_CLASSES = {}


def _import_keras_tuner():
    try:
        import keras_tuner
    except ImportError as error:
        raise ImportError(
            "boost.tune.search needs KerasTuner: pip install 'keras-boost[tune]' "
            "(or pip install 'keras-tuner>=1.4,<1.5')."
        ) from error
    return keras_tuner


def _classes(kt):
    if _CLASSES:
        return _CLASSES
    from keras_tuner.src.engine import trial as trial_module

    stopped = trial_module.TrialStatus.STOPPED

    def budget_oracle(base):
        class BudgetOracle(base):
            """Refuses new trials once the search's deadline has passed."""

            deadline = None

            def populate_space(self, trial_id):
                if self.deadline is not None and time.monotonic() >= self.deadline:
                    return {"status": stopped, "values": None}
                return super().populate_space(trial_id)

        BudgetOracle.__name__ = f"Budget{base.__name__}"
        return BudgetOracle

    class BoostHyperModel(kt.HyperModel):
        def __init__(self, spec):
            super().__init__(name="keras_boost_search")
            self.spec = spec

        def declare_hyperparameters(self, hp):
            s = self.spec
            hp.Choice(_HP_LEVEL, s["levels"])
            if s["lr"][0] == "range":
                hp.Float(_HP_LR, s["lr"][1], s["lr"][2], sampling="log")
            else:
                hp.Choice(_HP_LR, s["lr"][1])
            hp.Choice(_HP_STEPS, s["steps"])
            hp.Choice(_HP_PRECISION, s["precisions"])

        def build(self, hp):
            s = self.spec
            model = BoostModel.from_model(
                s["fresh"](),
                boost_level=hp.get(_HP_LEVEL),
                boost_config_dict=boost_config_for(hp.get(_HP_STEPS), hp.get(_HP_PRECISION)),
            )
            model.compile(
                optimizer=s["optimizer"](hp.get(_HP_LR)),
                loss=s["loss"],
                metrics=[_copy_metric(m) for m in s["metrics"]],
            )
            return model

    class BudgetStop(keras.callbacks.Callback):
        def __init__(self, deadline):
            super().__init__()
            self.deadline, self.stopped = deadline, False

        def on_epoch_end(self, epoch, logs=None):
            if self.deadline is not None and time.monotonic() >= self.deadline:
                self.model.stop_training = True
                self.stopped = True

    class BoostTuner(kt.Tuner):
        new_trials = 0

        def _populate_initial_space(self):
            # The space is declared; KerasTuner would otherwise build a model for it.
            hp = self.oracle.get_space()
            self.hypermodel.declare_hyperparameters(hp)
            self.oracle.update_space(hp)

        def run_trial(self, trial, *args, **kwargs):
            s = self.hypermodel.spec
            hp = trial.hyperparameters
            gc.collect()
            keras.utils.set_random_seed(s["seed"] + int(trial.trial_id))
            self.new_trials += 1
            model = self.hypermodel.build(hp)
            stop = BudgetStop(self.oracle.deadline)
            start = time.perf_counter()
            history = model.fit(
                s["x"], s["y"], validation_data=s["validation_data"], validation_split=s["validation_split"],
                epochs=s["epochs"], batch_size=s["batch_size"], callbacks=[stop] + list(s["callbacks"]),
                verbose=s["fit_verbose"],
            )
            seconds = time.perf_counter() - start + _WHOLE_SECONDS
            return _trial_metrics(history.history, self.oracle.objective, seconds, stop.stopped)

    _CLASSES.update(
        oracles={"random": budget_oracle(kt.oracles.RandomSearchOracle),
                 "bayesian": budget_oracle(kt.oracles.BayesianOptimizationOracle)},
        hypermodel=BoostHyperModel,
        tuner=BoostTuner,
    )
    return _CLASSES


def _trial_metrics(history, objective, seconds, stopped):
    name, direction = objective.name, objective.direction
    if name not in history:
        raise ValueError(f"search: the objective {name!r} is not among the logged metrics "
                         f"{sorted(history)}; pass validation_data (for val_* objectives) or a metric.")
    values = [float(v) for v in history[name]]
    worst = -math.inf if direction == "max" else math.inf
    scored = [v if math.isfinite(v) else worst for v in values]  # a diverged epoch ranks last
    best = (max if direction == "max" else min)(range(len(scored)), key=scored.__getitem__)
    metrics = {k: (float(v[best]) if math.isfinite(float(v[best])) else worst) for k, v in history.items()}
    metrics[name] = scored[best]
    metrics.update(seconds=seconds, epochs=float(len(values)), stopped_by_budget=float(stopped))
    return metrics


def _record(trial, objective):
    hp = trial.hyperparameters.values
    metrics = trial.metrics

    def last(name):
        return float(metrics.get_last_value(name)) if metrics.exists(name) else None

    score = trial.score if trial.status == "COMPLETED" else None
    epochs = last("epochs")
    return {
        "trial_id": trial.trial_id,
        "status": trial.status,
        _HP_LEVEL: hp.get(_HP_LEVEL),
        _HP_LR: float(hp.get(_HP_LR)),
        _HP_STEPS: int(hp.get(_HP_STEPS)),
        _HP_PRECISION: hp.get(_HP_PRECISION),
        "score": None if score is None else float(score),
        "seconds": last("seconds"),
        "epochs": None if epochs is None else int(epochs),
        "stopped_by_budget": bool(last("stopped_by_budget")),
    }


def search(
    build_model,
    x,
    y=None,
    validation_data=None,
    *,
    levels=("O0", "O1"),
    learning_rates=(1e-3, 1e-1),
    accumulation_steps=(1, 2, 4),
    precisions=("float32", "mixed_bfloat16"),
    loss=None,
    metrics=("accuracy",),
    objective="val_accuracy",
    epochs=2,
    batch_size=64,
    max_trials=10,
    time_budget=None,
    directory="keras_boost_tune",
    project_name="search",
    overwrite=False,
    seed=0,
    optimizer="sgd",
    tuner="random",
    callbacks=(),
    verbose=1,
):
    """Searches boost level, learning rate, accumulation and precision.

    Each trial trains a fresh model, `BoostModel.from_model(model,
    boost_level, boost_config_dict)` compiled with the trial's learning
    rate, for `epochs` epochs, and scores it by the best epoch's
    `objective`. Trials run until `max_trials` exist in the project (resumed
    ones included) or `time_budget` seconds have passed since this call
    began: no trial starts after that, and the running one stops at its next
    epoch end (its score is from the epochs it ran).

    Resuming: the search state is kept by KerasTuner in
    `directory/project_name`. A second call with the same directory and
    `overwrite=False` reloads the finished trials and runs only up to
    `max_trials` in all; an interrupted trial is run again. The search
    space is the one saved by the first call.

    Args:
        build_model: a callable returning a fresh (uncompiled) Keras model,
            or a built Keras model, cloned (with its current weights) for
            each trial.
        x, y: training data (arrays; `y` may be None for a dataset `x`).
        validation_data: `(x_val, y_val)`; when None and the objective is a
            `val_*` metric, Keras' `validation_split=0.2` holds out the last
            fifth of `x`.
        levels: boost levels to try (`"O0"`, `"O1"`, `"O2"`).
        learning_rates: a `(lo, hi)` tuple: log-uniform range; a list (or
            one number): the values to try.
        accumulation_steps: gradient-accumulation steps to try (ints >= 1;
            1 is plain training). The batch size stays `batch_size`.
        precisions: compute precisions to try (`"float32"`,
            `"mixed_float16"`, `"mixed_bfloat16"`).
        loss: the loss (required), as for `compile`.
        metrics: compile metrics; must produce the objective.
        objective: the metric to optimize (a name whose direction KerasTuner
            can infer, or a `keras_tuner.Objective`).
        epochs, batch_size: per trial.
        max_trials: trials in the project, resumed ones included (>= 1).
        time_budget: seconds for this call (> 0), or None for no limit.
        directory, project_name: where the state is kept.
        overwrite: True starts afresh, deleting the project's state.
        seed: trial `i` runs after `keras.utils.set_random_seed(seed + i)`;
            also the tuner's seed.
        optimizer: a Keras optimizer name (`keras.optimizers.get`, with the
            trial's `learning_rate`) or a factory `learning_rate -> optimizer`.
        tuner: `"random"` (`RandomSearch`) or `"bayesian"`
            (`BayesianOptimization`).
        callbacks: extra Keras callbacks for every trial's `fit`.
        verbose: 0 silent, 1 KerasTuner's per-trial summaries, 2 also Keras'
            per-epoch lines.

    Returns:
        A `SearchResult` (`best_level`, `best_config`, `best_learning_rate`,
        `trials`, `to_json`).

    Raises:
        ValueError: at once, for a non-positive budget, `max_trials < 1`, an
            empty search space, unknown level or precision names, bad learning
            rates or accumulation steps, or a missing loss.
        RuntimeError: when the budget ran out (or every trial failed) before
            any trial completed.
        ImportError: when KerasTuner is not installed.

    Example:

    ```python
    (x, y), (x_val, y_val) = boost.bench.mnist_data()
    result = boost.tune.search(
        lambda: boost.bench.residual_cnn(width=8), x, y, validation_data=(x_val, y_val),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        max_trials=4, epochs=1, time_budget=300, directory="/tmp/tune")
    print(result)
    boost.AutoBoost(result.best_level, result.best_config)   # loads as is
    ```
    """
    began = time.monotonic()
    if time_budget is not None:
        _positive("time_budget", time_budget)
    _positive("max_trials", max_trials, integer=True)
    _positive("epochs", epochs, integer=True)
    _positive("batch_size", batch_size, integer=True)
    if tuner not in _TUNERS:
        raise ValueError(f"search: unknown tuner {tuner!r}; valid values: {list(_TUNERS)}.")
    if verbose not in (0, 1, 2):
        raise ValueError(f"search: verbose must be 0, 1 or 2, got {verbose!r}.")
    spec = {
        "levels": _choices("levels", levels, valid=config_lib.LEVELS),
        "lr": _learning_rates(learning_rates),
        "steps": [int(v) for v in _choices("accumulation_steps", accumulation_steps, check=_check_steps)],
        "precisions": _choices("precisions", precisions, valid=PRECISIONS),
    }
    if loss is None:
        raise ValueError("search: pass loss=... (as for compile).")
    kt = _import_keras_tuner()
    from keras_tuner.src.engine.objective import MultiObjective
    from keras_tuner.src.engine.objective import create_objective

    objective = create_objective(objective)
    if not isinstance(objective, kt.Objective) or isinstance(objective, MultiObjective):
        raise ValueError(f"search: objective must be one metric name or keras_tuner.Objective, got {objective!r}.")
    validation_split = 0.0
    if validation_data is None and objective.name.startswith("val_"):
        validation_split = 0.2
    spec.update(
        fresh=_model_factory(build_model), optimizer=_optimizer_factory(optimizer), loss=loss,
        metrics=list(metrics), x=x, y=y, validation_data=validation_data, validation_split=validation_split,
        epochs=int(epochs), batch_size=int(batch_size), seed=int(seed), callbacks=list(callbacks),
        fit_verbose=2 if verbose == 2 else 0,
    )

    classes = _classes(kt)
    oracle = classes["oracles"][tuner](objective=objective, max_trials=int(max_trials), seed=int(seed))
    oracle.deadline = None if time_budget is None else began + float(time_budget)
    engine = classes["tuner"](
        oracle=oracle, hypermodel=classes["hypermodel"](spec),
        directory=os.fspath(directory), project_name=project_name, overwrite=overwrite,
    )
    engine.search(verbose=min(verbose, 1))

    trials = [_record(engine.oracle.trials[i], objective) for i in engine.oracle.start_order]
    if not any(t["status"] == "COMPLETED" and t["score"] is not None for t in trials):
        failed = [t for t in trials if t["status"] != "COMPLETED"]
        if failed:
            message = engine.oracle.trials[failed[-1]["trial_id"]].message or ""
            raise RuntimeError(f"search: no trial completed; {len(failed)} failed. Last error:\n{message}")
        raise RuntimeError(
            f"search: the time budget of {time_budget} s ran out before any trial completed "
            f"(after {time.monotonic() - began:.2f} s); raise time_budget."
        )
    return SearchResult(trials, objective.name, objective.direction, engine.new_trials,
                        time.monotonic() - began, engine.project_dir)
