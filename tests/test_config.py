"""Config resolution: presets, modes, validation (pure Python)."""

import json
import warnings

import pytest

import keras_boost as boost
from keras_boost import config as cfg

FLAGS = cfg.ALGORITHMS


def flags(resolved):
    return {k: v for k, v in resolved["boost"].items() if k != "mode"}


@pytest.mark.parametrize(
    "level, on",
    [("O0", set()), ("O1", {"less_bn", "grad_freeze"}), ("O2", {"less_bn", "grad_freeze", "adasum"})],
)
def test_presets_are_mindspore_plus_fused_batch_norm_and_prefix_cache(level, on):
    # MindSpore's flags, plus keras_boost's fused_batch_norm and prefix_cache
    # wherever a level enables anything (they change kernels and what is
    # computed once, not the training's numbers).
    resolved = cfg.resolve_config(level)
    expected = {name: name in on for name in FLAGS} | {"fused_batch_norm": bool(on), "prefix_cache": bool(on)}
    assert flags(resolved) == expected
    assert resolved["boost"]["mode"] == "auto"


def test_resolved_config_is_complete_with_mindspore_defaults():
    resolved = boost.AutoBoost("O1").config
    assert set(resolved) == set(cfg.SCHEMA)
    for section, keys in cfg.SCHEMA.items():
        assert set(resolved[section]) == set(keys)
    assert resolved["grad_freeze"] == {
        "param_groups": 10, "freeze_type": 1, "freeze_p": 0.7, "total_steps": 65536,
        "seed": None, "adaptive_depths": True, "min_run_saving": 0.05, "depths": "auto",
    }
    # gc_flag "auto" (an extension): GC only on a model with BatchNormalization;
    # fn_flag False, unlike MindSpore: the head cost MobileNetV2 1.15-1.95 points.
    assert resolved["less_bn"] == {"fn_flag": False, "gc_flag": "auto", "remove_pretrained_bn": False,
                                   "exclude_patterns": ()}
    # device_number: "auto" (the strategy's replicas per worker), not
    # MindSpore's hard-coded Ascend server of 8, which disables AdaSum below 16.
    # precision (an extension): None keeps the model's own dtype policy.
    assert resolved["common"] == {"gradient_split_groups": None, "device_number": "auto", "precision": None}
    assert resolved["adasum"] == {"reduce_on": "grad", "hierarchical": False, "exchange": "auto", "norm_bound": True}
    assert resolved["grad_accumulation"] == {"grad_accumulation_step": 1}
    assert resolved["dim_reduce"]["n_components"] == 32
    assert resolved["dim_reduce"]["timeout"] == 1800


def test_auto_mode_ignores_flags_and_says_so():
    with pytest.warns(cfg.BoostConfigWarning, match="ignores the flags"):
        resolved = cfg.resolve_config("O1", {"boost": {"adasum": True}})
    assert resolved["boost"]["adasum"] is False


def test_manual_mode_overrides_given_flags_only():
    resolved = cfg.resolve_config("O1", {"boost": {"mode": "manual", "adasum": True, "less_bn": False}})
    assert flags(resolved) == {**dict.fromkeys(FLAGS, False), "grad_freeze": True, "adasum": True,
                              "fused_batch_norm": True, "prefix_cache": True}


def test_manual_mode_does_not_mutate_the_presets():
    cfg.resolve_config("O1", {"boost": {"mode": "manual", "grad_freeze": False}})
    assert cfg.resolve_config("O1")["boost"]["grad_freeze"] is True


def test_disable_all():
    resolved = cfg.resolve_config("O1", {"boost": {"mode": "disable_all"}})
    assert flags(resolved) == dict.fromkeys(FLAGS, False)


def test_bad_mode_names_the_valid_ones():
    with pytest.raises(ValueError, match="'auto', 'manual', 'enable_all', 'disable_all'"):
        cfg.resolve_config("O0", {"boost": {"mode": "fast"}})


@pytest.mark.parametrize("level", ["O3", "o1", None, 1])
def test_bad_level(level):
    with pytest.raises(ValueError, match=r"Valid levels: \['O0', 'O1', 'O2'\]"):
        boost.AutoBoost(level)


def test_unknown_section_suggests_closest():
    with pytest.raises(ValueError, match="Unknown section 'grad_freez'.*Did you mean 'grad_freeze'"):
        cfg.resolve_config("O0", {"grad_freez": {}})


@pytest.mark.parametrize(
    "section, key, suggestion",
    [
        ("dim_reduce", "n_component", "n_components"),  # MindSpore tutorial typo
        ("common", "device_num", "device_number"),  # MindSpore tutorial typo
        ("boost", "lessbn", "less_bn"),
    ],
)
def test_unknown_key_suggests_closest(section, key, suggestion):
    with pytest.raises(ValueError, match=f"Unknown key of section '{section}' '{key}'.*'{suggestion}'"):
        cfg.resolve_config("O0", {section: {key: 1}})


@pytest.mark.parametrize(
    "section, key, value, error, message",
    [
        ("grad_freeze", "freeze_p", 0.0, ValueError, r"freeze_p must be in \(0.0, 1.0\)"),
        ("grad_freeze", "freeze_p", 1.0, ValueError, r"freeze_p must be in \(0.0, 1.0\)"),
        ("grad_freeze", "freeze_p", "0.5", TypeError, "freeze_p must be a number"),
        ("grad_freeze", "freeze_p", float("nan"), ValueError, "freeze_p must be in"),
        ("grad_freeze", "param_groups", 0, ValueError, "param_groups must be >= 1"),
        ("grad_freeze", "param_groups", 2.0, TypeError, "param_groups must be an int"),
        ("grad_freeze", "param_groups", True, TypeError, "param_groups must be an int"),
        ("grad_freeze", "freeze_type", 2, ValueError, r"freeze_type must be one of \[0, 1\]"),
        ("grad_freeze", "total_steps", 0, ValueError, "total_steps must be >= 1"),
        ("grad_accumulation", "grad_accumulation_step", 0, ValueError, "grad_accumulation_step must be >= 1"),
        ("dim_reduce", "n_components", 0, ValueError, "n_components must be >= 1"),
        ("dim_reduce", "rho", 1.5, ValueError, r"rho must be in \(0.0, 1.0\)"),
        ("dim_reduce", "timeout", -1, ValueError, "timeout must be in"),
        ("dim_reduce", "pca_mat_path", 3, TypeError, "pca_mat_path must be a path"),
        ("less_bn", "fn_flag", 1, TypeError, "fn_flag must be a bool"),
        ("boost", "adasum", "yes", TypeError, "adasum must be a bool"),
        ("common", "device_number", 0, ValueError, "device_number must be >= 1"),
        ("common", "device_number", "all", TypeError, "device_number must be 'auto' or an int"),
        ("adasum", "reduce_on", "weights", ValueError, "reduce_on must be one of"),
        ("adasum", "exchange", "ring", ValueError, "exchange must be one of"),
        ("common", "gradient_split_groups", 50, TypeError, "gradient_split_groups must be None or a list"),
        ("common", "gradient_split_groups", [100, 50], ValueError, "strictly increasing"),
    ],
)
def test_value_checks(section, key, value, error, message):
    with pytest.raises(error, match=message):
        cfg.resolve_config("O0", {"boost": {"mode": "manual"}, section: {key: value}})


def test_total_steps_auto_and_none():
    on = {"boost": {"mode": "manual", "grad_freeze": True}}
    assert cfg.resolve_config("O0", {**on, "grad_freeze": {"total_steps": None}})["grad_freeze"]["total_steps"] == "auto"
    assert cfg.resolve_config("O0", {**on, "grad_freeze": {"total_steps": "auto"}})["grad_freeze"]["total_steps"] == "auto"


def test_section_must_be_a_dict():
    with pytest.raises(TypeError, match="Section 'grad_freeze' must be a dict"):
        cfg.resolve_config("O1", {"grad_freeze": [1]})


def test_config_must_be_dict_or_path():
    with pytest.raises(TypeError, match="must be None, a dict or a path"):
        boost.AutoBoost("O0", 42)
    with pytest.raises(ValueError, match="neither a dict nor an existing JSON file"):
        boost.AutoBoost("O0", "/nonexistent/boost.json")


def test_json_file(tmp_path):
    path = tmp_path / "boost.json"
    path.write_text(json.dumps({"grad_freeze": {"total_steps": 123, "freeze_p": 0.5}}))
    ab = boost.AutoBoost("O1", str(path))
    assert ab.config["grad_freeze"]["total_steps"] == 123
    assert ab.config["grad_freeze"]["freeze_p"] == 0.5
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="is not valid JSON"):
        boost.AutoBoost("O1", bad)


def test_section_of_disabled_algorithm_warns():
    with pytest.warns(cfg.BoostConfigWarning, match=r"\['grad_freeze'\] are set but their algorithm is disabled"):
        resolved = cfg.resolve_config("O0", {"grad_freeze": {"total_steps": 10}})
    assert resolved["grad_freeze"]["total_steps"] == 10  # kept, validated, inert


@pytest.mark.parametrize("level, config, named", [
    ("O1", {"boost": {"mode": "manual", "dim_reduce": True, "less_bn": True, "grad_accumulation": True,
                      "adasum": False}},
     r"\['less_bn', 'grad_accumulation'\] are switched off"),
    ("O0", {"boost": {"mode": "enable_all"}},
     r"\['less_bn', 'grad_freeze', 'adasum', 'grad_accumulation', 'loss_scale_group', 'fused_batch_norm', "
     r"'prefix_cache', 'orthogonal_updates', 'cautious', 'seq_length_warmup', 'selective_backprop'\]"),
])
def test_dim_reduce_is_exclusive_and_names_what_it_switches_off(level, config, named):
    with pytest.warns(boost.NoEffectWarning, match=named):
        ab = boost.AutoBoost(level, config)
    assert ab.enabled == ["dim_reduce"]
    assert flags(ab.config) == {**dict.fromkeys(FLAGS, False), "dim_reduce": True}


def test_dim_reduce_switches_the_preset_off_quietly():
    # Only what the user asked for is named; the level's preset just goes.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ab = boost.AutoBoost("O2", {"boost": {"mode": "manual", "dim_reduce": True}})
    assert ab.enabled == ["dim_reduce"]


def test_not_a_singleton_and_input_not_mutated():
    user = {"boost": {"mode": "manual", "adasum": True}}
    a = boost.AutoBoost("O1", user)
    b = boost.AutoBoost("O0")
    assert a.config["boost"]["adasum"] is True and b.config["boost"]["adasum"] is False
    assert user == {"boost": {"mode": "manual", "adasum": True}}
    a.config["boost"]["adasum"] = False  # .config is a copy
    assert a.config["boost"]["adasum"] is True


def test_resolution_is_idempotent_and_json_round_trips():
    ab = boost.AutoBoost("O2", {"boost": {"mode": "manual", "grad_accumulation": True}, "grad_accumulation": {"grad_accumulation_step": 4}})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = boost.AutoBoost("O2", json.loads(ab.to_json()))
    assert again.config == ab.config
    assert ab.enabled == ["less_bn", "grad_freeze", "adasum", "grad_accumulation", "fused_batch_norm", "prefix_cache"]
