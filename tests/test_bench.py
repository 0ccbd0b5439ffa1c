"""The benchmark harness end to end on a seconds-long workload."""

import argparse
import copy
import importlib
import importlib.util
import json
import math
import os
import pathlib
import subprocess
import sys

import keras
import numpy as np
import pytest

import keras_boost as boost
import keras_boost_cli
from conftest import requires_tensorflow
from keras_boost import bench
from keras_boost.bench import cli
from keras_boost.bench import catalog
from keras_boost.bench import clock
from keras_boost.bench import harness
from keras_boost.bench import pipeline
from keras_boost.bench import recipe
from keras_boost.bench import report
from keras_boost.bench import results
from keras_boost.bench import schedule
from keras_boost.bench import training
from keras_boost.bench import variants


def _bench(argv):
    """`keras-boost bench argv`, in this process; returns the result."""
    return cli.run(keras_boost_cli.parse_args(argv))


@pytest.fixture(scope="module")
def tiny_result(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    result = _bench(["--workload", "tiny", "--variants", "baseline,baseline-short,grad_freeze,adasum",
                      "--short-ratio", "0.5", "--precisions", "float32", "--seeds", "1",
                      "--output-dir", str(out), "--no-progress"])
    return result, out


def test_harness_writes_json_table_and_png(tiny_result):
    result, out = tiny_result
    stem = out / f"bench_tiny_{result['environment']['backend']}"
    loaded = report.load_json(stem.with_suffix(".json"))
    assert [r["variant"] for r in loaded["runs"]] == ["baseline", "baseline-short", "grad_freeze", "adasum"]
    table = stem.with_suffix(".md").read_text()
    assert "| grad_freeze | float32 |" in table and "| adasum | float32 |" in table
    png = stem.with_suffix(".png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
    assert not list(out.glob("*_partial.json*"))  # removed once the whole result is written


def test_interrupted_benchmark_keeps_the_finished_runs(tmp_path, monkeypatch):
    def fake_run(workload, variant, precision, seed, short_ratio=0.8):
        if variant == "O1":
            raise KeyboardInterrupt
        return {"variant": variant, "precision": precision, "seed": seed, "skipped": "fake"}

    monkeypatch.setattr(harness, "run_once", fake_run)
    with pytest.raises(KeyboardInterrupt):
        _bench(["--workload", "tiny", "--variants", "baseline,baseline-short,O1", "--short-ratio", "0.5",
                 "--precisions", "float32",
                 "--output-dir", str(tmp_path), "--no-progress", "--no-burn-in"])
    (partial,) = tmp_path.glob("*_partial.json")
    saved = report.load_json(partial)
    assert [r["variant"] for r in saved["runs"]] == ["baseline", "baseline-short"]


def test_runs_record_what_they_measured(tiny_result):
    result, _ = tiny_result
    runs = {r["variant"]: r for r in result["runs"]}
    assert runs["baseline"]["epochs"] == 2 and runs["baseline-short"]["epochs"] == 1  # round(2 * 0.5)
    assert runs["baseline"]["steps"] == 2 * 8  # 512 images, batch 64
    for name in ("baseline", "grad_freeze"):
        run = runs[name]
        assert len(run["curve"]) == run["epochs"]
        assert run["curve"][-1][0] == run["train_seconds"] <= run["fit_seconds"]
        assert run["steps_per_second"] > 0
    # One replica: AdaSum runs, as the identity, and the record says so.
    assert "skipped" not in runs["adasum"] and "identity" in runs["adasum"]["note"]
    depths = runs["grad_freeze"]["freeze_depths"]
    assert set(depths) == {"traced", "dropped", "declined", "step_ms", "trace_s", "switched_off"}
    assert set(depths["step_ms"]) == set(depths["trace_s"]) == {str(d) for d in depths["traced"]}
    assert depths["step_ms"]["0"] > 0  # depth 0 runs first and is timed
    # Whether planner rule 6 switches freezing off in 16 steps depends on the
    # step times measured; when it does, the record says why.
    assert depths["switched_off"] is None or "below min_run_saving=0.05" in depths["switched_off"]
    assert "freeze_depths" not in runs["baseline"]
    assert result["burn_in"] is True and result["version"] == results.RESULT_VERSION


def test_bench_files_get_the_mode_open_gives(tiny_result):
    result, out = tiny_result
    umask = os.umask(0)
    os.umask(umask)
    stem = out / f"bench_tiny_{result['environment']['backend']}"
    for suffix in (".json", ".md", ".png"):
        assert stem.with_suffix(suffix).stat().st_mode & 0o777 == 0o666 & ~umask, suffix


def test_validate_result_names_the_bad_field(tiny_result):
    result, _ = tiny_result
    bad = copy.deepcopy(result)
    bad["runs"][0]["final_accuracy"] = 1.5
    with pytest.raises(ValueError, match=r"runs\[0\].final_accuracy out of \[0, 1\]"):
        results.validate_result(bad)
    bad = copy.deepcopy(result)
    bad["runs"][1]["steps_per_second"] = "fast"
    with pytest.raises(ValueError, match=r"runs\[1\].steps_per_second must be float"):
        results.validate_result(bad)
    bad = copy.deepcopy(result)
    del bad["environment"]
    with pytest.raises(ValueError, match="lacks 'environment'"):
        results.validate_result(bad)
    json.dumps(result)  # plain JSON types only


def test_variant_recipe_overrides_change_the_recipe_and_keep_the_variant_plain():
    tiny = catalog.tiny_workload()
    name = "baseline+recipe.batch_size=128+recipe.learning_rate=0.1"
    assert variants.variant_spec(name) is None
    changed = variants.variant_recipe(name, tiny)
    assert (changed.batch_size, changed.learning_rate) == (128, 0.1)
    assert (tiny.batch_size, tiny.learning_rate) == (64, 0.05)  # not mutated
    assert variants.variant_recipe("O1", tiny) is tiny
    level, config = variants.variant_spec("O1+grad_freeze.freeze_p=0.5+recipe.batch_size=128")
    assert level == "O1" and "recipe" not in config and config["grad_freeze"]["freeze_p"] == 0.5
    with pytest.raises(ValueError, match=r"recipe field\(s\) \['epochs'\]; valid: \['batch_size'"):
        variants.variant_recipe("baseline+recipe.epochs=3", tiny)
    with pytest.raises(ValueError, match="batch_size must be an int >= 1, got 0"):
        variants.variant_recipe("baseline+recipe.batch_size=0", tiny)
    with pytest.raises(ValueError, match="Unknown variant 'baseline\\+less_bn.gc_flag=false'"):
        variants.variant_spec("baseline+less_bn.gc_flag=false")
    run = training.run_once(tiny.with_epochs(1), "baseline+recipe.batch_size=128", "float32", seed=0)
    assert run["steps"] == math.ceil(len(tiny.data()[0][0]) / 128)


def test_variant_config_overrides():
    level, config = variants.variant_spec("O1+grad_freeze.freeze_p=0.5+grad_freeze.freeze_type=0")
    assert level == "O1"
    assert config == {"grad_freeze": {"total_steps": "auto", "freeze_p": 0.5, "freeze_type": 0}}
    assert variants.LEVEL_CONFIGS["O1"] == {"grad_freeze": {"total_steps": "auto"}}  # not mutated
    level, config = variants.variant_spec("less_bn+less_bn.gc_flag=false")
    assert (level, config["less_bn"]) == ("O0", {"gc_flag": False})
    with pytest.raises(ValueError, match="expected section.key=value"):
        variants.variant_spec("O1+freeze_p=0.5")
    with pytest.raises(ValueError, match="freeze_p"):
        variants.variant_spec("O1+grad_freeze.freeze_p=1.5")
    with pytest.raises(ValueError, match="Unknown variant 'baseline\\+x'"):
        variants.variant_spec("baseline+x")
    # A flag needs manual mode; auto mode would run the level unchanged.
    with pytest.raises(ValueError, match=r"sets the flags \['less_bn'\], which boost mode 'auto' ignores"):
        variants.variant_spec("O1+boost.less_bn=false")
    level, config = variants.variant_spec("O1+boost.mode=manual+boost.less_bn=false")
    assert config["boost"] == {"mode": "manual", "less_bn": False}


def test_split_variants_keeps_json_lists_whole():
    text = 'baseline, O1+less_bn.exclude_patterns=["InvertedResidual","InvertedResidual3"],,O1'
    names = variants.split_variants(text)
    assert names == ["baseline", 'O1+less_bn.exclude_patterns=["InvertedResidual","InvertedResidual3"]', "O1"]
    level, config = variants.variant_spec(names[1])
    assert config["less_bn"] == {"exclude_patterns": ["InvertedResidual", "InvertedResidual3"]}
    assert variants.split_variants("O1+x.y=[1,2") == ["O1+x.y=[1,2"]  # unclosed: one name, which then fails


def test_bad_variant_and_precision():
    workload = catalog.tiny_workload()
    with pytest.raises(ValueError, match="Unknown variant 'O3'"):
        harness.run_benchmark(workload, ["O3"], ["float32"], progress=False)
    with pytest.raises(ValueError, match="Unknown precision 'float8'"):
        harness.run_benchmark(workload, ["baseline"], ["float8"], progress=False)


def test_short_baseline_must_train_fewer_epochs_than_the_baseline(tmp_path):
    assert schedule.short_epochs(16, 0.6875) == 11 and schedule.short_epochs(2, 0.5) == 1
    with pytest.raises(ValueError, match=r"round\(2 x 0.8\) = 2 epochs, as long as the baseline's 2"):
        schedule.short_epochs(2, 0.8)
    workload = catalog.tiny_workload()  # 2 epochs
    with pytest.raises(ValueError, match="as long as the baseline's"):  # before any run
        harness.run_benchmark(workload, ["baseline", "baseline-short"], ["float32"], progress=False)
    with pytest.raises(SystemExit, match="--short-ratio / --epochs: baseline-short would train"):
        _bench(["--workload", "tiny", "--variants", "baseline,baseline-short", "--output-dir", str(tmp_path)])


def _bench_arguments(monkeypatch, argv):
    """What `keras-boost bench argv` would run (nothing runs)."""
    seen = {}

    def fake_benchmark(workload, variants, precisions, seeds, short_ratio, **kwargs):
        seen.update(workload=workload, variants=variants, precisions=precisions, seeds=seeds,
                    short_ratio=short_ratio)
        raise KeyboardInterrupt

    monkeypatch.setattr(harness, "run_benchmark", fake_benchmark)
    with pytest.raises(KeyboardInterrupt):
        _bench(argv)
    return seen


def test_quick_is_one_float32_seed_of_baseline_short_baseline_and_o1(monkeypatch, tmp_path):
    threads = []
    if keras.backend.backend() == "torch":  # its two OpenMP threads spin-waited on a loaded 2-core machine
        import torch

        # Recorded, not done: the count is process-wide, and the tests after
        # this one in its worker would train on one thread.
        monkeypatch.setattr(torch, "set_num_threads", threads.append)
    seen = _bench_arguments(monkeypatch, ["--quick", "--output-dir", str(tmp_path)])
    assert seen["variants"] == ["baseline", "baseline-short", "O1"]  # nothing compared with itself
    assert seen["precisions"] == ["float32"] and seen["seeds"] == 1
    assert seen["workload"].name == "quick" and seen["workload"].epochs == 5
    assert schedule.short_epochs(seen["workload"].epochs, seen["short_ratio"]) == 4
    assert threads == ([1] if keras.backend.backend() == "torch" else [])
    # Its options still override it.
    seen = _bench_arguments(monkeypatch, ["--quick", "--workload", "realistic", "--output-dir", str(tmp_path)])
    assert seen["workload"].epochs == 5  # of its 16
    seen = _bench_arguments(monkeypatch, ["--quick", "--precisions", "float32,mixed_bfloat16", "--seeds", "2",
                                          "--epochs", "3", "--output-dir", str(tmp_path)])
    assert (seen["precisions"], seen["seeds"], seen["workload"].epochs) == (["float32", "mixed_bfloat16"], 2, 3)
    seen = _bench_arguments(monkeypatch, ["--output-dir", str(tmp_path)])
    assert seen["precisions"] == ["float32", "mixed_bfloat16"] and seen["seeds"] == 3
    assert seen["variants"] == list(variants.DEFAULT_VARIANTS)


def test_keras_boost_without_its_command_prints_the_usage(monkeypatch, capsys):
    monkeypatch.setattr(cli, "run", lambda argv: pytest.fail("no benchmark without `bench`"))
    with pytest.raises(SystemExit) as exit_:
        keras_boost_cli.main([])
    assert exit_.value.code == 0 and "usage: keras-boost bench" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_:
        keras_boost_cli.main(["--quick"])
    assert exit_.value.code == 2 and "unknown command '--quick'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        keras_boost_cli.main(["--version"])
    assert exit_.value.code == 0 and capsys.readouterr().out == f"keras-boost {boost.__version__}\n"


def test_every_option_of_the_command_line_has_help():
    parser = keras_boost_cli.build_parser()
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert set(commands.choices) == {"bench"}
    for each in (parser, *commands.choices.values()):
        missing = [a.option_strings or a.dest for a in each._actions if not a.help]
        assert not missing, f"{each.prog}: no help for {missing}"


_HEAVY = ("keras", "tensorflow", "jax", "torch")
# Runs `python -m MODULE ARGV`; prints the exit code and which of _HEAVY it imported.
_RUN_THE_MODULE = f"""
import runpy, sys
module = sys.argv.pop(1)
try:
    runpy.run_module(module, run_name="__main__", alter_sys=True)
    code = 0
except SystemExit as exit_:
    code = exit_.code
print("exit", code, "imported", sorted(m for m in {_HEAVY!r} if m in sys.modules))
"""
# The console script `keras-boost` and `python -m keras_boost.bench`.
_MODULES = ("keras_boost_cli", "keras_boost.bench")


@pytest.fixture(scope="module")
def help_runs():
    """Each command-line module without a command, with --help and with bench --help."""
    runs = {}
    for module in _MODULES:
        for argv in ([], ["--help"], ["--version"], ["bench", "--help"], ["--quick", "--help"]):
            proc = subprocess.run([sys.executable, "-c", _RUN_THE_MODULE, module, *argv], capture_output=True,
                                  text=True, timeout=300, cwd=pathlib.Path(__file__).parents[1])
            assert proc.returncode == 0, proc.stderr[-4000:]
            runs[module, " ".join(argv)] = proc.stdout
    return runs


def test_the_module_without_a_command_prints_the_help_and_trains_nothing(help_runs):
    for argv, out in help_runs.items():
        if argv != ("keras_boost_cli", "--quick --help"):  # an unknown command there (below)
            assert out.splitlines()[-1].startswith("exit 0 "), (argv, out)
    for module in _MODULES:
        assert "commands:" in help_runs[module, ""] and "bench" in help_runs[module, ""]
        assert help_runs[module, ""] == help_runs[module, "--help"]
        assert "--workload WORKLOAD" in help_runs[module, "bench --help"]
        assert help_runs[module, "--version"].startswith(f"keras-boost {boost.__version__}\n")
    # The bench's own module takes the bench's options without the command; keras-boost does not.
    assert help_runs["keras_boost.bench", "--quick --help"] == help_runs["keras_boost.bench", "bench --help"]
    assert help_runs["keras_boost_cli", "--quick --help"].splitlines()[-1] == "exit 2 imported []"


def test_the_help_explains_every_column_of_the_tables():
    epilog = keras_boost_cli.BENCH_EPILOG
    tables = report.quick_table(_hand_result()) + report.markdown_table(_hand_result())
    headers = [line for line in tables.splitlines() if line.startswith("| variant |")]
    assert len(headers) == 4  # the quick table, the full one and the two paired ones
    for header in headers[:2]:
        for column in header.strip("| ").split(" | "):
            column = column.replace("time to 0.97 (s)", "time to T (s)")
            assert column in epilog or column.replace(" baseline", "") in epilog, column
    for words in ("ref. never", "not reached", "n/a", "--seeds 5", "--first-seed"):
        assert words in epilog, words


def test_the_console_script_is_the_module_outside_the_package():
    # Importing keras_boost brings Keras and its backend; keras_boost_cli does not.
    pyproject = (pathlib.Path(__file__).parents[1] / "pyproject.toml").read_text()
    assert 'keras-boost = "keras_boost_cli:main"' in pyproject


def test_the_help_imports_neither_keras_nor_a_backend(help_runs):
    for (module, argv), out in help_runs.items():
        if module == "keras_boost_cli":
            assert out.splitlines()[-1].endswith("imported []"), (argv, out.splitlines()[-1])


# --- interleaving -------------------------------------------------------------------


def test_interleaved_jobs_alternate_between_seeds():
    jobs = harness.interleaved_jobs(["a", "b"], ["float32", "mixed_bfloat16"], 3)
    pairs = [("a", "float32"), ("b", "float32"), ("a", "mixed_bfloat16"), ("b", "mixed_bfloat16")]
    assert jobs == (
        [(v, p, 0) for v, p in pairs]
        + [(v, p, 1) for v, p in reversed(pairs)]
        + [(v, p, 2) for v, p in pairs]
    )
    assert harness.interleaved_jobs(["a"], ["float32"], 1) == [("a", "float32", 0)]


def test_run_benchmark_runs_in_interleaved_order(monkeypatch):
    def fake_run(workload, variant, precision, seed, short_ratio=0.8):
        return {"variant": variant, "precision": precision, "seed": seed, "skipped": "fake"}

    monkeypatch.setattr(harness, "run_once", fake_run)
    seen = []  # runs so far, at each on_run call
    result = harness.run_benchmark(catalog.tiny_workload(), ["baseline", "baseline-short", "O1"],
                                   ["float32"], seeds=3, short_ratio=0.5, progress=False, burn_in_fit=False,
                                   on_run=lambda so_far: seen.append(len(so_far["runs"])))
    assert seen == list(range(1, 10))
    assert [(r["variant"], r["seed"]) for r in result["runs"]] == [
        ("baseline", 0), ("baseline-short", 0), ("O1", 0),
        ("O1", 1), ("baseline-short", 1), ("baseline", 1),
        ("baseline", 2), ("baseline-short", 2), ("O1", 2),
    ]
    assert [r["order"] for r in result["runs"]] == list(range(9))
    assert all("started" in r and "load_average" in r for r in result["runs"])
    env = result["environment"]
    for key in ("cpu_model", "date", "finished", "load_average_finished", "backend", "backend_version", "keras_version",
                "keras_boost_version", "numpy_version"):
        assert env[key], key


# --- summary math on hand-made runs --------------------------------------------------


def _run(variant, seed, curve, precision="float32"):
    return {
        "variant": variant, "precision": precision, "seed": seed, "epochs": len(curve),
        "steps": 10 * len(curve), "fit_seconds": curve[-1][0] + 1.0, "train_seconds": float(curve[-1][0]),
        "steps_per_second": 10.0, "curve": [[float(t), a] for t, a in curve],
        "time_to_target": clock.time_to_accuracy(curve, 0.97), "final_accuracy": curve[-1][1],
    }


# Target 0.97. The baseline's median final accuracy is 0.985, so the threshold is 0.980.
HAND_RUNS = [
    _run("baseline", 0, [[10, 0.90], [20, 0.95], [30, 0.97], [40, 0.980]]),
    _run("baseline", 1, [[12, 0.91], [24, 0.96], [36, 0.975], [48, 0.985]]),
    _run("baseline", 2, [[11, 0.89], [22, 0.978], [33, 0.97], [44, 0.990]]),
    _run("baseline-short", 0, [[10, 0.90], [20, 0.96], [30, 0.982]]),
    _run("baseline-short", 1, [[12, 0.90], [24, 0.95], [36, 0.979]]),
    _run("baseline-short", 2, [[11, 0.90], [22, 0.97], [33, 0.981]]),
    # Faster than baseline-short at its median accuracy (0.981): beats it.
    _run("O1", 0, [[10, 0.90], [20, 0.981], [30, 0.983]]),
    _run("O1", 1, [[10, 0.90], [21, 0.95], [31, 0.981]]),
    _run("O1", 2, [[9, 0.90], [19, 0.95], [29, 0.975]]),
    # More accurate, but slower than baseline-short: does not beat it.
    _run("less_bn", 0, [[20, 0.95], [40, 0.99]]),
    _run("less_bn", 1, [[20, 0.95], [40, 0.99]]),
    _run("less_bn", 2, [[20, 0.95], [40, 0.99]]),
    # Same median time as baseline-short (33 s), more accurate: beats it.
    _run("grad_freeze", 0, [[15, 0.95], [33, 0.985]]),
    _run("grad_freeze", 1, [[15, 0.95], [33, 0.985]]),
    _run("grad_freeze", 2, [[15, 0.95], [33, 0.985]]),
    {"variant": "adasum", "precision": "float32", "seed": 0, "skipped": "not implemented. More."},
]


def _hand_result():
    return {
        "version": results.RESULT_VERSION,
        "workload": {"name": "hand", "epochs": 4, "batch_size": 32, "learning_rate": 0.1, "target": 0.97,
                     "warmup_epochs": 1.0, "momentum": 0.9, "weight_decay": 5e-4},
        "short_ratio": 0.75,
        "environment": {"backend": "tensorflow", "backend_version": "2.x", "keras_version": "3.x",
                        "processor": "cpu", "cpu_model": "Some CPU", "nproc": 2, "date": "2026-12-01"},
        "runs": copy.deepcopy(HAND_RUNS),
    }


@requires_tensorflow  # the tf.data pipeline
def test_training_dataset_is_one_seeded_pipeline_reshuffled_every_pass():
    x = np.arange(10, dtype="float32")[:, None]
    y = np.arange(10, dtype="int32")
    dataset, steps = pipeline.training_dataset(x, y, batch_size=4, seed=3)
    assert steps == 3  # 4 + 4 + a partial batch of 2

    def passes(dataset, n):
        batches = [b.numpy().tolist() for _, b in dataset.take(n * steps)]
        return [sum(batches[i * steps:(i + 1) * steps], []) for i in range(n)]

    first, second = passes(dataset, 2)
    assert sorted(first) == sorted(second) == list(range(10))  # every pass is one epoch
    assert first != second                                     # reshuffled each pass
    assert [(xb.numpy()[:, 0] == yb.numpy()).all() for xb, yb in dataset.take(steps)] == [True] * 3
    again, _ = pipeline.training_dataset(x, y, batch_size=4, seed=3)
    assert passes(again, 2) == [first, second]                 # the same order for every variant
    other, _ = pipeline.training_dataset(x, y, batch_size=4, seed=4)
    assert passes(other, 1)[0] != first


def test_training_dataset_without_tensorflow_is_a_seeded_numpy_generator(monkeypatch):
    # A machine without TensorFlow (the GPU check's) gets the same rule from NumPy.
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "tensorflow" else True)
    assert pipeline.input_pipeline() == "numpy generator (no TensorFlow)"
    x = np.arange(10, dtype="float32")[:, None]
    y = np.arange(10, dtype="int32")

    def passes(seed, n=2):
        batches, steps = pipeline.training_dataset(x, y, batch_size=4, seed=seed)
        assert steps == 3
        taken = [next(batches) for _ in range(n * steps)]
        assert all((xb[:, 0] == yb).all() for xb, yb in taken)
        return [sum((yb.tolist() for _, yb in taken[i * steps:(i + 1) * steps]), []) for i in range(n)]

    first, second = passes(seed=3)
    assert sorted(first) == sorted(second) == list(range(10)) and first != second
    assert passes(seed=3) == [first, second] and passes(seed=4)[0] != first


def test_time_to_accuracy_is_the_first_epoch_reaching_it():
    curve = [[10.0, 0.90], [20.0, 0.95], [30.0, 0.94], [40.0, 0.96]]
    assert clock.time_to_accuracy(curve, 0.95) == 20.0  # first crossing, not interpolated
    assert clock.time_to_accuracy(curve, 0.93) == 20.0
    assert clock.time_to_accuracy(curve, 0.955) == 40.0
    assert clock.time_to_accuracy(curve, 0.97) is None
    assert clock.time_to_accuracy(curve, 0.985 - 0.005 + 0.95 - 0.98) == 20.0  # float rounding


def test_spread_and_beats():
    assert report.spread([3.0, 1.0, 2.0]) == {"median": 2.0, "min": 1.0, "max": 3.0}
    assert report.spread([3.0, None, 1.0]) == {"median": 3.0, "min": 1.0, "max": math.inf}
    assert report.spread([1.0, None]) == {"median": math.inf, "min": 1.0, "max": math.inf}
    assert report.spread([4.0, 1.0, 2.0, 3.0])["median"] == 2.5
    assert report.spread([]) is None
    assert report.beats(90, 0.985, 100, 0.985)       # less time, equal accuracy
    assert report.beats(100, 0.990, 100, 0.985)      # equal time, higher accuracy
    assert report.beats(90, 0.990, 100, 0.985)
    assert not report.beats(100, 0.985, 100, 0.985)  # equal in both
    assert not report.beats(90, 0.980, 100, 0.985)   # faster but less accurate
    assert not report.beats(110, 0.990, 100, 0.985)  # more accurate but slower


def test_summary_medians_spreads_thresholds_and_verdicts():
    rows = {r["variant"]: r for r in report.summarize(_hand_result())}
    base, short, o1 = rows["baseline"], rows["baseline-short"], rows["O1"]
    assert base["final_accuracy_spread"] == {"median": 0.985, "min": 0.980, "max": 0.990}
    assert base["train_seconds_spread"] == {"median": 44.0, "min": 40.0, "max": 48.0}
    assert base["threshold"] == pytest.approx(0.980)
    # Time to 0.980: seed 0 at epoch 4 (40 s, exactly 0.980), seed 1 at 48 s, seed 2 at 44 s.
    assert base["time_to_threshold"] == [40.0, 48.0, 44.0]
    assert base["time_to_threshold_spread"] == {"median": 44.0, "min": 40.0, "max": 48.0}
    assert base["time_to_threshold_vs_baseline"] == 1.0
    # Time to the target 0.97: 30, 36, 22 s.
    assert base["time_to_target_spread"] == {"median": 30.0, "min": 22.0, "max": 36.0}
    assert base["reached"] == "3/3"

    assert short["final_accuracy_spread"]["median"] == 0.981
    assert short["train_seconds_spread"]["median"] == 33.0
    assert short["time_to_threshold"] == [30.0, None, 33.0]
    assert short["time_to_threshold_spread"] == {"median": 33.0, "min": 30.0, "max": math.inf}
    assert short["threshold_reached"] == "2/3"
    assert short["time_to_threshold_vs_baseline"] == pytest.approx(33.0 / 44.0)
    assert short["time_vs_baseline"] == pytest.approx(33.0 / 44.0)
    assert short["beats_short_baseline"] is None and base["beats_short_baseline"] is None

    assert o1["train_seconds_spread"] == {"median": 30.0, "min": 29.0, "max": 31.0}
    assert o1["final_accuracy_spread"] == {"median": 0.981, "min": 0.975, "max": 0.983}
    assert o1["time_to_threshold"] == [20.0, 31.0, None]
    assert o1["time_to_threshold_spread"]["median"] == 31.0
    assert o1["time_to_threshold_vs_baseline"] == pytest.approx(31.0 / 44.0)
    assert o1["time_vs_baseline"] == pytest.approx(30.0 / 44.0)
    assert o1["beats_short_baseline"] is True
    assert rows["less_bn"]["beats_short_baseline"] is False
    assert rows["grad_freeze"]["beats_short_baseline"] is True
    assert rows["adasum"]["skipped"].startswith("not implemented")


def test_paired_ratios_per_seed_against_the_same_seeds_baseline():
    rows = {r["variant"]: r for r in report.paired(_hand_result())}
    assert "baseline" not in rows and "adasum" not in rows  # skipped runs have nothing to pair
    o1 = rows["O1"]
    assert o1["seeds"] == [0, 1, 2]
    assert o1["time_ratio"] == pytest.approx([30 / 40, 31 / 48, 29 / 44])
    # Threshold 0.980: O1 at 20, 31 and never; the baseline at 40, 48, 44 s.
    assert o1["threshold_time_ratio"][:2] == pytest.approx([20 / 40, 31 / 48])
    assert o1["threshold_time_ratio"][2] is None
    assert o1["threshold_time_ratio_spread"] == {"median": pytest.approx(31 / 48), "min": 0.5, "max": math.inf}
    assert o1["accuracy_difference"] == pytest.approx([0.3, -0.4, -1.5])
    table = report.markdown_table(_hand_result())
    assert "| O1 | float32 | 3 | 0.66 [0.65, 0.75] | 0.65 [0.5, not reached] | -0.4 [-1.5, 0.3] |" in table


def test_paired_against_the_short_baseline_pairs_only_the_boost_variants():
    rows = {r["variant"]: r for r in report.paired(_hand_result(), reference="baseline-short")}
    assert sorted(rows) == ["O1", "grad_freeze", "less_bn"]  # neither baseline is paired with it
    o1 = rows["O1"]
    assert o1["reference"] == "baseline-short" and o1["seeds"] == [0, 1, 2]
    assert o1["time_ratio"] == pytest.approx([30 / 30, 31 / 36, 29 / 33])
    # Threshold still the baseline's (0.980): O1 reaches it at 20 s, 31 s and never;
    # baseline-short at 30 s, never and 33 s. Seed 1: only the reference never did (0).
    assert o1["threshold_time_ratio"] == [pytest.approx(20 / 30), 0.0, None]
    assert o1["accuracy_difference"] == pytest.approx([0.1, 0.2, -0.6])
    table = report.markdown_table(_hand_result())
    assert "| variant | precision | seeds | train time × baseline-short |" in table
    assert "| O1 | float32 | 3 | 0.88 [0.86, 1] | 0.67 [ref. never, not reached] | 0.1 [-0.6, 0.2] |" in table
    with pytest.raises(ValueError, match="reference must be 'baseline' or 'baseline-short', got 'O1'"):
        report.paired(_hand_result(), reference="O1")


def test_summary_threshold_never_reached_by_most_seeds():
    result = _hand_result()
    for run in result["runs"]:
        if run["variant"] == "less_bn":
            run["curve"] = [[20.0, 0.95], [40.0, 0.97]]
            run["final_accuracy"] = 0.97
    rows = {r["variant"]: r for r in report.summarize(result)}
    assert rows["less_bn"]["time_to_threshold_spread"]["median"] == math.inf
    assert rows["less_bn"]["time_to_threshold_vs_baseline"] == math.inf
    assert rows["less_bn"]["threshold_reached"] == "0/3"
    table = report.markdown_table(result)
    assert "| less_bn | float32 | 0.97 | 40 | 0.91 |" in table and "| not reached | 0/3 | not reached |" in table


def test_summary_accuracy_drop_and_bad_value():
    rows = {r["variant"]: r for r in report.summarize(_hand_result(), accuracy_drop=0.0)}
    assert rows["baseline"]["threshold"] == 0.985
    assert rows["baseline"]["time_to_threshold"] == [None, 48.0, 44.0]
    with pytest.raises(ValueError, match="accuracy_drop must be in \\[0, 1\\), got 2"):
        report.summarize(_hand_result(), accuracy_drop=2)


def test_markdown_table_rows(tmp_path):
    table = report.markdown_table(_hand_result())
    assert "Some CPU x2" in table and "float32 0.9800" in table
    assert "| baseline | float32 | 0.985 [0.98, 0.99] | 44 [40, 48] | 1.00 | 1.00 | 10 | 30 [22, 36] | 3/3 | " \
           "44 [40, 48] | 3/3 | 1.00 | — |" in table
    assert "| O1 | float32 | 0.981 [0.975, 0.983] | 30 [29, 31] | 0.68 | 0.68 | 10 |" in table
    assert "| 31 [20, not reached] | 2/3 | 0.70 | yes |" in table
    assert "| adasum | float32 | skipped: not implemented |" in table
    path = tmp_path / "hand.png"
    report.plot(_hand_result(), str(path))
    png = path.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20000


def test_quick_table_keeps_the_essential_columns():
    table = report.quick_table(_hand_result())
    assert table.splitlines()[0] == ("| variant | final acc. | train time (s) | × baseline | "
                                     "time to base -0.5pt (s) | beats short |")
    assert "| O1 | 0.981 [0.975, 0.983] | 30 [29, 31] | 0.68 | 31 [20, not reached] | yes |" in table
    assert "| less_bn | 0.99 | 40 | 0.91 | 40 | no |" in table
    assert "| adasum | skipped: not implemented |" in table


def test_verdict_says_what_it_found_and_how_sure_it_is():
    result = _hand_result()
    result["environment"].update(load_average=[1.5, 1.0, 0.5], load_average_finished=[3.25, 2.0, 1.0])
    line = report.verdict(result)
    assert "\n" not in line and line.startswith("Verdict: O1 trained in 0.68x the baseline's time and ended "
                                                "-0.4 points from its final accuracy and beat baseline-short; ")
    assert "less_bn trained in 0.91x the baseline's time and ended +0.5 points from its final accuracy but did " \
           "not beat baseline-short; " in line and "adasum was skipped" in line
    assert "3 seeds, load average 1.5 -> 3.2 on 2 CPUs: a first look" in line and "--seeds 5" in line
    result["runs"] += [{**run, "seed": run["seed"] + 3} for run in copy.deepcopy(HAND_RUNS)[:-1]]
    assert "6 seeds, load average" in report.verdict(result) and "first look" not in report.verdict(result)


def test_median_curve():
    curves = [[[10, 0.9], [20, 0.95]], [[12, 0.8], [22, 0.97]], [[11, 0.85], [21, 0.96]]]
    assert report.median_curve(curves) == ([11, 21], [0.85, 0.96], [0.8, 0.95], [0.9, 0.97])


def test_cli_rerenders_a_saved_result(tmp_path, capsys):
    path = tmp_path / "bench_hand_tensorflow.json"
    report.write_json(_hand_result(), str(path))
    _bench(["--report", str(path), "--accuracy-drop", "0.01"])
    table = (tmp_path / "bench_hand_tensorflow.md").read_text()
    assert "float32 0.9750" in table and (tmp_path / "bench_hand_tensorflow.png").exists()
    with pytest.raises(SystemExit, match="Cannot read the result"):
        _bench(["--report", str(tmp_path / "missing.json")])


# --- the realistic workload ---------------------------------------------------------


def assert_same_inference(model, plain, x):
    for a, b in zip(model.get_weights(), plain.get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(model.predict(x, verbose=0), plain.predict(x, verbose=0), rtol=1e-5, atol=1e-5)


def test_realistic_workload_definition():
    workload = catalog.realistic_workload()
    (x, _), (x_test, _) = workload.data()
    steps = workload.epochs * math.ceil(len(x) / workload.batch_size)
    assert steps >= 2000
    total, warmup = schedule.schedule_steps(workload, workload.epochs, math.ceil(len(x) / workload.batch_size))
    assert total == steps and 0 < warmup < total
    model = workload.build(0)
    found = boost.surgery.find_less_bn(model)
    assert found.num_removed >= 6 and found.num_bn > found.num_removed
    head = model.layers[-1]
    assert isinstance(head, keras.layers.Dense) and head.get_config()["activation"] == "linear"
    # The augmentation acts in training only: same weights, and inference equals the model without
    # it (to float32 rounding: XLA may fuse the two graphs differently).
    plain = bench.residual_cnn(seed=0, width=16, blocks=(3, 3, 3))
    assert_same_inference(model, plain, x_test[:8])


def test_quickstart_augmented_is_the_quickstart_model_with_the_realistic_recipe():
    augmented, quickstart, realistic = (catalog.WORKLOADS[name]() for name in
                                        ("quickstart-augmented", "quickstart", "realistic"))
    for field in ("epochs", "batch_size", "learning_rate", "warmup_epochs", "momentum", "weight_decay"):
        assert getattr(augmented, field) == getattr(realistic, field), field
    x_test = augmented.data()[1][0][:8]
    model, plain = augmented.build(0), quickstart.build(0)
    assert model.count_params() == plain.count_params()
    # Augmentation acts in training only: same weights, same inference.
    assert_same_inference(model, plain, x_test)


def test_workload_and_schedule_validation():
    build, data = catalog.tiny_workload().build, catalog.tiny_workload().data
    with pytest.raises(ValueError, match=r"warmup_epochs must be in \[0, epochs=3\), got 3"):
        recipe.Workload("w", build, data, epochs=3, warmup_epochs=3)
    with pytest.raises(ValueError, match="batch_size must be an int >= 1, got 0"):
        recipe.Workload("w", build, data, batch_size=0)
    with pytest.raises(ValueError, match="target must be an accuracy in \\[0, 1\\], got 93"):
        recipe.Workload("w", build, data, target=93)
    workload = recipe.Workload("w", build, data, epochs=10, warmup_epochs=1.0)
    assert schedule.schedule_steps(workload, 10, 100) == (1000, 100)
    assert schedule.schedule_steps(workload, 8, 100, 0.8) == (800, 80)  # warmup rescaled too
    with pytest.raises(ValueError, match="seeds must be an int >= 1, got 0"):
        harness.run_benchmark(workload, ["baseline"], ["float32"], seeds=0, progress=False)


# --- two-phase (fine-tuning) workloads -----------------------------------------------


def _dense_fine_tune_workload(epochs=5, fine_tune_epochs=3, **kwargs):
    """A frozen nested Dense base under a new head; phase 2 trains its top."""

    def build(seed):
        init = [keras.initializers.GlorotUniform(seed=seed * 10 + i) for i in range(3)]
        inputs = keras.Input((6,))
        h = keras.layers.Dense(8, activation="relu", kernel_initializer=init[0], name="low")(inputs)
        h = keras.layers.Dense(8, activation="relu", kernel_initializer=init[1], name="top")(h)
        base = keras.Model(inputs, h, name="base")
        base.trainable = False
        x = keras.Input((6,))
        outputs = keras.layers.Dense(3, kernel_initializer=init[2], name="head")(base(x, training=False))
        return keras.Model(x, outputs, name="dense_fine_tune")

    def data():
        rng = np.random.default_rng(0)
        x = rng.normal(size=(64, 6)).astype("float32")
        y = (x[:, 0] > 0).astype("int32") + (x[:, 1] > 0).astype("int32")
        return (x[:48], y[:48]), (x[48:], y[48:])

    fine_tune = recipe.FineTune(fine_tune_epochs, 0.01, ["top"], **kwargs)
    return recipe.Workload("dense-fine-tune", build, data, epochs=epochs, batch_size=16, learning_rate=0.1,
                            target=0.5, fine_tune=fine_tune)


def test_fine_tune_validation_names_the_bad_value():
    build, data = catalog.tiny_workload().build, catalog.tiny_workload().data
    with pytest.raises(ValueError, match="FineTune epochs must be an int >= 1, got 0"):
        recipe.FineTune(0, 0.01, ["top"])
    with pytest.raises(ValueError, match="FineTune learning_rate must be > 0, got -1"):
        recipe.FineTune(1, -1, ["top"])
    with pytest.raises(ValueError, match="FineTune layers must be a non-empty sequence of layer names, got 'top'"):
        recipe.FineTune(1, 0.01, "top")
    with pytest.raises(ValueError, match=r"FineTune warmup_epochs must be in \[0, epochs=2\), got 2"):
        recipe.FineTune(2, 0.01, ["top"], warmup_epochs=2)
    fine_tune = recipe.FineTune(3, 0.01, ["top"])
    with pytest.raises(ValueError, match="epochs=3 must exceed fine_tune.epochs=3: the first phase"):
        recipe.Workload("w", build, data, epochs=3, fine_tune=fine_tune)
    with pytest.raises(ValueError, match=r"warmup_epochs must be in \[0, the first phase's 2 epochs\), got 2"):
        recipe.Workload("w", build, data, epochs=5, warmup_epochs=2, fine_tune=fine_tune)
    with pytest.raises(TypeError, match="fine_tune must be None or a FineTune, got 3"):
        recipe.Workload("w", build, data, fine_tune=3)
    model = _dense_fine_tune_workload().build(0)
    with pytest.raises(ValueError, match=r"'nope' is not a layer of model 'dense_fine_tune'; its layers: \["):
        recipe.FineTune(1, 0.01, ["top"], base="nope").unfreeze(model)
    with pytest.raises(ValueError, match=r"layers \['topp'\] are not layers of base 'base'; its layers: \["):
        recipe.FineTune(1, 0.01, ["topp"]).unfreeze(model)


def test_fine_tune_unfreezes_only_its_layers_of_the_base():
    workload = _dense_fine_tune_workload()
    model = workload.build(0)
    assert {v.path for v in model.trainable_variables} == {"head/kernel", "head/bias"}
    workload.fine_tune.unfreeze(model)
    assert {v.path for v in model.trainable_variables} == {"head/kernel", "head/bias", "top/kernel", "top/bias"}
    assert workload.fine_tune.layers == ("top",)  # a list becomes a tuple


def test_phase_epochs_rescale_both_phases():
    workload = _dense_fine_tune_workload(epochs=10, fine_tune_epochs=6)
    assert schedule.phase_epochs(workload) == [4, 6]
    assert schedule.phase_epochs(workload, 0.8) == [3, 5]  # 8 epochs; round(4.8) = 5 fine-tuning
    assert schedule.phase_epochs(workload, 0.2) == [1, 1]
    assert schedule.phase_epochs(_dense_fine_tune_workload(epochs=5, fine_tune_epochs=4), 0.5) == [1, 1]
    assert schedule.phase_epochs(catalog.tiny_workload()) == [2]
    with pytest.raises(ValueError, match="would train 1 epoch, too few for its two phases"):
        schedule.phase_epochs(workload, 0.1)
    with pytest.raises(ValueError, match="too few for its two phases"):  # before any run
        harness.run_benchmark(workload, ["baseline-short"], ["float32"], short_ratio=0.1, progress=False)


def test_two_phase_runs_record_one_point_per_epoch_and_merge_from_json():
    workload = _dense_fine_tune_workload(warmup_epochs=1.0)
    kwargs = dict(progress=False, burn_in_fit=False, short_ratio=0.6)
    result = harness.run_benchmark(workload, ["baseline", "baseline-short"], ["float32"], **kwargs)
    results.validate_result(result)
    runs = {r["variant"]: r for r in result["runs"]}
    assert runs["baseline"]["phases"] == [2, 3] and runs["baseline-short"]["phases"] == [1, 2]
    for run in runs.values():
        times = [t for t, _ in run["curve"]]
        assert len(times) == run["epochs"] == sum(run["phases"]) and times == sorted(times)
    assert "freeze_depths" not in runs["baseline"]
    # The recipe in JSON types: a result read back merges with a new one.
    assert result["workload"]["fine_tune"] == {"epochs": 3, "learning_rate": 0.01, "layers": ["top"],
                                               "base": "base", "warmup_epochs": 1.0}
    assert "fine_tune" not in results.workload_record(catalog.tiny_workload())
    later = harness.run_benchmark(workload, ["baseline"], ["float32"], first_seed=1, **kwargs)
    merged = results.merge_results(json.loads(json.dumps(result)), later)
    assert [(r["variant"], r["seed"]) for r in merged["runs"]] == [
        ("baseline", 0), ("baseline-short", 0), ("baseline", 1)]


@pytest.mark.slow
@pytest.mark.benchmark
def test_adasum_benchmark_runs_and_reports(tmp_path):
    if keras.backend.backend() != "tensorflow":
        pytest.skip("the AdaSum benchmark runs on tf.distribute")

    out = tmp_path / "adasum.json"
    env = dict(os.environ, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.adasum", "--replicas", "2", "--per-replica-batch", "32",
         "--seeds", "1", "--max-epochs", "1", "--repeats", "2", "--timing-steps", "1", "--target", "0.0",
         "--output", str(out)],
        env=env, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads(out.read_text())
    ratio = result["step_time"]["ratio_adasum_over_mean"]
    assert len(ratio["per_repeat"]) == 2 and ratio["min"] <= ratio["median"] <= ratio["max"]
    assert [r["mode"] for r in result["runs"]] == ["mean", "adasum"]
    assert all(r["epochs_to_target"] == 1 for r in result["runs"])  # target 0: the first epoch
    assert result["epochs_ratio_adasum_over_mean"] == [1.0]
    assert "Step time adasum / mean" in proc.stdout
    # 2 replicas: the halving/doubling exchange, a ring all-reduce's bytes (+ dot products).
    assert result["exchange_pattern"] == {"mean": "ring_all_reduce", "adasum": "halving_doubling"}
    sent = result["bytes_sent_per_replica_step"]
    assert sent["mean"] < sent["adasum"] < 1.01 * sent["mean"]


@pytest.mark.slow
@pytest.mark.benchmark
def test_dim_reduce_benchmark_runs_and_reports(tmp_path):
    if keras.backend.backend() != "tensorflow":
        pytest.skip("one backend is enough for the report's plumbing (the step is tested on all)")
    from benchmarks import dim_reduce as dim_reduce_bench

    result = dim_reduce_bench.main(["--workload", "tiny", "--seeds", "1", "--stage1-epochs", "1", "--every", "2",
                                   "--components", "2", "--long-epochs", "1", "--output", str(tmp_path / "dr.json")])
    run = result["runs"][0]
    assert set(run) >= {"stage1_accuracy", "plain+2", "plain+long", "plain+2-annealed", "dim_reduce"}
    assert run["dim_reduce"]["steps"] == 2 * math.ceil(512 / 64)
    assert 0 < run["dim_reduce"]["accepted_steps"] <= run["dim_reduce"]["steps"]
    saved = json.loads((tmp_path / "dr.json").read_text())
    assert saved["complete"] is True and saved["median_accuracy"]["dim_reduce"] > 0.1


@pytest.mark.slow
@pytest.mark.benchmark
def test_precision_bench_times_every_policy_and_refuses_bad_arguments(capsys):
    from benchmarks import precision as precision_bench

    args = precision_bench.parse_args(["--steps", "1", "--repeats", "1"])
    measured = precision_bench.precision_step_times(catalog.tiny_workload(), args)
    assert set(measured["ratio_to_float32"]) == {"float32", "mixed_float16", "mixed_bfloat16"}
    assert measured["ratio_to_float32"]["float32"] == 1.0
    assert all(t > 0 for t in measured["median_seconds_per_step"].values())
    with pytest.raises(SystemExit):
        precision_bench.parse_args(["--repeats", "0"])
    assert "--repeats must be >= 1, got 0" in capsys.readouterr().err


def test_cpu_flags_are_a_subset_of_what_is_asked():
    from keras_boost.bench.machine import cpu_flags

    assert set(cpu_flags(("avx2", "no_such_flag"))) <= {"avx2"}


def test_first_seed_and_merging_results(monkeypatch):
    assert harness.interleaved_jobs(["a", "b"], ["float32"], 2, first_seed=3) == [
        ("b", "float32", 3), ("a", "float32", 3), ("a", "float32", 4), ("b", "float32", 4)]

    def fake_run(workload, variant, precision, seed, short_ratio=0.8):
        return {"variant": variant, "precision": precision, "seed": seed, "skipped": "fake"}

    monkeypatch.setattr(harness, "run_once", fake_run)
    kwargs = dict(progress=False, burn_in_fit=False)
    first = harness.run_benchmark(catalog.tiny_workload(), ["baseline", "O1"], ["float32"], seeds=2, **kwargs)
    later = harness.run_benchmark(catalog.tiny_workload(), ["baseline", "O1"], ["float32"], seeds=1,
                                  first_seed=2, **kwargs)
    merged = results.merge_results(first, later)
    assert [(r["variant"], r["seed"], r["order"]) for r in merged["runs"]] == [
        ("baseline", 0, 0), ("O1", 0, 1), ("O1", 1, 2), ("baseline", 1, 3), ("baseline", 2, 4), ("O1", 2, 5)]
    assert merged["environment"]["appended"] == [later["environment"]]
    assert first["runs"][-1]["order"] == 3  # the inputs are not changed
    with pytest.raises(ValueError, match=r"Both results hold the runs \[\('O1', 'float32', 0\)"):
        results.merge_results(first, first)
    other = {**later, "short_ratio": 0.5}
    with pytest.raises(ValueError, match="'short_ratio' differ: 0.8 vs 0.5"):
        results.merge_results(first, other)
    with pytest.raises(ValueError, match="first_seed must be an int >= 0, got -1"):
        harness.run_benchmark(catalog.tiny_workload(), ["baseline"], ["float32"], first_seed=-1, **kwargs)


def test_freeze_bench_schedule_mean_ratio():
    from benchmarks.freeze import schedule_mean_ratio

    freq, ratio = schedule_mean_ratio({d: 1.0 for d in range(10)}, 0.7)
    assert ratio == pytest.approx(1.0)
    assert freq[0] == pytest.approx(0.7, abs=1e-3)  # freeze_p: the share of full steps
    # Frozen steps at half the cost: 0.7 full + 0.3 half.
    _, ratio = schedule_mean_ratio({0: 1.0, **{d: 0.5 for d in range(1, 10)}}, 0.7)
    assert ratio == pytest.approx(0.85, abs=1e-3)
    _, ratio = schedule_mean_ratio({0: 1.0, **{d: 0.5 for d in range(1, 10)}}, 0.4)
    assert ratio == pytest.approx(0.7, abs=1e-3)


def test_freeze_bench_arguments(capsys):
    from benchmarks import freeze

    args = freeze.parse_args(["--workload", "realistic", "--freeze-p", "0.7,0.4", "--skip-accuracy"])
    assert (args.freeze_p, args.batch_size) == ([0.7, 0.4], 32)
    for bad, message in ((["--freeze-p", "0.7,1.5", "--skip-accuracy"], "(0, 1], got [1.5]"),
                         (["--freeze-p", "a"], "floats >= 0.0"),
                         (["--workload", "realistic"], "--skip-accuracy")):
        with pytest.raises(SystemExit):
            freeze.parse_args(bad)
        assert message in capsys.readouterr().err


def test_dim_reduce_bench_branches_and_arguments(capsys):
    from benchmarks import dim_reduce

    args = dim_reduce.parse_args(["--max-line-search", "2,4", "--alpha", "0.001"])
    assert dim_reduce._branch_names(args.max_line_search, args.alpha) == {
        (2, 0.001): "dim_reduce/ls2", (4, 0.001): "dim_reduce/ls4"}
    assert dim_reduce._branch_names([2], [0.001, 0.01]) == {
        (2, 0.001): "dim_reduce/a0.001", (2, 0.01): "dim_reduce/a0.01"}
    assert dim_reduce._branch_names([2], [0.001]) == {(2, 0.001): "dim_reduce"}
    for bad, message in ((["--alpha", "0"], "dim_reduce.alpha"), (["--max-line-search", "2,x"], "ints >= 1"),
                         (["--stage1-epochs", "4", "--trajectory-start-epoch", "4"], "below --stage1-epochs"),
                         (["--learning-rate", "0"], "--learning-rate must be > 0"),
                         (["--workload", "cifar"], "invalid choice")):
        with pytest.raises(SystemExit):
            dim_reduce.parse_args(bad)
        assert message in capsys.readouterr().err
    # The recipe follows the workload unless given.
    realistic = dim_reduce.parse_args(["--workload", "realistic"])
    assert (realistic.batch_size, realistic.learning_rate) == (32, 0.05)
    assert dim_reduce.parse_args(["--workload", "realistic", "--batch-size", "16"]).batch_size == 16


def test_dim_reduce_bench_annealed_branch_decays_the_rate_linearly_to_zero():
    from benchmarks import dim_reduce

    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    seen = []
    record = keras.callbacks.LambdaCallback(
        on_train_batch_begin=lambda batch, logs: seen.append(float(model.optimizer.learning_rate)))
    decay = dim_reduce._LinearDecay(0.1, total_steps=4)
    x, y = np.zeros((8, 2), "float32"), np.zeros((8, 1), "float32")
    for _ in range(2):  # a second fit starts the decay again
        model.fit(x, y, batch_size=2, epochs=1, verbose=0, callbacks=[decay, record])
    np.testing.assert_allclose(seen, [0.1, 0.075, 0.05, 0.025] * 2, rtol=1e-6)


# --- benchmarks/: the measurement scripts and their runner -------------------------

SCRIPTS = ("accumulation", "adasum", "adasum_lr", "application_recipe", "compression", "dim_reduce", "freeze",
           "head_scale", "head_swap", "less_bn", "level_cost", "overhead", "parallel", "precision", "prefix_cache",
           "progressive", "residual_init", "torch_compile", "torch_conv_layout", "transformer_step")


@pytest.mark.parametrize("name", SCRIPTS)
def test_every_benchmark_script_has_help_and_a_readme_entry(name, capsys):
    script = importlib.import_module(f"benchmarks.{name}")
    with pytest.raises(SystemExit) as exit_:
        script.main(["--help"])
    assert exit_.value.code == 0 and f"usage: python -m benchmarks.{name}" in capsys.readouterr().out
    readme = (pathlib.Path(__file__).parents[1] / "benchmarks" / "README.md").read_text()
    assert f"python -m benchmarks.{name}" in readme


def test_application_recipe_variants_parse_and_name_bad_keys():
    from benchmarks import application_recipe

    assert application_recipe.parse_variant("base") == {}
    assert application_recipe.parse_variant("lr=0.003,bn=0.99") == {"lr": 0.003, "bn": 0.99}
    with pytest.raises(ValueError, match="'momentum=0.9'.*'lr', 'bn', 'drop', 'scale'"):
        application_recipe.parse_variant("momentum=0.9")


def test_level_cost_pairs_each_variant_with_o0_of_the_same_round():
    from benchmarks import level_cost

    rows = level_cost.ratios_to_o0({"O0": [2.0, 4.0, 3.0], "O1": [2.2, 4.0, 2.7]})
    assert rows["O0"]["ratio_to_o0"] == {"median": 1.0, "min": 1.0, "max": 1.0}
    # Ratios per round: 1.1, 1.0 and 0.9.
    assert rows["O1"]["ratio_to_o0"] == pytest.approx({"median": 1.0, "min": 0.9, "max": 1.1})
    assert rows["O1"]["median_seconds"] == 2.7


def test_runner_records_the_environment_and_writes_every_result(tmp_path, capsys):
    from benchmarks import runner

    def parse_args(argv):
        parser = runner.parser("demo", "A demo.\n\nMore.", seeds=2, output=str(tmp_path / "demo_{backend}.json"))
        return runner.parse(parser, argv)

    saved = []

    def measure(args):
        for seed in runner.seeds(args):
            saved.append(seed)
            yield {"runs": list(range(args.first_seed, seed + 1)), "settings": {"extra": 1},
                   "environment": {"flag": True}}
            # Written after every yield: an interrupted run keeps its seeds.
            assert json.loads(path.read_text())["runs"] == list(range(args.first_seed, seed + 1))

    path = tmp_path / f"demo_{keras.backend.backend()}.json"
    result = runner.main("demo", measure, parse_args, ["--seeds", "2", "--first-seed", "3"])
    assert saved == [3, 4] and json.loads(path.read_text()) == result
    assert result["benchmark"] == "demo" and result["runs"] == [3, 4]
    assert result["settings"]["seeds"] == 2 and result["settings"]["extra"] == 1 and "child" not in result["settings"]
    env = result["environment"]
    assert env["flag"] is True and env["command"] == "python -m benchmarks.demo --seeds 2 --first-seed 3"
    assert {"backend", "keras_version", "keras_boost_version", "cpu_model", "date", "finished"} <= set(env)
    assert f"Wrote {path}" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        parse_args(["--seeds", "0"])
    assert "--seeds must be >= 1, got 0" in capsys.readouterr().err
