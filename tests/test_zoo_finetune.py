"""The `finetune` workload: keras.io's transfer-learning flow in the bench.

A base pretrained inside the bench on the digits 0-4 (cached per seed),
frozen under a new head for the digits 5-9 (phase 1), then its top blocks
unfrozen and fine-tuned (phase 2), through `training.run_once` as plain
Keras and at O1: each phase trains exactly what plain Keras trains, the
curve runs on across the phases, `baseline-short` shortens both, and a
seed gives the same run twice.
"""

import dataclasses
import math
import warnings

import keras
import numpy as np
import pytest

import keras_boost as boost
from keras_boost.bench import catalog
from keras_boost.bench import results
from keras_boost.bench import schedule
from keras_boost.bench import training
from keras_boost.bench import zoo
from keras_boost.bench.recipe import FineTune
from keras_boost.bench.zoo import finetune

HEAD = {"head_logits/kernel", "head_logits/bias"}
# Width 8, not 4: torch 2.13's CPU kernel for the backward pass of a 1x1,
# stride-2 convolution from 4 channels of a channels-last input (the
# projection of stage 2) corrupts memory: it hangs, aborts or gives
# different runs for a seed (reproduced in plain torch, 2026-12-07).
TINY = dict(width=8, blocks=(1, 1), pretrain_epochs=1, epochs=3, fine_tune_epochs=2, unfreeze_blocks=1,
            samples=96, name="finetune_tiny")
TOP = {"stage2_block1_conv1/kernel", "stage2_block1_conv2/kernel", "stage2_block1_proj_conv/kernel"}
O1_UNCACHED = "O1+boost.mode=manual+boost.prefix_cache=false"
VARIANTS = ["baseline", "O1", O1_UNCACHED, "prefix-cache"]


def _values(model):
    return {v.path: np.array(keras.ops.convert_to_numpy(v)) for v in model.weights}


def _changed(before, after):
    return {path for path in before if not np.array_equal(before[path], after[path])}


@dataclasses.dataclass
class _RecordingFineTune(FineTune):
    """A `FineTune` that records the model being trained when phase 1 ends."""

    seen: list = dataclasses.field(default_factory=list)

    def unfreeze(self, model):
        self.seen.append((model, _values(model), int(model.optimizer.iterations),
                          float(keras.ops.convert_to_numpy(model.optimizer.learning_rate))))
        super().unfreeze(model)


def _recorded_run(variant, seed=0, short_ratio=0.7, **overrides):
    """`run_once` on the tiny workload; returns (record, initial weights,
    weights after phase 1, model) of the model it trained."""
    workload = finetune.finetune_workload(**{**TINY, **overrides})
    built, original = [], workload.build

    def build(seed):
        model = original(seed)
        built.append(_values(model))
        return model

    recording = _RecordingFineTune(**dataclasses.asdict(workload.fine_tune))
    workload = dataclasses.replace(workload, build=build, fine_tune=recording)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # LessBN's note on the pretrained BNs it keeps
        record = training.run_once(workload, variant, "float32", seed, short_ratio)
    (model, after_first, iterations, learning_rate), = recording.seen
    record["phase1_end"] = dict(iterations=iterations, learning_rate=learning_rate)
    return record, built[0], after_first, model


_RUNS = {}


def recorded_run(variant, seed=0):
    if (variant, seed) not in _RUNS:
        _RUNS[variant, seed] = _recorded_run(variant, seed)
    return _RUNS[variant, seed]


def test_digit_tasks_split_the_digits_in_two_five_class_tasks():
    (x_a, y_a), ((x_b, y_b), (x_test, y_test)) = finetune.digit_tasks()
    assert x_a.shape[1:] == x_b.shape[1:] == x_test.shape[1:] == (28, 28, 1)
    assert set(y_a) == set(y_b) == set(y_test) == set(range(5))
    assert len(x_a) == len(x_b) == 2000 and len(x_test) == 500
    assert not x_a.flags.writeable  # shared by every caller
    assert finetune.finetune_workload().data()[0][0] is x_b


def test_the_workload_is_keras_ios_recipe_and_is_registered():
    workload = catalog.WORKLOADS["finetune"]()
    assert zoo.WORKLOADS["finetune"] is finetune.finetune_workload
    assert (workload.epochs, workload.fine_tune.epochs, workload.batch_size) == (12, 8, 32)
    assert workload.fine_tune.learning_rate == workload.learning_rate / 10
    assert schedule.phase_epochs(workload) == [4, 8] and schedule.phase_epochs(workload, 0.75) == [3, 6]
    # Every layer phase 2 unfreezes is a convolution of the base (no BN).
    base, _ = finetune._base_and_classifier(0, 16, (2, 2, 2))
    layers = [base.get_layer(name) for name in workload.fine_tune.layers]
    assert all(isinstance(layer, keras.layers.Conv2D) for layer in layers) and len(layers) == 7
    assert results.workload_record(workload)["fine_tune"]["layers"] == list(workload.fine_tune.layers)


def test_top_block_convs_from_the_top_down_and_bad_count():
    assert finetune.top_block_convs((1, 1, 1)) == (
        "stage3_block1_conv1", "stage3_block1_conv2", "stage3_block1_proj_conv")
    assert finetune.top_block_convs((2,), count=2) == (
        "stage1_block2_conv1", "stage1_block2_conv2", "stage1_block1_conv1", "stage1_block1_conv2")
    with pytest.raises(ValueError, match=r"count must be an int in \[1, 3\] \(the base's blocks\), got 4"):
        finetune.top_block_convs((1, 1, 1), count=4)


def test_the_pretrained_base_is_cached_per_seed_and_nested_frozen_in_inference_mode():
    workload = finetune.finetune_workload(**TINY)
    first, again = workload.build(0), workload.build(0)
    assert first is not again
    assert all(np.array_equal(a, b) for a, b in zip(first.get_weights(), again.get_weights()))
    # Pretrained: neither the fresh initialization nor the fresh BN statistics.
    fresh, _ = finetune._base_and_classifier(0, TINY["width"], TINY["blocks"])
    base = first.get_layer("base")
    assert isinstance(base, keras.Model) and not base.trainable
    numpy = keras.ops.convert_to_numpy
    assert not np.array_equal(numpy(base.get_layer("stem_conv").kernel), numpy(fresh.get_layer("stem_conv").kernel))
    assert not np.allclose(numpy(base.get_layer("stem_bn").moving_mean), 0.0)
    # Changing a built model's weights (training does) leaves the cache alone.
    for variable in first.weights:
        variable.assign(np.zeros(variable.shape, variable.dtype))
    assert all(np.array_equal(a, b) for a, b in zip(workload.build(0).get_weights(), again.get_weights()))
    x = workload.data()[0][0][:32]
    # Frozen and called with training=False: the BNs normalize with their
    # moving statistics in training too.
    assert np.allclose(numpy(again(x, training=True)), numpy(again(x, training=False)), atol=1e-6)


@pytest.mark.parametrize("variant", VARIANTS)
def test_each_phase_trains_exactly_what_plain_keras_trains(variant):
    record, initial, after_first, model = recorded_run(variant)
    final = _values(model)
    assert set(initial) <= set(final) and model.get_layer("base").get_layer("stage2_block1_conv1")
    # Phase 1: only the new head (the base's BN statistics do not move).
    assert _changed(initial, after_first) & set(initial) == HEAD
    # Phase 2: the head and the convolutions of the unfrozen top block.
    assert _changed(after_first, final) & set(initial) == HEAD | TOP
    assert {v.path for v in model.trainable_variables} == HEAD | TOP
    assert record["phases"] == [1, 2] and record["epochs"] == 3
    if variant.startswith("O1"):
        # Phase 2's plain optimizer got the level's chain from BoostModel.compile.
        assert isinstance(model.optimizer, boost.BoostOptimizer) and model.optimizer.boost_level == "O1"
    if variant == O1_UNCACHED:
        # Gradient freezing's groups recomputed over the unfrozen top.
        assert model.freeze_planner.num_depths == 4  # one group per unfrozen conv, one for the head
    if variant == "O1":
        # Both phases fit on arrays with a frozen prefix: the level cached it
        # (the frozen base, then the base below the unfrozen top block).
        assert len(record["boost_summary"]) == 2
        for summary in record["boost_summary"]:
            assert "operations computed once" in summary and "gradient freezing not run" in summary


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_curve_runs_on_across_the_phases(variant):
    record, *_ = recorded_run(variant)
    times = [t for t, _ in record["curve"]]
    assert len(times) == record["epochs"] == 3 and times == sorted(times) and len(set(times)) == 3
    assert record["train_seconds"] == times[-1] <= record["fit_seconds"]
    results.validate_result({"version": results.RESULT_VERSION, "workload": {}, "environment": {},
                             "runs": [record]})
    steps = math.ceil(TINY["samples"] / 32)
    # Phase 1's own schedule ran to its end (cosine decayed to 0).
    assert record["phase1_end"]["iterations"] == steps
    assert record["phase1_end"]["learning_rate"] == pytest.approx(0.0, abs=1e-7)
    if variant == O1_UNCACHED:
        assert len(record["phase_freeze_depths"]) == 2
        assert record["freeze_depths"] == record["phase_freeze_depths"][-1]


def test_baseline_short_rescales_both_phases():
    workload = finetune.finetune_workload(**{**TINY, "epochs": 5, "fine_tune_epochs": 3})
    assert schedule.phase_epochs(workload) == [2, 3]
    assert schedule.phase_epochs(workload, 0.6) == [1, 2]  # 3 epochs: round(3 x 0.6) = 2 fine-tuning
    record, _, _, model = _recorded_run("baseline-short", short_ratio=0.6, epochs=5, fine_tune_epochs=3)
    assert record["phases"] == [1, 2] and len(record["curve"]) == 3
    steps = math.ceil(TINY["samples"] / 32)
    assert record["phase1_end"]["iterations"] == steps
    # Phase 2's schedule is the short one: it ends, decayed, with the run.
    assert int(model.optimizer.iterations) == 2 * steps
    assert float(keras.ops.convert_to_numpy(model.optimizer.learning_rate)) == pytest.approx(0.0, abs=1e-7)


@pytest.mark.parametrize("variant", ["baseline", "O1"])
def test_a_seed_gives_the_same_run_twice(variant):
    record, initial, _, model = recorded_run(variant)
    again, initial_again, _, model_again = _recorded_run(variant)
    assert [a for _, a in again["curve"]] == [a for _, a in record["curve"]]
    first, second = _values(model), _values(model_again)
    assert all(np.array_equal(first[p], second[p]) for p in first)
    assert all(np.array_equal(initial[p], initial_again[p]) for p in initial)
    # Another seed: another pretrained base (weights and BN statistics) and head.
    _, initial_other, _, model_other = recorded_run(variant, seed=1)
    for path in ("stem_conv/kernel", "stage2_block1_conv2/kernel", "stem_bn/moving_mean", "head_logits/kernel"):
        assert not np.array_equal(initial_other[path], initial[path]), path


def test_freezing_groups_the_unfrozen_top_of_a_nested_base_input_first():
    from keras_boost.algorithms.freezing import model_blocks

    workload = finetune.finetune_workload(**TINY)
    model = workload.build(0)
    workload.fine_tune.unfreeze(model)
    order = [block[0].path for block in model_blocks(model)]
    assert order == ["stage2_block1_conv1/kernel", "stage2_block1_conv2/kernel",
                     "stage2_block1_proj_conv/kernel", "head_logits/kernel"]


def test_quick_and_epochs_rescale_both_phases():
    import keras_boost_cli
    from keras_boost.bench import cli

    workload = finetune.finetune_workload()
    quick = cli._load_workload(keras_boost_cli.parse_args(["--workload", "finetune", "--quick"]))
    assert quick.epochs == 5 and schedule.phase_epochs(quick) == [2, 3]
    assert quick.warmup_epochs <= 1 and quick.fine_tune.warmup_epochs <= 1.5
    assert schedule.phase_epochs(workload.with_epochs(6)) == [2, 4]
    assert workload.with_epochs(workload.epochs) is workload
    with pytest.raises(SystemExit, match="needs epochs >= 2"):
        cli._load_workload(keras_boost_cli.parse_args(["--workload", "finetune", "--epochs", "1"]))
