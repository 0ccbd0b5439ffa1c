"""The `lm` workload (a miniature GPT on generated text, to a validation loss),
the loss metric of the bench (lower is better) and its wrap variants (the
plain model compiled with `boost.wrap`).

The generated text is deterministic and learnable (its bigram entropy is
far below uniform); the model is causal and seeded; a loss workload's
target, threshold, "beats" and paired differences turn the accuracy's
directions; a tiny LM benchmark of the baseline and two wrap variants runs
through the harness and its reports.
"""

import copy
import dataclasses
import math

import keras
import numpy as np
import pytest

import keras_boost_cli
from keras_boost.bench import catalog
from keras_boost.bench import cli
from keras_boost.bench import clock
from keras_boost.bench import harness
from keras_boost.bench import recipe
from keras_boost.bench import report
from keras_boost.bench import results
from keras_boost.bench import training
from keras_boost.bench import variants
from keras_boost.bench import zoo
from keras_boost.bench.zoo import lm

VOCABULARY_SIZE = len(lm.VOCABULARY)


# --- the data ----------------------------------------------------------------------


def test_grammar_text_is_deterministic_in_the_vocabulary_and_learnable():
    text = lm.grammar_text(seed=0, num_characters=50_000)
    assert len(text) == 50_000 and text == lm.grammar_text(seed=0, num_characters=50_000)
    assert text != lm.grammar_text(seed=1, num_characters=50_000)
    assert set(text) <= set(lm.VOCABULARY) and " . " in text
    ids = lm.encode(text)
    assert ids.dtype == np.int32 and ids.min() >= 0 and ids.max() < VOCABULARY_SIZE
    # Learnable structure: the previous character alone already says much more than uniform.
    entropy = lm.bigram_entropy(ids)
    assert entropy < 0.65 * math.log(VOCABULARY_SIZE)
    shuffled = np.random.default_rng(0).permutation(ids)  # the same characters, no order
    assert lm.bigram_entropy(shuffled) > entropy + 0.8
    with pytest.raises(ValueError, match="outside VOCABULARY"):
        lm.encode("Hello")


def test_lm_data_are_next_character_sequences_of_disjoint_windows():
    (x, y), (x_val, y_val) = lm.lm_data(num_characters=20_000, sequence_length=32, validation_fraction=0.1)
    windows = 20_000 // 33
    assert x.shape == y.shape == (windows - round(windows * 0.1), 32)
    assert x_val.shape == y_val.shape == (round(windows * 0.1), 32)
    assert {a.dtype for a in (x, y, x_val, y_val)} == {np.dtype("int32")}
    assert (x[:, 1:] == y[:, :-1]).all() and (x_val[:, 1:] == y_val[:, :-1]).all()  # targets: the next one
    ids = lm.encode(lm.grammar_text(0, 20_000))
    assert np.array_equal(x[1], ids[33:65]) and np.array_equal(y_val[-1], ids[windows * 33 - 32:windows * 33])
    with pytest.raises(ValueError, match="validation_fraction"):
        lm.lm_data(validation_fraction=1.0)


# --- the model ---------------------------------------------------------------------


def test_miniature_gpt_is_causal_seeded_and_written_out_in_standard_layers():
    model = lm.miniature_gpt(VOCABULARY_SIZE, 16, embed_dim=16, num_heads=2, ff_dim=16, seed=0)
    tokens = np.random.default_rng(0).integers(0, VOCABULARY_SIZE, (2, 16)).astype("int32")
    logits = keras.ops.convert_to_numpy(model(tokens))
    assert logits.shape == (2, 16, VOCABULARY_SIZE)
    changed = tokens.copy()
    changed[:, 10] = (changed[:, 10] + 1) % VOCABULARY_SIZE
    other = keras.ops.convert_to_numpy(model(changed))
    np.testing.assert_allclose(other[:, :10], logits[:, :10], atol=1e-5)  # the past does not see the future
    assert not np.allclose(other[:, 10:], logits[:, 10:])
    names = {layer.name for layer in model.layers}
    for block in (1, 2):
        for part in ("attention", "attention_norm", "ffn_dense1", "ffn_dense2", "ffn_norm"):
            assert f"block{block}_{part}" in names
    assert isinstance(model.get_layer("block1_attention"), keras.layers.MultiHeadAttention)
    again = lm.miniature_gpt(VOCABULARY_SIZE, 16, embed_dim=16, num_heads=2, ff_dim=16, seed=0)
    assert all(np.array_equal(keras.ops.convert_to_numpy(a), keras.ops.convert_to_numpy(b))
               for a, b in zip(model.weights, again.weights))
    query = keras.ops.convert_to_numpy(model.get_layer("block1_attention").query_dense.kernel)
    key = keras.ops.convert_to_numpy(model.get_layer("block1_attention").key_dense.kernel)
    assert not np.array_equal(query, key)  # each projection initialized with a seed of its own
    with pytest.raises(ValueError, match="num_blocks must be an int >= 1"):
        lm.miniature_gpt(VOCABULARY_SIZE, 16, num_blocks=0)


def test_the_lm_workload_is_registered_with_its_recipe_and_loss_metric():
    workload = catalog.WORKLOADS["lm"]()
    assert zoo.WORKLOADS["lm"] is lm.lm_workload
    assert (workload.name, workload.optimizer, workload.metric, workload.lower_is_better) == (
        "lm", "adamw", "loss", True)
    assert workload.warmup_epochs > 0 and 0 < workload.target < math.log(VOCABULARY_SIZE)
    (x, y), (x_val, y_val) = workload.data()
    assert x.shape[1:] == y.shape[1:] == x_val.shape[1:] == (64,) and len(x) > 2000 and len(x_val) > 200
    model = workload.build(0)
    assert model.output_shape == (None, None, VOCABULARY_SIZE)  # any length up to 64
    assert keras.ops.convert_to_numpy(model(x[:2, :16])).shape == (2, 16, VOCABULARY_SIZE)
    # `keras-boost bench --workload lm` finds it, and --epochs shortens it.
    loaded = cli._load_workload(keras_boost_cli.parse_args(["--workload", "lm", "--epochs", "2"]))
    assert (loaded.name, loaded.epochs, loaded.metric) == ("lm", 2, "loss")


# --- the loss metric ---------------------------------------------------------------


def test_workload_metric_validation():
    def build(seed):
        return None

    assert recipe.Workload("w", build, build, target=3.5, metric="loss").target == 3.5  # a loss may exceed 1
    with pytest.raises(ValueError, match="target must be a loss > 0"):
        recipe.Workload("w", build, build, target=0.0, metric="loss")
    with pytest.raises(ValueError, match=r"target must be an accuracy in \[0, 1\]"):
        recipe.Workload("w", build, build, target=1.5)
    with pytest.raises(ValueError, match=r"metric must be one of \['accuracy', 'loss'\]"):
        recipe.Workload("w", build, build, metric="perplexity")
    assert results.workload_record(catalog.tiny_workload()).get("metric") is None  # as results had it
    assert results.workload_record(lm.lm_workload())["metric"] == "loss"


def test_time_to_a_loss_target_and_the_cross_entropy():
    curve = [[10.0, 2.0], [20.0, 1.4], [30.0, 1.5], [40.0, 1.3]]
    assert clock.time_to_target(curve, 1.5, lower_is_better=True) == 20.0  # first at or below
    assert clock.time_to_target(curve, 1.35, lower_is_better=True) == 40.0
    assert clock.time_to_target(curve, 1.2, lower_is_better=True) is None
    assert clock.time_to_target(curve, 1.4 + 1e-12, lower_is_better=True) == 20.0
    assert clock.time_to_target([[1.0, 0.9], [2.0, 0.95]], 0.93) == 2.0  # accuracy: at or above
    assert clock.sparse_cross_entropy(np.zeros((3, 5, 7)), np.zeros((3, 5), int)) == pytest.approx(math.log(7))
    logits = np.random.default_rng(0).normal(size=(4, 6, 5))
    labels = np.random.default_rng(1).integers(0, 5, (4, 6))
    expected = keras.ops.convert_to_numpy(keras.losses.SparseCategoricalCrossentropy(from_logits=True)(
        labels, logits.astype("float32")))
    assert clock.sparse_cross_entropy(logits, labels) == pytest.approx(float(expected), rel=1e-5)


def _loss_run(variant, seed, curve):
    return {
        "variant": variant, "precision": "float32", "seed": seed, "epochs": len(curve), "steps": 10 * len(curve),
        "fit_seconds": curve[-1][0] + 1.0, "train_seconds": float(curve[-1][0]), "steps_per_second": 10.0,
        "curve": [[float(t), v] for t, v in curve],
        "time_to_target": clock.time_to_target(curve, 1.0, lower_is_better=True), "final_loss": curve[-1][1],
    }


# Target 1.0. The baseline's median final loss is 0.90: the threshold is 0.92.
LOSS_RUNS = [
    _loss_run("baseline", 0, [[10, 1.6], [20, 1.05], [30, 0.95], [40, 0.88]]),
    _loss_run("baseline", 1, [[10, 1.7], [20, 1.10], [30, 0.97], [40, 0.90]]),
    _loss_run("baseline", 2, [[10, 1.6], [20, 1.00], [30, 0.96], [40, 0.91]]),
    _loss_run("baseline-short", 0, [[10, 1.6], [20, 1.0], [30, 0.95]]),
    _loss_run("baseline-short", 1, [[10, 1.6], [20, 1.0], [30, 0.96]]),
    _loss_run("baseline-short", 2, [[10, 1.6], [20, 1.0], [30, 0.97]]),
    # As fast as baseline-short, lower loss: beats it; reaches 0.92 at 30 s.
    _loss_run("wrap-O1", 0, [[10, 1.5], [20, 0.99], [30, 0.91]]),
    _loss_run("wrap-O1", 1, [[10, 1.5], [20, 0.98], [30, 0.92]]),
    _loss_run("wrap-O1", 2, [[10, 1.5], [20, 0.99], [30, 0.94]]),
    # Faster but a higher loss than baseline-short: does not beat it; never reaches 0.92.
    _loss_run("O1", 0, [[8, 1.6], [16, 1.1], [24, 0.99]]),
    _loss_run("O1", 1, [[8, 1.6], [16, 1.1], [24, 0.98]]),
    _loss_run("O1", 2, [[8, 1.6], [16, 1.1], [24, 0.99]]),
]


def _loss_result():
    return {
        "version": results.RESULT_VERSION,
        "workload": {"name": "hand-lm", "epochs": 4, "batch_size": 64, "learning_rate": 3e-3, "target": 1.0,
                     "warmup_epochs": 1.0, "momentum": 0.9, "weight_decay": 0.01, "metric": "loss"},
        "short_ratio": 0.75,
        "environment": {"backend": "jax", "backend_version": "0.x", "keras_version": "3.x", "processor": "cpu",
                        "cpu_model": "Some CPU", "nproc": 2, "date": "2026-12-07"},
        "runs": copy.deepcopy(LOSS_RUNS),
    }


def test_a_loss_result_validates_and_names_a_bad_loss():
    assert results.validate_result(_loss_result())
    bad = _loss_result()
    bad["runs"][0]["final_loss"] = -0.1
    with pytest.raises(ValueError, match=r"runs\[0\].final_loss must be >= 0"):
        results.validate_result(bad)
    del bad["runs"][0]["final_loss"]
    with pytest.raises(ValueError, match=r"runs\[0\].final_loss must be float"):
        results.validate_result(bad)


def test_the_loss_threshold_is_the_baselines_final_loss_plus_the_rise_and_lower_is_better():
    result = _loss_result()
    assert report.margin(result) == report.LOSS_RISE == 0.02
    rows = {r["variant"]: r for r in report.summarize(result)}
    base, short, wrap, o1 = rows["baseline"], rows["baseline-short"], rows["wrap-O1"], rows["O1"]
    assert base["final_loss_spread"] == {"median": 0.90, "min": 0.88, "max": 0.91}
    assert "final_accuracy" not in base
    assert base["threshold"] == pytest.approx(0.92)
    assert base["time_to_target"] == [30.0, 30.0, 20.0] and base["reached"] == "3/3"
    assert base["time_to_threshold"] == [40.0, 40.0, 40.0]
    assert wrap["time_to_threshold"] == [30.0, 30.0, None] and wrap["threshold_reached"] == "2/3"
    assert wrap["time_to_threshold_vs_baseline"] == pytest.approx(0.75)
    assert wrap["beats_short_baseline"] is True        # equal time, lower loss
    assert o1["beats_short_baseline"] is False         # faster, but a higher loss
    assert o1["time_to_threshold_vs_baseline"] == math.inf
    assert short["beats_short_baseline"] is None
    assert report.beats(30, 0.92, 30, 0.96, lower_is_better=True)
    assert not report.beats(30, 0.92, 30, 0.96)        # as accuracies, 0.92 is worse
    # A stricter rise: the threshold moves down with it.
    assert {r["variant"]: r for r in report.summarize(result, 0.0)}["baseline"]["threshold"] == pytest.approx(0.90)
    pairs = {r["variant"]: r for r in report.paired(result)}
    assert pairs["wrap-O1"]["loss_difference"] == pytest.approx([0.03, 0.02, 0.03])
    assert "accuracy_difference" not in pairs["wrap-O1"]


def test_loss_reports_name_the_loss_and_its_threshold(tmp_path):
    result = _loss_result()
    table = report.markdown_table(result)
    assert "target validation loss 1.0" in table and "plus 0.02 (float32 0.9200)" in table
    assert "| variant | precision | final val. loss | train time (s) |" in table
    assert "time to base +0.02 (s)" in table and "final val. loss − baseline (nats)" in table
    assert "| wrap-O1 | float32 | 0.92 [0.91, 0.94] |" in table
    quick = report.quick_table(result)
    assert quick.splitlines()[0] == ("| variant | final val. loss | train time (s) | × baseline | "
                                     "time to base +0.02 (s) | beats short |")
    for column in ("final val. loss", "time to base +0.02 (s)", "--loss-rise"):
        assert column in keras_boost_cli.BENCH_EPILOG or column in _bench_help(), column
    line = report.verdict(result)
    assert "wrap-O1 trained in 0.75x the baseline's time and ended +0.020 from its final validation loss" in line
    pytest.importorskip("matplotlib")
    report.plot(result, tmp_path / "loss.png")
    assert (tmp_path / "loss.png").read_bytes()[:4] == b"\x89PNG"


def _bench_help():
    parser = keras_boost_cli.build_parser()
    return parser._subparsers._group_actions[0].choices["bench"].format_help()


def test_the_command_line_takes_a_loss_rise():
    assert keras_boost_cli.parse_args(["--loss-rise", "0.05"]).accuracy_drop == 0.05
    assert keras_boost_cli.parse_args([]).accuracy_drop is None  # the metric's default
    with pytest.raises(SystemExit):
        keras_boost_cli.parse_args(["--loss-rise", "1.5"])


# --- the wrap variants ---------------------------------------------------------------


def test_wrap_variants_are_the_optimizer_door_with_the_override_syntax():
    assert variants.variant_spec("wrap-O1") == ("O1", variants.LEVEL_CONFIGS["O1"])
    assert variants.variant_spec("wrap-O2")[0] == "O2"
    assert variants.variant_spec("wrap-O0") == ("O0", {"boost": {"mode": "manual"}})
    assert [variants.variant_door(v) for v in ("wrap-O1", "O1", "less_bn", "baseline", "wrap-O0+boost.adasum=true")] \
        == ["wrap", "model", "model", None, "wrap"]
    # One optimizer-level algorithm alone through wrap: a switch of the config's boost section.
    level, config = variants.variant_spec("wrap-O0+boost.adasum=true")
    assert (level, config) == ("O0", {"boost": {"mode": "manual", "adasum": True}})
    assert variants.WRAP_CONFIGS["wrap-O0"] == ("O0", {"boost": {"mode": "manual"}})  # not mutated
    level, config = variants.variant_spec("wrap-O1+recipe.batch_size=32")
    assert level == "O1" and "recipe" not in config
    with pytest.raises(ValueError, match="no_such_switch"):
        variants.variant_spec("wrap-O0+boost.no_such_switch=true")
    assert not any(v.startswith("wrap-") for v in variants.DEFAULT_VARIANTS)
    assert "wrap-O1" in _bench_help() and "wrap-O1" in variants.__doc__


def _tiny_lm():
    """The lm workload cut to a few seconds: 128 / 32 sequences of 16, a narrow model, 2 epochs of 4 steps."""
    (x, y), (x_val, y_val) = lm.lm_data(num_characters=6_000, sequence_length=16)
    return dataclasses.replace(
        lm.lm_workload().with_epochs(2), batch_size=32,
        data=lambda: ((x[:128], y[:128]), (x_val[:32], y_val[:32])),
        build=lambda seed: lm.miniature_gpt(VOCABULARY_SIZE, 16, embed_dim=8, num_heads=2, ff_dim=8, seed=seed),
    )


def test_a_tiny_lm_benchmark_of_the_baseline_and_the_wrap_door_runs_and_reports():
    workload = _tiny_lm()
    result = harness.run_benchmark(workload, ["baseline", "wrap-O1"], ["float32"], seeds=1, progress=False,
                                   burn_in_fit=False)
    results.validate_result(result)
    assert result["workload"]["metric"] == "loss"
    runs = {r["variant"]: r for r in result["runs"]}
    for run in runs.values():
        assert "skipped" not in run and "final_accuracy" not in run
        assert run["steps"] == 8 and len(run["curve"]) == 2
        assert 0 < run["final_loss"] < math.log(VOCABULARY_SIZE) + 0.5  # nats per character
    assert "optimizer_chain" not in runs["baseline"]
    assert "GradientCentralization > AdamW" in runs["wrap-O1"]["optimizer_chain"]
    assert "boost_summary" not in runs["wrap-O1"]  # no BoostModel
    table = report.markdown_table(result)
    assert "| wrap-O1 | float32 |" in table and "final val. loss" in table


def test_a_switch_override_puts_one_algorithm_alone_in_the_wrap_chain():
    spec = variants.variant_spec("wrap-O0+boost.adasum=true")
    chain = training._wrap(keras.optimizers.AdamW(1e-3), spec)
    assert repr(chain).startswith("<BoostOptimizer level='O0': AdaSum > AdamW")
    assert repr(training._wrap(keras.optimizers.AdamW(1e-3), variants.variant_spec("wrap-O0"))) == (
        "<BoostOptimizer level='O0': AdamW>")  # wrap-O0 alone: a pass-through
