"""Precision that picks itself: the config's `common.precision`.

Whether a lower precision pays depends on the machine and the model: on
this project's machines `mixed_bfloat16` ran at 0.62x the float32 epoch
time on an AMD EPYC with AVX512-BF16 and at 1.32x on an Intel Xeon without
it. So `"auto"` measures instead of guessing:

- `with_precision(model, policy)`: a copy of a functional or Sequential
  model whose floating-point layers compute in `policy` (weights copied;
  the input model and the global dtype policy are untouched);
- `choose_precision(model, x=None, ...)`: times training steps of such a
  copy at each candidate precision, in rounds that time one step of every
  candidate back to back, and keeps the candidate with the lowest median
  ratio to float32 whose loss stays finite, if that median beats float32
  by `margin` (load on the machine slows both steps of a round alike, so
  it cancels in the ratio; the median ignores a round one slowed step
  spoiled). Returns a `PrecisionChoice` report; results are cached per
  model signature for the process, and `BoostModel` saves the choice;
- `resolve_precision(model, precision)`: what `BoostModel.from_model` and
  `AutoBoost.network_auto_process_model` call for the config value.

Loss scaling follows the chosen policy: `BoostModel(loss_scale="auto")`
scales the loss exactly when the model computes in float16.

Example:

```python
choice = boost.precision.choose_precision(model, x_train[:256])
print(choice)                      # the timings, and what was kept
fast = boost.precision.with_precision(model, choice.policy)
# or, in one step:
boosted = boost.BoostModel.from_model(
    model, boost_config_dict={"common": {"precision": "auto"}})
```
"""

import hashlib
import json
import logging
import math
import time
import warnings

import keras
import numpy as np

from keras_boost import keras_private
from keras_boost.errors import NoEffectWarning
from keras_boost.graph import rebuild
from keras_boost.validation import has_layer_graph

__all__ = [
    "choose_precision",
    "CONFIG_VALUES",
    "model_policies",
    "PrecisionChoice",
    "PRECISIONS",
    "resolve_precision",
    "signature",
    "time_training_steps",
    "with_precision",
]

# The logger keeps the name it had before the module moved: users configure it.
logger = logging.getLogger("keras_boost.precision")

PRECISIONS = ("float32", "mixed_float16", "mixed_bfloat16")
CONFIG_VALUES = (None, *PRECISIONS, "auto")
# Policies whose layers are switched; others (int8 quantized, float64, ...)
# are the user's deliberate choice and stay.
_FLOAT_POLICIES = {"float32", "float16", "bfloat16", "mixed_float16", "mixed_bfloat16"}
_CACHE = {}


def _check_policy(policy, valid=PRECISIONS):
    if policy not in valid:
        raise ValueError(f"precision must be one of {list(valid)}, got {policy!r}.")



def _output_layers(model):
    outputs = getattr(model, "outputs", None) or []
    return {id(keras_private.keras_history_operation(t)) for t in outputs}


def _kept_in_float32(model):
    """Layers `with_precision` leaves in float32, by id:

    - layers that ask for it (`keeps_float32`, e.g. GroupLossScaleManager);
    - in a model that already computes in a mixed policy, the layers pinned
      to float32 (the Keras mixed-precision guide's float32 output softmax);
    - weightless output activations (`Activation`, `Softmax`): float32 there
      costs nothing and keeps the probabilities exact.
    """
    layers = keras_private.flatten_layers(model, include_self=False)
    mixed = any(layer.dtype_policy.name.startswith("mixed") for layer in layers)
    outputs = _output_layers(model)
    kept = set()
    for layer in layers:
        if getattr(layer, "keeps_float32", False) or (mixed and layer.dtype_policy.name == "float32"):
            kept.add(id(layer))
        elif id(layer) in outputs and not layer.weights and isinstance(
                layer, (keras.layers.Activation, keras.layers.Softmax)):
            kept.add(id(layer))
    return kept


def _switched(layer, policy, kept=()):
    return (
        not isinstance(layer, keras.layers.InputLayer)
        and layer.dtype_policy.name in _FLOAT_POLICIES
        and layer.dtype_policy.name != policy
        and not (id(layer) in kept and policy != "float32")
    )


def model_policies(model):
    """The dtype policy names of the model's floating-point layers (those
    `with_precision` keeps in float32 left out).

    Example:

    ```python
    model_policies(with_precision(model, "mixed_bfloat16"))   # {"mixed_bfloat16"}
    ```
    """
    kept = _kept_in_float32(model)
    return {
        layer.dtype_policy.name for layer in keras_private.flatten_layers(model, include_self=False)
        if not isinstance(layer, keras.layers.InputLayer) and layer.dtype_policy.name in _FLOAT_POLICIES
        and id(layer) not in kept
    }


def with_precision(model, policy):
    """A copy of `model` whose floating-point layers compute in `policy`.

    Every layer whose dtype policy is a float one (`float32`, `float16`,
    `bfloat16` or a mixed policy) is rebuilt from its config with `dtype=
    policy`; other layers (quantized, float64) keep theirs, and so do the
    float32 layers the mixed-precision guide keeps in float32 (see
    `_kept_in_float32`: layers pinned to float32 in an already mixed model,
    weightless output activations, GroupLossScaleManager). The copy is made
    by `keras_boost.graph.rebuild`, as the other surgeries' are: the weights
    are copied (variables of mixed policies stay float32), and a compiled
    model's copy is compiled the same way. Returns `model`
    itself when nothing changes. The input model and Keras' global policy
    are left untouched.

    Args:
        model: a built functional or Sequential `keras.Model`.
        policy: `"float32"`, `"mixed_float16"` or `"mixed_bfloat16"`.

    Returns:
        The new model (or `model` when every layer already uses `policy`).

    Raises:
        ValueError: an unknown policy, or a subclassed model (whose layers
            are created in Python code: build it under
            `keras.config.set_dtype_policy(policy)` instead).
        TypeError: a layer that cannot be re-created from its config.

    Example:

    ```python
    fast = with_precision(model, "mixed_bfloat16")
    fast.layers[1].compute_dtype   # "bfloat16"; model is unchanged
    ```
    """
    _check_policy(policy)
    kept = _kept_in_float32(model)
    if not any(_switched(layer, policy, kept) for layer in keras_private.flatten_layers(model, include_self=False)):
        return model
    if not has_layer_graph(model):
        raise ValueError(
            f"precision={policy!r}: {type(model).__name__} {model.name!r} is a subclassed model, "
            "whose layers keras_boost cannot rebuild. Build it under "
            f"keras.config.set_dtype_policy({policy!r}) instead."
        )

    def convert(layer):
        if not _switched(layer, policy, kept):
            return None  # the rebuild copies it as it is
        config = layer.get_config()
        config["dtype"] = policy
        return layer.__class__.from_config(config)

    return rebuild(model, f"precision={policy!r}", convert=convert,
                   switch_off='{"common": {"precision": "float32"}}')


class PrecisionChoice:
    """What `choose_precision` measured and kept.

    Attributes:
        policy: the chosen policy name.
        seconds_per_step: candidate -> median seconds per step (None when
            the candidate could not run).
        finite: candidate -> whether every timed loss was finite.
        errors: candidate -> why it could not run.
        signature: the cache key (a hash of the model's structure, the
            backend and the batch size).
        margin: how much faster than float32 a mixed policy had to be.
        ratios: candidate -> median of its paired ratios to float32 (what
            the decision compares with `1 - margin`).
        cached: whether this came from the cache.

    Example:

    ```python
    choice = choose_precision(model)
    choice.summary_line()   # "precision mixed_bfloat16 (measured: ..., 0.81x float32)"
    PrecisionChoice.from_config(choice.get_config()).policy == choice.policy
    ```
    """

    def __init__(self, policy, seconds_per_step, finite, errors, signature, margin, ratios=None):
        self.policy = policy
        self.seconds_per_step = dict(seconds_per_step)
        self.finite = dict(finite)
        self.errors = dict(errors)
        self.signature = signature
        self.margin = margin
        self.ratios = dict(ratios or {})
        self.cached = False

    def get_config(self):
        """The choice as a JSON-ready dict (`BoostModel` saves it)."""
        return {
            "policy": self.policy, "seconds_per_step": self.seconds_per_step, "finite": self.finite,
            "errors": self.errors, "signature": self.signature, "margin": self.margin,
            "ratios": self.ratios,
        }

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    def __repr__(self):
        return f"PrecisionChoice(policy={self.policy!r}, ratios={self.ratios!r})"

    def summary_line(self):
        """The choice in a few words, for `BoostModel.boost_summary`."""
        measured = ", ".join(f"{name} {ratio:.2f}x float32" for name, ratio in self.ratios.items())
        return f"precision {self.policy} (measured: {measured or 'float32 only'})"

    def __str__(self):
        lines = [f"precision: {self.policy}" + (" (cached)" if self.cached else "")]
        for name, seconds in self.seconds_per_step.items():
            if seconds is None:
                lines.append(f"  {name}: cannot run ({self.errors.get(name, 'unknown')})")
                continue
            ratio = f", {self.ratios[name]:.2f}x float32 (median of paired steps)" if name in self.ratios else ""
            finite = "" if self.finite.get(name, True) else ", loss not finite"
            lines.append(f"  {name}: {1e3 * seconds:.1f} ms/step{ratio}{finite}")
        lines.append(f"  (a mixed policy is kept only when {100 * self.margin:.0f}% faster than float32)")
        return "\n".join(lines)


def signature(model, batch_size, candidates):
    """A hash of what decides the timing: structure, backend, batch size."""
    parts = [keras.backend.backend(), int(batch_size), list(candidates)]
    for layer in keras_private.flatten_layers(model, include_self=False):
        parts.append([type(layer).__name__, [list(w.shape) for w in layer.weights]])
    parts.append([list(t.shape[1:]) for t in model.inputs] if has_layer_graph(model) else None)
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()[:16]


def _synthetic_inputs(model, batch_size):
    if not has_layer_graph(model):
        raise ValueError(
            f"precision='auto' needs sample inputs for {type(model).__name__} {model.name!r} "
            "(no recorded input shape): call choose_precision(model, x) yourself."
        )
    rng = np.random.default_rng(0)
    arrays = []
    for tensor in model.inputs:
        shape = tuple(tensor.shape[1:])
        if any(dim is None for dim in shape):
            raise ValueError(
                f"precision='auto' cannot make sample inputs for input {tensor.name!r} of "
                f"shape {tensor.shape}: pass real inputs, choose_precision(model, x)."
            )
        if "int" in str(tensor.dtype):
            arrays.append(np.zeros((batch_size, *shape), dtype=str(tensor.dtype)))
        else:
            arrays.append(rng.normal(size=(batch_size, *shape)).astype("float32"))
    return arrays[0] if len(arrays) == 1 else arrays


def _first_rows(x, n):
    return keras.tree.map_structure(lambda a: np.asarray(a)[:n], x)


def time_training_steps(model, x, steps):
    """Median seconds of `steps` training steps of `model` on the batch `x`,
    and whether every loss was finite (the default timer).

    On its first call for a model (a copy `choose_precision` made) the
    model is compiled with SGD at learning rate 0 (the weights do not move)
    and the mean square of its outputs as the loss, and one untimed step
    traces it: the cost of a step is then that of the real one (forward,
    backward, update) without needing the user's labels or loss.
    """
    y = keras.tree.map_structure(lambda t: np.zeros((len(keras.tree.flatten(x)[0]), *t.shape[1:]),
                                                    "float32"), model.outputs)
    y = y[0] if len(model.outputs) == 1 else y
    losses = []
    if not model.compiled:
        model.compile(optimizer=keras.optimizers.SGD(0.0), loss=lambda _, y_pred: keras.ops.mean(
            keras.ops.square(keras.ops.cast(y_pred, "float32"))))
        losses.append(float(np.asarray(model.train_on_batch(x, y)).reshape(-1)[0]))
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        losses.append(float(np.asarray(model.train_on_batch(x, y)).reshape(-1)[0]))
        times.append(time.perf_counter() - start)
    return float(np.median(times)), all(math.isfinite(v) for v in losses)


def choose_precision(model, x=None, candidates=PRECISIONS, batch_size=32, steps=5, margin=0.05,
                     timer=None, use_cache=True):
    """Times `model` at each candidate precision and keeps the fastest.

    Each candidate runs on a copy (`with_precision`). The copies are timed
    in `steps` rounds; a round times one step of every candidate back to
    back (in alternating order), and each candidate's step is divided by
    float32's of the same round. A mixed policy is kept only when the
    median of its paired ratios is below `1 - margin`; of those, the lowest
    median wins. Load on a shared machine slows both steps of a round alike
    and cancels in their ratio, and the median ignores the rounds a single
    slowed step spoiled, so the decision does not flip with the load. A
    candidate that raises (the backend or device cannot compute in it) or
    whose loss is not finite is skipped, with the reason in the report.

    Args:
        model: a built functional or Sequential model.
        x: sample inputs (the first `batch_size` rows are used); None:
            normal noise of the model's input shapes.
        candidates: policies to try; float32 is always among them.
        batch_size: rows per timed step.
        steps: rounds (timed steps per candidate, after one untimed compile
            step), at least 3.
        margin: how much faster than float32 a mixed policy must be.
        timer: `timer(model_copy, x, steps) -> (seconds_per_step, finite)`,
            called with `steps=1` once per round for each copy; default
            `time_training_steps` (tests pass a fake clock).
        use_cache: reuse an earlier choice for the same model signature in
            this process.

    Returns:
        A `PrecisionChoice`; `.policy` is the chosen policy name.

    Example:

    ```python
    choice = choose_precision(model, x_train)
    print(choice)
    model = with_precision(model, choice.policy)
    ```
    """
    candidates = list(dict.fromkeys(["float32", *candidates]))
    for candidate in candidates:
        _check_policy(candidate)
    if not 0.0 <= margin < 1.0:
        raise ValueError(f"margin must be in [0, 1), got {margin!r}.")
    if int(steps) < 3 or int(batch_size) < 1:
        raise ValueError(
            f"steps must be >= 3 (a median of paired timings) and batch_size >= 1, got "
            f"steps={steps!r}, batch_size={batch_size!r}."
        )
    key = f"{signature(model, batch_size, candidates)}-{margin}-{int(steps)}"
    if use_cache and timer is None and key in _CACHE:
        cached = _CACHE[key]
        cached.cached = True
        return cached
    x = _synthetic_inputs(model, batch_size) if x is None else _first_rows(x, batch_size)
    default_timer = timer is None
    times, finite, errors = _paired_rounds(model, x, candidates, int(steps), timer or time_training_steps)
    if "float32" in errors:
        raise RuntimeError(f"precision='auto': the model cannot train in float32 here: {errors['float32']}")
    ratios = {c: float(np.median(np.divide(times[c], times["float32"]))) for c in times if c != "float32"}
    fast = [c for c, ratio in ratios.items() if finite[c] and ratio < 1.0 - margin]
    best = min(fast, key=ratios.get, default="float32")
    seconds = {c: float(np.median(times[c])) if c in times else None for c in candidates}
    choice = PrecisionChoice(best, seconds, finite, errors, key, margin, ratios)
    if default_timer:
        _CACHE[key] = choice
    return choice


def _paired_rounds(model, x, candidates, rounds, timer):
    """Per candidate that runs: its step seconds per round, whether every
    loss was finite; and, for the others, why they cannot run."""
    copies, errors = {}, {}
    for candidate in candidates:
        try:
            copy = with_precision(model, candidate)
            if copy is model:  # time a copy, never the user's model
                copy = keras.models.clone_model(model)
                copy.set_weights(model.get_weights())
            # Keras' own train step: the policy's cost, not a BoostModel level's.
            copies[candidate] = keras.Model(copy.input, copy.output)
        except Exception as error:  # noqa: BLE001 - any failure means "cannot run here"
            errors[candidate] = f"{type(error).__name__}: {error}"[:200]
    times = {c: [] for c in copies}
    finite = dict.fromkeys(copies, True)
    for r in range(rounds):
        # Alternating order: a slow drift of the machine favours no candidate.
        for candidate in list(times)[:: 1 if r % 2 == 0 else -1]:
            if candidate in errors:
                continue
            try:
                seconds, ok = timer(copies[candidate], x, 1)
            except Exception as error:  # noqa: BLE001
                errors[candidate] = f"{type(error).__name__}: {error}"[:200]
                continue
            times[candidate].append(seconds)
            finite[candidate] = finite[candidate] and ok
    return {c: t for c, t in times.items() if c not in errors}, finite, errors


def resolve_precision(model, precision):
    """The config's `common.precision` applied to `model`.

    Returns `(model, choice)`: `model` unchanged for None, a copy in the
    requested policy otherwise (`choice` is the `PrecisionChoice` for
    "auto", else None). A requested policy the backend cannot run raises
    `ValueError` naming it.
    """
    _check_policy(precision, CONFIG_VALUES)
    if precision is None:
        return model, None
    choice = None
    if precision == "auto":
        choice = choose_precision(model)
        precision = choice.policy
        # Logged, not printed: the choice is kept as `model.precision_choice`.
        logger.info("%s", choice)
    if not has_layer_graph(model):
        if model_policies(model) - {precision}:
            warnings.warn(
                f"precision={precision!r}: {model.name!r} is a subclassed model whose layers keras_boost "
                f"cannot rebuild; it keeps {sorted(model_policies(model))}. Build it under "
                f"keras.config.set_dtype_policy({precision!r}).",
                NoEffectWarning,
                stacklevel=3,
            )
        return model, choice
    converted = with_precision(model, precision)
    if converted is not model and choice is None:
        _check_runs(converted, precision)
    return converted, choice


def _check_runs(model, precision):
    """One forward pass on a tiny batch: a clear error if the policy cannot run."""
    try:
        x = _synthetic_inputs(model, 2)
    except ValueError:
        return  # no shapes to make inputs from: the first fit step will tell
    try:
        model(x, training=False)
    except Exception as error:  # noqa: BLE001
        raise ValueError(
            f"precision={precision!r} cannot run on the {keras.backend.backend()!r} backend here "
            f"({type(error).__name__}: {error}). Valid values: {list(CONFIG_VALUES)}; "
            "\"auto\" tries each and keeps what runs."
        ) from error
