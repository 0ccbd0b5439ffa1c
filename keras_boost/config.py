"""Boost configuration: level presets, modes and per-section schemas.

This module depends on nothing but the standard library (and
`keras_boost.errors`, which has no imports). It turns a boost
level (`"O0"`, `"O1"`, `"O2"`) and an optional MindSpore-style config dict (or
the path of a JSON file holding one) into a fully resolved, validated dict.

It ports `mindspore.boost.boost._get_configuration` and fixes its defects: the
level presets are never mutated, unknown sections and keys raise `ValueError`
(with the closest valid name), every value is type- and range-checked, and
section values that cannot act because their algorithm is off are reported
with a warning instead of being dropped silently.
"""

import copy
import difflib
import json
import math
import os
import warnings

from keras_boost.errors import NoEffectWarning
from keras_boost.errors import not_implemented

__all__ = [
    "ALGORITHMS",
    "BoostConfigWarning",
    "check_grad_freeze_values",
    "check_implemented",
    "check_level",
    "check_value",
    "enabled_algorithms",
    "IMPLEMENTED",
    "LEVELS",
    "load_config_dict",
    "MODES",
    "resolve_config",
    "SCHEMA",
]

LEVELS = ("O0", "O1", "O2")
MODES = ("auto", "manual", "enable_all", "disable_all")

# Algorithm flags of the "boost" section, in MindSpore's order, then
# keras_boost's own (fused_batch_norm: the remaining BatchNormalization
# layers train with one fused kernel, same math; prefix_cache: BoostModel.fit
# computes a frozen prefix once; cautious: C-AdamW's update masking around
# the user's optimizer, off at every level (measured: docs/methods/cautious.md);
# seq_length_warmup: BoostModel's step on shorter sequences first;
# selective_backprop: BoostModel's step on each batch's hardest examples; both
# off at every level (docs/methods/); see keras_boost.algorithms).
ALGORITHMS = (
    "less_bn",
    "grad_freeze",
    "adasum",
    "grad_accumulation",
    "dim_reduce",
    "loss_scale_group",
    "fused_batch_norm",
    "prefix_cache",
    "orthogonal_updates",
    "cautious",
    "seq_length_warmup",
    "selective_backprop",
)

# MindSpore's presets (boost.py, `_boost_config_level`), plus
# fused_batch_norm at O1 and O2: it changes no number of the training, only
# the kernels (measured: docs/methods/fused_batch_norm.md); and prefix_cache:
# BoostModel.fit on arrays computes a frozen prefix once, which also changes
# no number (docs/methods/prefix_cache.md).
_PRESETS = {
    "O0": dict.fromkeys(ALGORITHMS, False),
    "O1": {
        **dict.fromkeys(ALGORITHMS, False),
        "less_bn": True,
        "grad_freeze": True,
        "fused_batch_norm": True,
        "prefix_cache": True,
    },
    "O2": {
        **dict.fromkeys(ALGORITHMS, False),
        "less_bn": True,
        "grad_freeze": True,
        "adasum": True,
        "fused_batch_norm": True,
        "prefix_cache": True,
    },
}


class BoostConfigWarning(UserWarning):
    """A config value that was accepted but cannot have any effect."""


# --- value checks -----------------------------------------------------------
# Each check takes (where, value) and returns the normalised value or raises.


def _is_real(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _bool(where, value):
    if not isinstance(value, bool):
        raise TypeError(f"{where} must be a bool (true/false), got {value!r}.")
    return value


def _int(minimum):
    def check(where, value):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{where} must be an int, got {value!r}.")
        if value < minimum:
            raise ValueError(f"{where} must be >= {minimum}, got {value!r}.")
        return value

    return check


def _real(low, high, low_open=True, high_open=True):
    """A finite float in the interval (low, high); open ends by default."""

    def check(where, value):
        if not _is_real(value):
            raise TypeError(f"{where} must be a number, got {value!r}.")
        value = float(value)
        too_low = value <= low if low_open else value < low
        too_high = value >= high if high_open else value > high
        if not math.isfinite(value) or too_low or too_high:
            interval = (
                f"{'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"
            )
            raise ValueError(f"{where} must be in {interval}, got {value!r}.")
        return value

    return check


def _choice(*allowed):
    def check(where, value):
        if isinstance(value, bool) or value not in allowed:
            raise ValueError(
                f"{where} must be one of {list(allowed)}, got {value!r}."
            )
        return value

    return check


def _optional_path(where, value):
    if value is None:
        return None
    if not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"{where} must be a path (str) or None, got {value!r}.")
    return os.fspath(value)


def _total_steps(where, value):
    # None or "auto" means: take the real number of steps from `fit`.
    if value is None or value == "auto":
        return "auto"
    return _int(1)(where, value)


def _optional_int(where, value):
    return None if value is None else _int(0)(where, value)


def _auto_or_bool(where, value):
    if value == "auto" and not isinstance(value, bool):
        return "auto"
    if not isinstance(value, bool):
        raise TypeError(f"{where} must be 'auto', true or false, got {value!r}.")
    return value


def _auto_or_int(minimum):
    def check(where, value):
        if value == "auto" and not isinstance(value, bool):
            return "auto"
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{where} must be 'auto' or an int, got {value!r}.")
        return _int(minimum)(where, value)

    return check


def _auto_or_depths(where, value):
    # "auto", or the freeze depths to run (a plan the depth planner recorded).
    if value == "auto" and not isinstance(value, bool):
        return "auto"
    if isinstance(value, bool) or not isinstance(value, (list, tuple)):
        raise TypeError(f"{where} must be 'auto' or a list of freeze depths (ints), got {value!r}.")
    return sorted({_int(0)(f"{where}[{i}]", v) for i, v in enumerate(value)} | {0})


def _names(where, value):
    # One name or a list of names; the names themselves are checked where
    # they are used (this module knows no algorithm's vocabulary).
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) and v for v in value):
        raise TypeError(f"{where} must be a name or a list of names (strings), got {value!r}.")
    return tuple(sorted(set(value)))


def _split_groups(where, value):
    # MindSpore documents an int or a list, but its int branch crashes; a list
    # of increasing split indices is what actually works there.
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (list, tuple)):
        raise TypeError(
            f"{where} must be None or a list of ints (split indices), got {value!r}."
        )
    checked = [_int(1)(f"{where}[{i}]", v) for i, v in enumerate(value)]
    if checked != sorted(set(checked)):
        raise ValueError(
            f"{where} must be strictly increasing split indices, got {value!r}."
        )
    return checked


# --- schema -----------------------------------------------------------------
# section -> key -> (default, check). Defaults are MindSpore's code defaults.

SCHEMA = {
    "boost": {"mode": ("auto", _choice(*MODES))}
    | {name: (False, _bool) for name in ALGORITHMS},
    "common": {
        "gradient_split_groups": (None, _split_groups),
        # Replicas per node. MindSpore's default, 8, hard-codes an Ascend
        # server and switches AdaSum off below 16 devices; "auto" takes the
        # strategy's replicas per worker.
        "device_number": ("auto", _auto_or_int(1)),
        # Extension: the compute precision of the model BoostModel.from_model
        # builds (None: the model's own; "auto": measured, see
        # keras_boost.precision).
        "precision": (None, _choice(None, "float32", "mixed_float16", "mixed_bfloat16", "auto")),
    },
    "less_bn": {
        # Default False, unlike MindSpore's True: the NormalizedDense head
        # cost MobileNetV2 1.15-1.95 points on TensorFlow and torch and
        # gained 0.3 on a ResNet-style CNN (benchmarks/results/JOURNAL.md,
        # 2026-12-06).
        "fn_flag": (False, _bool),
        # Extension: "auto" (the default) centralizes only the gradients of
        # a model with BatchNormalization (GradientCentralization's
        # only_with_batch_norm); MindSpore's is a bool, True by default.
        "gc_flag": ("auto", _auto_or_bool),
        # Extension: also remove the BNs LessBN keeps by default, the frozen
        # ones (trainable=False, or in a frozen model) and the trained ones
        # (moving statistics moved: pretrained weights).
        "remove_pretrained_bn": (False, _bool),
        # Extension: patterns (keras_boost.algorithms.less_bn.patterns) not
        # applied, e.g. "InvertedResidual2" keeps MobileNetV2's last BN.
        "exclude_patterns": ((), _names),
    },
    "grad_freeze": {
        "param_groups": (10, _int(1)),
        "freeze_type": (1, _choice(0, 1)),
        "freeze_p": (0.7, _real(0.0, 1.0)),
        "total_steps": (65536, _total_steps),
        # Extensions (not in MindSpore): the schedule's RNG seed, and whether
        # BoostModel may merge depths whose saving cannot repay their
        # compilation ("auto": yes unless param_groups is given explicitly).
        "seed": (None, _optional_int),
        "adaptive_depths": ("auto", _auto_or_bool),
        # Extension: with adaptive depths (not with an explicit param_groups),
        # freezing is switched off when its best plan would save less than
        # this fraction of the run's time (keras_boost.algorithms.freezing, rule 6).
        "min_run_saving": (0.05, _real(0.0, 1.0, low_open=False)),
        # Extension: the depths BoostModel runs, pinned ("auto": the planner
        # measures and decides; a list such as [0, 3, 6]: each scheduled
        # depth runs as the deepest listed one at or above it, no timing;
        # [0]: freezing off). Depth 0 is always included.
        "depths": ("auto", _auto_or_depths),
    },
    "grad_accumulation": {"grad_accumulation_step": (1, _int(1))},
    # Extension: how AdaSum combines (see keras_boost.optimizers.AdaSum).
    "adasum": {
        "reduce_on": ("grad", _choice("grad", "delta")),
        "hierarchical": (False, _bool),
        # "auto": the halving/doubling exchange where it runs; "gather": always gather.
        "exchange": ("auto", _choice("auto", "gather")),
        # Each pairwise combination no longer than its longer input (see
        # keras_boost.optimizers.AdaSum); false: Horovod's unbounded rule.
        "norm_bound": (True, _bool),
    },
    "dim_reduce": {
        # DimReduce validates its arguments with these checks too.
        "rho": (0.55, _real(0.0, 1.0)),
        "gamma": (0.9, _real(0.0, 1.0, low_open=False)),
        "alpha": (0.001, _real(0.0, math.inf)),
        "sigma": (0.4, _real(0.0, 1.0)),
        "n_components": (32, _int(1)),
        "pca_mat_path": (None, _optional_path),
        "weight_load_dir": (None, _optional_path),
        "timeout": (1800, _real(0.0, math.inf)),
        # Extension: line-search trials (MindSpore hard-codes 2).
        "max_line_search": (2, _int(1)),
    },
    # Extension: the largest cache of frozen-prefix outputs BoostModel.fit
    # keeps in memory (float32 estimate); above it, fit runs uncached.
    "prefix_cache": {"max_cache_mb": (2048, _real(0.0, math.inf))},
    # Extension: Muon-style orthogonalized updates of the hidden weight
    # matrices around the user's optimizer (keras_boost.algorithms.
    # orthogonal_updates); off at every level (measured: docs/methods/orthogonal_updates.md).
    "orthogonal_updates": {
        "momentum": (0.95, _real(0.0, 1.0, low_open=False)),
        "nesterov": (True, _bool),
        "ns_steps": (5, _int(1)),
        "rms_rule": ("auto", _choice("auto", "adam", "norm")),
        "rms_rate": (0.2, _real(0.0, math.inf)),
        "exclude": ((), _names),
        "conv_kernels": (False, _bool),
    },
    # Extension: C-AdamW's cautious masking (keras_boost.algorithms.cautious);
    # the largest rescaling of the kept coordinates (1.0: none).
    "cautious": {"max_scale": (1000.0, _real(1.0, math.inf, low_open=False))},
    # Extension: sequence-length warm-up in BoostModel's train step
    # (keras_boost.algorithms.seq_length_warmup); off at every level.
    "seq_length_warmup": {
        "min_length": (8, _int(1)),
        "step_size": (8, _int(1)),
        "duration": (0.3, _real(0.0, 1.0, high_open=False)),
        # "auto": warm up over each fit call; an int: over that many steps
        # counted from the optimizer's iterations (a run split over fit calls).
        "total_steps": ("auto", _total_steps),
    },
    # Extension: selective backprop in BoostModel's train step
    # (keras_boost.algorithms.selective_backprop); off at every level.
    "selective_backprop": {
        "keep": (0.5, _real(0.0, 1.0, high_open=False)),
        "start": (0.5, _real(0.0, 1.0, low_open=False, high_open=True)),
        "end": (0.9, _real(0.0, 1.0, high_open=False)),
        "total_steps": ("auto", _total_steps),
    },
}


def check_value(section, key, value):
    """Validates one config value by the schema; returns it (normalized)."""
    return SCHEMA[section][key][1](f"{section}.{key}", value)


def _unknown(kind, name, valid):
    close = difflib.get_close_matches(str(name), list(valid), n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    return ValueError(
        f"Unknown {kind} {name!r}.{hint} Valid {kind}s: {sorted(valid)}."
    )


def check_level(level):
    """Returns `level` if it is a valid boost level, else raises `ValueError`."""
    if level not in LEVELS:
        raise ValueError(
            f"Unknown boost level {level!r}. Valid levels: {list(LEVELS)}."
        )
    return level


def load_config_dict(boost_config_dict):
    """Accepts None, a dict or the path of a JSON file; returns a dict copy."""
    if boost_config_dict is None or boost_config_dict == "":
        return {}
    if isinstance(boost_config_dict, (str, os.PathLike)):
        path = os.fspath(boost_config_dict)
        if not os.path.isfile(path):
            raise ValueError(
                f"boost_config_dict {path!r} is neither a dict nor an existing "
                "JSON file."
            )
        with open(path, encoding="utf-8") as f:
            try:
                boost_config_dict = json.load(f)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path!r} is not valid JSON: {e}") from None
    if not isinstance(boost_config_dict, dict):
        raise TypeError(
            "boost_config_dict must be None, a dict or a path to a JSON file, "
            f"got {type(boost_config_dict).__name__}."
        )
    return copy.deepcopy(boost_config_dict)


def resolve_config(level="O0", boost_config_dict=None):
    """Returns the fully resolved config for a level and a user config dict.

    Every section and key is present in the result, defaults filled in.

    Example:

    ```python
    cfg = resolve_config("O1", {"grad_freeze": {"total_steps": 1000}})
    cfg["boost"]["grad_freeze"]        # True (O1 preset)
    cfg["grad_freeze"]["total_steps"]  # 1000
    ```
    """
    check_level(level)
    user = load_config_dict(boost_config_dict)
    for section, values in user.items():
        if section not in SCHEMA:
            raise _unknown("section", section, SCHEMA)
        if not isinstance(values, dict):
            raise TypeError(
                f"Section {section!r} must be a dict, got {type(values).__name__}."
            )
        for key in values:
            if key not in SCHEMA[section]:
                raise _unknown(f"key of section {section!r}", key, SCHEMA[section])

    resolved = {}
    for section, keys in SCHEMA.items():
        given = user.get(section, {})
        resolved[section] = {
            key: check(f"{section}.{key}", given[key]) if key in given else default
            for key, (default, check) in keys.items()
        }

    # Algorithm flags from the level and the mode.
    mode = resolved["boost"]["mode"]
    given_flags = {k: v for k, v in user.get("boost", {}).items() if k != "mode"}
    preset = _PRESETS[level]
    if mode == "auto":
        flags = dict(preset)
        overridden = {k: v for k, v in given_flags.items() if preset[k] != v}
        if overridden:
            warnings.warn(
                f"Boost mode 'auto' uses the {level} preset and ignores the flags "
                f"{overridden}; set \"mode\": \"manual\" to apply them.",
                BoostConfigWarning,
                stacklevel=3,
            )
    elif mode == "manual":
        flags = {**preset, **given_flags}
    elif mode == "enable_all":
        flags = dict.fromkeys(ALGORITHMS, True)
    else:  # disable_all
        flags = dict.fromkeys(ALGORITHMS, False)
    if flags["dim_reduce"]:
        flags = _exclusive_dim_reduce(flags if mode == "enable_all" else given_flags)
    resolved["boost"] = {"mode": mode, **flags}
    if flags["grad_freeze"] and resolved["grad_freeze"]["adaptive_depths"] == "auto":
        # An explicit param_groups keeps MindSpore's meaning: every depth runs.
        resolved["grad_freeze"]["adaptive_depths"] = "param_groups" not in user.get("grad_freeze", {})

    # Sections whose algorithm is off are kept (and validated) but are inert.
    inert = [
        s
        for s in user
        if s in ALGORITHMS
        and not flags[s]
        and any(v != SCHEMA[s][k][0] for k, v in resolved[s].items())
    ]
    if inert:
        warnings.warn(
            f"Config section(s) {inert} are set but their algorithm is disabled "
            f"(level {level}, mode {mode!r}); those values have no effect.",
            BoostConfigWarning,
            stacklevel=3,
        )
    return resolved


def _exclusive_dim_reduce(requested):
    """The flags with dim_reduce on: every other algorithm off, as in
    MindSpore (stage 2 replaces the optimizer and its train step, and trains
    the network unchanged), with a `NoEffectWarning` naming those that
    `requested` (the flags the user asked for) switched on."""
    dropped = [a for a in ALGORITHMS if a != "dim_reduce" and requested.get(a)]
    if dropped:
        warnings.warn(
            f"dim_reduce is exclusive (as in MindSpore): {dropped} are switched off while it is "
            "on, because stage 2 replaces the optimizer and the train step and trains the network "
            "unchanged. Switch dim_reduce off to use them.",
            NoEffectWarning,
            stacklevel=4,
        )
    return {**dict.fromkeys(ALGORITHMS, False), "dim_reduce": True}


def enabled_algorithms(config):
    """Names of the algorithms switched on in a resolved config, in order."""
    return [name for name in ALGORITHMS if config["boost"][name]]


# Algorithms that exist in this version. An enabled algorithm outside this set
# raises NotImplementedError where it is requested, never a silent no-op.
IMPLEMENTED = frozenset(ALGORITHMS)


def check_implemented(config):
    """Raises `NotImplementedError` when `config` enables a missing algorithm."""
    missing = [a for a in enabled_algorithms(config) if a not in IMPLEMENTED]
    if missing:
        raise not_implemented(missing)


def check_grad_freeze_values(values):
    """Validates a `grad_freeze` section-like dict; returns it with defaults filled in."""
    for key in values:
        if key not in SCHEMA["grad_freeze"]:
            raise _unknown("key of section 'grad_freeze'", key, SCHEMA["grad_freeze"])
    return {
        key: check(f"grad_freeze.{key}", values[key]) if key in values else default
        for key, (default, check) in SCHEMA["grad_freeze"].items()
    }
