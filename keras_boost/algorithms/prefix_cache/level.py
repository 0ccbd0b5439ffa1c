"""Prefix caching as a level's algorithm: `BoostModel.fit` computes the frozen prefix once.

With `boost.prefix_cache` on (O1 and O2), `fit` on arrays of a model whose
inputs feed frozen layers (keras-io's transfer learning: a frozen base under
a new head, or a base whose top alone is unfrozen) trains as
`fit_with_cached_prefix` does: the prefix's outputs are computed once, the
rest trains on them. Where it cannot act, `fit` runs as it would without it
and the end-of-fit summary says why (`CacheDecision.phrase`):

- nothing frozen at the inputs (a model trained from scratch: a prefix of
  weightless layers, such as an input's padding or rescaling, is not worth
  a copy of the data);
- `x` or `validation_data` is a dataset or a generator, whose batches may
  change from epoch to epoch (augmentation, shuffling), so that outputs
  computed once would be wrong;
- a step part the step would be wrong without (loss scaling, accumulation,
  DimReduce, group loss scaling) runs in BoostModel's own step, which the
  suffix's Keras step would bypass;
- the cached outputs would take more than `prefix_cache.max_cache_mb`.

Gradient freezing (an `optional` step part) does not run in a cached fit:
the suffix trains in full, as `model.fit` would, and the summary says so.
The suffix's optimizer is the model's own (its chain: gradient
centralization and the other optimizer-level algorithms act as usual).

Example:

```python
model = boost.BoostModel.from_model(transfer_model, boost_level="O1")
model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
model.fit(x_train, y_train, epochs=5)   # the frozen base runs once over x_train
print(model.boost_summary())            # ... prefix cache: a frozen prefix of 31 operations computed once ...
```
"""

import dataclasses
import time

from keras_boost.algorithms.prefix_cache.fit import are_arrays
from keras_boost.algorithms.prefix_cache.fit import cached_inputs
from keras_boost.algorithms.prefix_cache.fit import fit_suffix
from keras_boost.algorithms.prefix_cache.split import frozen_prefix_report
from keras_boost.algorithms.prefix_cache.split import split_frozen_prefix

__all__ = ["CacheDecision", "decide", "fit_with_level_cache"]

# Bytes per cached number: float32 (a mixed-precision cut is half of it; the
# estimate errs on the large side).
_BYTES_PER_NUMBER = 4


@dataclasses.dataclass(frozen=True)
class CacheDecision:
    """Whether a `fit` call trains with the frozen prefix cached, and why.

    Attributes:
        cached: True when the fit ran on cached prefix outputs.
        phrase: the summary's words ("prefix cache: ...").
        report: the `PrefixReport`, or None when the model was not analysed.
    """

    cached: bool
    phrase: str
    report: object = None


def decide(model, x, validation_data, parts, max_cache_mb):
    """The `CacheDecision` for `model.fit(x, validation_data=...)` with
    the step parts `parts`, before anything runs (`cached` then says that
    the cache will be used)."""
    try:
        report = frozen_prefix_report(model)
    except TypeError as error:  # not a graph of layers
        return CacheDecision(False, f"prefix cache off ({error})")
    if not report.frozen_layers:  # nothing, or weightless layers alone (padding, rescaling)
        return CacheDecision(False, "prefix cache: nothing frozen at the inputs", report)
    where = f"a frozen prefix of {len(report.cached_layers)} operations"
    if not model.trainable_variables:
        return CacheDecision(False, f"prefix cache off ({where}, but nothing trainable after them)", report)
    for name, value in (("x", x), ("validation_data", _validation_inputs(validation_data))):
        if not are_arrays(value) or (name == "x" and value is None):
            return CacheDecision(False, (
                f"prefix cache off ({where}; fit's {name} is a {type(value).__name__}, whose batches may "
                "change per epoch: pass arrays to cache them)"), report)
    required = [part.label for part in parts if not part.optional]
    if required:
        return CacheDecision(False, (
            f"prefix cache off ({where}; {', '.join(required)} runs in BoostModel's own step, which "
            "a cached fit would bypass)"), report)
    megabytes = report.features_per_example * _examples(x) * _BYTES_PER_NUMBER / 2**20
    if megabytes > max_cache_mb:
        return CacheDecision(False, (
            f"prefix cache off ({where}; their outputs would take {megabytes:.0f} MB > "
            f"prefix_cache.max_cache_mb={max_cache_mb:g})"), report)
    return CacheDecision(True, f"prefix cache: {where} computed once ({megabytes:.3g} MB)", report)


def fit_with_level_cache(model, fit, arguments, parts, max_cache_mb, record):
    """Runs `fit(**arguments)` (Keras' own `fit` of `model`), or, when
    `decide` allows it, the cached fit with the same arguments; returns the
    `History`.

    `record(decision)` receives the `CacheDecision` before the training
    starts (the end-of-fit summary reads it); a cached decision's phrase
    also says how long the prefix's pass took and what of the step it
    leaves out.
    """
    x, y = arguments.get("x"), arguments.get("y")
    decision = decide(model, x, arguments.get("validation_data"), parts, max_cache_mb)
    if not decision.cached:
        record(decision)
        return fit(**arguments)
    start = time.perf_counter()
    split = split_frozen_prefix(model)
    fit_kwargs = {k: v for k, v in arguments.items() if k not in ("x", "y")}
    features, fit_kwargs = cached_inputs(split, x, fit_kwargs)
    phrase = f"{decision.phrase} in {time.perf_counter() - start:.1f} s"
    skipped = [part.label for part in parts]  # all optional here
    if skipped:
        phrase += f", the rest trained in full ({', '.join(skipped)} not run)"
    record(dataclasses.replace(decision, phrase=phrase))
    return fit_suffix(model, split, features, y, fit_kwargs)


def _validation_inputs(validation_data):
    if isinstance(validation_data, (list, tuple)) and validation_data:
        return validation_data[0]
    return validation_data


def _examples(x):
    first = next(iter(x.values())) if isinstance(x, dict) else x[0] if isinstance(x, (list, tuple)) else x
    return int(first.shape[0])
