"""The benchmark harness end to end on a seconds-long workload."""

import copy
import json

import pytest

from keras_boost.bench import cli
from keras_boost.bench import harness
from keras_boost.bench import report


@pytest.fixture(scope="module")
def tiny_result(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    result = cli.run(["--workload", "tiny", "--variants", "baseline,baseline-short,grad_freeze,adasum",
                      "--precisions", "float32", "--seeds", "1", "--output-dir", str(out), "--no-progress"])
    return result, out


def test_harness_writes_json_table_and_png(tiny_result):
    result, out = tiny_result
    stem = out / f"bench_tiny_{result['environment']['backend']}"
    loaded = report.load_json(stem.with_suffix(".json"))
    assert [r["variant"] for r in loaded["runs"]] == ["baseline", "baseline-short", "grad_freeze", "adasum"]
    table = stem.with_suffix(".md").read_text()
    assert "| grad_freeze | float32 |" in table and "skipped: keras_boost does not implement ['adasum']" in table
    png = stem.with_suffix(".png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000


def test_runs_record_what_they_measured(tiny_result):
    result, _ = tiny_result
    runs = {r["variant"]: r for r in result["runs"]}
    assert runs["baseline"]["epochs"] == 2 and runs["baseline-short"]["epochs"] == 2  # round(2 * 0.8)
    assert runs["baseline"]["steps"] == 2 * 8  # 512 images, batch 64
    for name in ("baseline", "grad_freeze"):
        run = runs[name]
        assert len(run["curve"]) == run["epochs"]
        assert run["curve"][-1][0] == run["train_seconds"] <= run["fit_seconds"]
        assert run["steps_per_second"] > 0
    assert "skipped" in runs["adasum"]


def test_validate_result_names_the_bad_field(tiny_result):
    result, _ = tiny_result
    bad = copy.deepcopy(result)
    bad["runs"][0]["final_accuracy"] = 1.5
    with pytest.raises(ValueError, match=r"runs\[0\].final_accuracy out of \[0, 1\]"):
        harness.validate_result(bad)
    bad = copy.deepcopy(result)
    bad["runs"][1]["steps_per_second"] = "fast"
    with pytest.raises(ValueError, match=r"runs\[1\].steps_per_second must be float"):
        harness.validate_result(bad)
    bad = copy.deepcopy(result)
    del bad["environment"]
    with pytest.raises(ValueError, match="lacks 'environment'"):
        harness.validate_result(bad)
    json.dumps(result)  # plain JSON types only


def test_bad_variant_and_precision():
    workload = harness.tiny_workload()
    with pytest.raises(ValueError, match="Unknown variant 'O3'"):
        harness.run_benchmark(workload, ["O3"], ["float32"], progress=False)
    with pytest.raises(ValueError, match="Unknown precision 'float8'"):
        harness.run_benchmark(workload, ["baseline"], ["float8"], progress=False)
