"""The variants `keras-boost bench` compares, by name.

- `baseline`: plain `keras.Model.fit`, SGD with momentum and a cosine decay
  over the whole run (the tuned reference);
- `baseline-short`: the same with the run, and its schedule, rescaled to
  `short_ratio` of the epochs (Composer's `scale_schedule_ratio`: the
  honest "just train less" alternative every speed-up must beat);
- `prefix-cache`: the baseline trained by `fit_with_cached_prefix` (for
  fine-tuning workloads; not in the defaults);
- one variant per keras_boost algorithm, alone (manual mode,
  `ALGORITHM_CONFIGS`), and one per level (O1, O2, `LEVEL_CONFIGS`;
  its `O0`, BoostModel's step with nothing on, only by name),
  through `AutoBoost` + `BoostModel.from_model`: the model door;
  `seq_length_warmup` and `selective_backprop` likewise, by name only (`STEP_ALGORITHM_CONFIGS`);
- `wrap-O0`, `wrap-O1`, `wrap-O2` (`WRAP_CONFIGS`): the optimizer door,
  the baseline's plain `keras.Model` compiled with
  `boost.wrap(recipe_optimizer, level, config)` and no `BoostModel`, so
  that a table of `baseline,wrap-O1,O1` compares the two doors of a level.
  Only the level's optimizer-level algorithms act there (`wrap-O1`:
  gradient centralization; `wrap-O2` adds AdaSum; gradient freezing is
  left out on a plain model, model surgery never runs); the record's
  `optimizer_chain` says what ran. `wrap-O0` is O0 in manual mode, a
  pass-through on its own, to which overrides switch on one optimizer-
  level algorithm alone: `wrap-O0+boost.adasum=true`, and so any switch
  a later optimizer wrapper adds to the config's `boost` section
  (`wrap-O0+boost.SWITCH=true+SWITCH.key=value`). Not in the defaults.

A name may carry overrides after `+`: config overrides of a boost variant
(`O1+grad_freeze.freeze_p=0.5`) and recipe overrides of any variant
(`baseline+recipe.batch_size=256`); see `variant_spec` and
`variant_recipe`. A wrap variant takes both (`wrap-O1+recipe.batch_size=128`).

Example:

```python
from keras_boost.bench import variants
variants.variant_spec("O1")                     # ('O1', {'grad_freeze': {'total_steps': 'auto'}})
variants.split_variants("baseline,O1")          # ['baseline', 'O1']
variants.variant_door("wrap-O1")                # 'wrap': plain model, boost.wrap(optimizer, "O1")
```
"""

import copy
import dataclasses
import json
import warnings

import keras_boost as boost

__all__ = [
    "ALGORITHM_CONFIGS", "DEFAULT_VARIANTS", "LEVEL_CONFIGS", "PLAIN_VARIANTS", "RECIPE_FIELDS",
    "STEP_ALGORITHM_CONFIGS", "WRAP_CONFIGS",
    "split_variants", "variant_door", "variant_recipe", "variant_spec",
]

# Each algorithm alone, as a manual-mode config on top of O0.
ALGORITHM_CONFIGS = {
    "less_bn": {"boost": {"mode": "manual", "less_bn": True}},
    "grad_freeze": {"boost": {"mode": "manual", "grad_freeze": True}, "grad_freeze": {"total_steps": "auto"}},
    "grad_accumulation": {"boost": {"mode": "manual", "grad_accumulation": True},
                          "grad_accumulation": {"grad_accumulation_step": 2}},
    "adasum": {"boost": {"mode": "manual", "adasum": True}},
    "fused_batch_norm": {"boost": {"mode": "manual", "fused_batch_norm": True}},
}
# Step-level algorithms, alone, by name; not in the defaults (sequence-length
# warm-up finds nothing to cut in an image model; neither wins yet).
STEP_ALGORITHM_CONFIGS = {
    "seq_length_warmup": {"boost": {"mode": "manual", "seq_length_warmup": True}},
    "selective_backprop": {"boost": {"mode": "manual", "selective_backprop": True}},
}
# O0 is BoostModel's own step with nothing on (plain Keras' math): the
# reference that isolates a step-level algorithm from the step's machinery
# (not in the defaults).
LEVEL_CONFIGS = {"O0": {"boost": {"mode": "manual"}}, "O1": {"grad_freeze": {"total_steps": "auto"}},
                 "O2": {"grad_freeze": {"total_steps": "auto"}}}
# The optimizer door: (level, config) of `boost.wrap` on the plain model.
# wrap-O1 and wrap-O2 take their level's config as O1 and O2 do (freezing's
# part is left out on a plain model); wrap-O0 is manual, so that a
# `+boost.SWITCH=true` override turns on one algorithm alone.
WRAP_CONFIGS = {
    "wrap-O0": ("O0", {"boost": {"mode": "manual"}}),
    "wrap-O1": ("O1", LEVEL_CONFIGS["O1"]),
    "wrap-O2": ("O2", LEVEL_CONFIGS["O2"]),
}
DEFAULT_VARIANTS = ("baseline", "baseline-short", *ALGORITHM_CONFIGS, "O1", "O2")
# Plain Keras runs: the baselines, and `prefix-cache`, the baseline's model
# and recipe trained by `boost.fit_with_cached_prefix` (the frozen part of
# the model computed once per phase; for fine-tuning workloads). Not in the
# defaults: on a model with nothing frozen it is the baseline.
PLAIN_VARIANTS = ("baseline", "baseline-short", "prefix-cache")


# Recipe fields a variant may override (`+recipe.batch_size=256`).
RECIPE_FIELDS = ("batch_size", "learning_rate", "warmup_epochs", "momentum", "weight_decay")


def split_variants(text):
    """The variant names of a comma-separated `--variants` list.

    Commas inside brackets belong to a JSON value:
    `O1+less_bn.exclude_patterns=["A","B"]` is one variant.

    Example:

    ```python
    split_variants('baseline, O1+less_bn.exclude_patterns=["A","B"]')
    # ['baseline', 'O1+less_bn.exclude_patterns=["A","B"]']
    ```
    """
    names, depth, start = [], 0, 0
    for index, char in enumerate(text):
        depth += {"[": 1, "{": 1, "]": -1, "}": -1}.get(char, 0)
        if char == "," and depth <= 0:
            names.append(text[start:index])
            start, depth = index + 1, 0
    names.append(text[start:])  # an unclosed bracket keeps the rest as one name
    return [name.strip() for name in names if name.strip()]


def _overrides(name):
    """(base, [(section, key, value)]) of a variant name."""
    base, *overrides = name.split("+")
    parsed = []
    for override in overrides:
        path, equals, text = override.partition("=")
        section, dot, key = path.partition(".")
        if not (equals and dot and section and key):
            raise ValueError(f"Bad config override {override!r} in variant {name!r}: expected section.key=value.")
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            value = text
        parsed.append((section, key, value))
    return base, parsed


def variant_recipe(name, workload):
    """`workload` with the variant's `recipe.*` overrides applied.

    `baseline+recipe.batch_size=256+recipe.learning_rate=0.006` trains the
    baseline's model with a 4x batch at twice the peak rate (the warmup,
    given in epochs, keeps its length in epochs). The fields that may be
    overridden are `RECIPE_FIELDS`; the values are checked as `Workload`
    checks its own. A variant with another batch size sees other batches
    than the baseline of its seed: its paired tables compare initial weights
    and recipe, not batch order.

    Example:

    ```python
    variant_recipe("baseline+recipe.batch_size=128", tiny_workload()).batch_size   # 128
    ```
    """
    _, overrides = _overrides(name)
    changes = {key: value for section, key, value in overrides if section == "recipe"}
    unknown = sorted(set(changes) - set(RECIPE_FIELDS))
    if unknown:
        raise ValueError(f"Variant {name!r} overrides recipe field(s) {unknown}; valid: {list(RECIPE_FIELDS)}.")
    return dataclasses.replace(workload, **changes) if changes else workload


def variant_door(name):
    """How a variant trains keras_boost: `"model"` (`BoostModel.from_model`,
    the algorithm and level variants), `"wrap"` (the plain model compiled
    with `boost.wrap`, `WRAP_CONFIGS`), or None (plain Keras).

    Example:

    ```python
    variant_door("O1"), variant_door("wrap-O1+boost.adasum=true"), variant_door("baseline")
    # ('model', 'wrap', None)
    ```
    """
    if variant_spec(name) is None:
        return None
    return "wrap" if name.split("+")[0] in WRAP_CONFIGS else "model"


def variant_spec(name):
    """(level, config) of a boost variant; None for the plain baselines.

    A variant may carry overrides after `+`, each `section.key=value` with
    a JSON value (or a bare string). Those of section `recipe` change the
    training recipe (`variant_recipe`; any variant, the baselines
    included); the others are deep-merged onto a boost variant's config:
    `O1+grad_freeze.freeze_p=0.5` is O1 with 50% full steps (the name
    stays the variant's label in the results).

    Example:

    ```python
    variant_spec("O1+grad_freeze.freeze_p=0.5")
    # ('O1', {'grad_freeze': {'total_steps': 'auto', 'freeze_p': 0.5}})
    variant_spec("baseline+recipe.batch_size=256")   # None: plain Keras
    variant_spec("wrap-O0+boost.adasum=true")
    # ('O0', {'boost': {'mode': 'manual', 'adasum': True}}): boost.wrap's level and config
    ```
    """
    base = name.split("+")[0]
    if base in ALGORITHM_CONFIGS or base in STEP_ALGORITHM_CONFIGS:
        level, config = "O0", {**ALGORITHM_CONFIGS, **STEP_ALGORITHM_CONFIGS}[base]
    elif base in LEVEL_CONFIGS:
        level, config = base, LEVEL_CONFIGS[base]
    elif base in WRAP_CONFIGS:
        level, config = WRAP_CONFIGS[base]
    elif base not in PLAIN_VARIANTS or not all(o.startswith("recipe.") for o in name.split("+")[1:]):
        raise ValueError(
            f"Unknown variant {name!r}. Valid variants: "
            f"{[*DEFAULT_VARIANTS, 'O0', *STEP_ALGORITHM_CONFIGS, 'prefix-cache', *WRAP_CONFIGS]}, "
            "a boost variant "
            "optionally followed by config overrides such as '+grad_freeze.freeze_p=0.5', any of them followed by "
            "recipe overrides such as '+recipe.batch_size=256'."
        )
    _, overrides = _overrides(name)
    if base in PLAIN_VARIANTS:
        return None
    overrides = [o for o in overrides if o[0] != "recipe"]
    config = copy.deepcopy(config)
    for section, key, value in overrides:
        config.setdefault(section, {})[key] = value
    flags = [key for key in config.get("boost", {}) if key != "mode"]
    if flags and config["boost"].get("mode", "auto") == "auto":
        # Auto mode would ignore them (with a warning the runs silence).
        raise ValueError(
            f"Variant {name!r} sets the flags {flags}, which boost mode 'auto' ignores: add "
            "'+boost.mode=manual' to apply them."
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", boost.config.BoostConfigWarning)
        boost.config.resolve_config(level, config)  # a bad key or value fails before any run
    return level, config
