"""benchmarks/accelerator/: the accelerator check, in its CPU smoke mode.

The check itself runs on a lent GPU (`bash benchmarks/accelerator.sh`); here
its `--smoke` mode runs on the current backend inside a small budget, and
the JSON must account for every workload and precision: measured (positive
times and ratios) or skipped with a reason.
"""

import json
import pathlib
import subprocess
import sys
import time

import pytest

from benchmarks.accelerator.backends import failed
from benchmarks.accelerator.budget import BUDGET_EXIT
from benchmarks.accelerator.budget import Budget
from benchmarks.accelerator.budget import stop
from benchmarks.accelerator.cli import main
from benchmarks.accelerator.options import MODELS
from benchmarks.accelerator.options import PRECISIONS
from benchmarks.accelerator.options import VARIANTS
from benchmarks.accelerator.report import journal_entry
from benchmarks.accelerator.report import report

ROOT = pathlib.Path(__file__).parents[1]
STEP_FIELDS = ("plain_ms", "O1_ms", "speedup")


def _units(result, part):
    return {(r["workload"], r["precision"]): r for r in result[part]}


def check_result(result, workloads, precisions, budget):
    """Every (workload, precision) of both parts once: measured and positive, or skipped with a reason."""
    assert result["benchmark"] == "accelerator"
    env = result["environment"]
    assert isinstance(env["accelerator"]["device"], str) and env["accelerator"]["device"]
    assert env["input_pipeline"] in ("tf.data", "numpy generator (no TensorFlow)")
    assert result["budget"]["seconds"] == budget and result["budget"]["used"] <= budget + 5
    measured = 0
    for part in ("step_time", "time_to_accuracy"):
        assert len(result[part]) == len(workloads) * len(precisions), result[part]
        units = _units(result, part)
        assert set(units) == {(w, p) for w in workloads for p in precisions}
        for key, record in units.items():
            if "skipped" in record:
                assert isinstance(record["skipped"], str) and record["skipped"], (part, key)
                continue
            if part == "step_time":
                measured += 1
                assert record["repeats"], key
                for field in STEP_FIELDS:
                    spread = record[field]
                    assert 0 < spread["min"] <= spread["median"] <= spread["max"], (key, field, spread)
                for model in MODELS:
                    assert isinstance(record["models"][model]["jit_compile"], bool)
                    assert record["models"][model]["warmup_seconds"] > 0
            else:
                assert set(record["runs"]) == set(VARIANTS)
                assert record["train_time_ratio"] > 0
                assert record["speedup_to_common"] is None or record["speedup_to_common"] > 0
    return measured


@pytest.mark.slow
@pytest.mark.benchmark
def test_smoke_run_accounts_for_every_workload_and_precision(tmp_path):
    # The transformer first: the cheapest unit, so that something is measured
    # inside the budget even on a loaded machine; the rest runs or is skipped.
    workloads = ["transformer", "applications", "finetune"]
    budget = 45
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.accelerator", "--smoke", "--budget", str(budget),
         "--workloads", ",".join(workloads), "--output", str(tmp_path / "accelerator_{backend}.json"),
         "--journal", str(tmp_path / "journal.md")],
        cwd=ROOT, capture_output=True, text=True, timeout=budget + 60,
    )
    seconds = time.monotonic() - start
    # 0: finished inside the budget; 3: the watchdog ended it at the deadline.
    assert proc.returncode in (0, BUDGET_EXIT), proc.stderr[-4000:]
    assert seconds < budget + 15, seconds
    (path,) = tmp_path.glob("accelerator_*.json")
    result = json.loads(path.read_text())
    assert check_result(result, workloads, list(PRECISIONS), budget) >= 1, proc.stdout[-4000:]
    assert "| workload | precision |" in proc.stdout
    if proc.returncode == 0:
        assert "accelerator check" in (tmp_path / "journal.md").read_text()
    else:
        assert result["budget"]["stopped"]


def test_stop_marks_the_cut_unit_and_every_unit_not_started():
    plan = [("step_time", "a", "float32"), ("step_time", "b", "float32"), ("time_to_accuracy", "a", "float32")]
    result = {"step_time": [{"workload": "a", "precision": "float32", "speedup": {}}], "time_to_accuracy": []}
    stop(result, plan, "the 10 s budget ran out", current=("step_time", "b", "float32"))
    assert result["budget"]["stopped"] == "the 10 s budget ran out"
    assert result["step_time"][0] == {"workload": "a", "precision": "float32", "speedup": {}}
    assert result["step_time"][1]["skipped"] == "the 10 s budget ran out"
    assert result["time_to_accuracy"][0]["skipped"] == "not started: the budget ran out"


def test_budget_allows_only_what_is_left():
    budget = Budget(100, started=time.monotonic())
    assert budget.allows(50) and not budget.allows(150)
    assert 99 < budget.left() <= 100


def test_report_and_journal_need_no_keras_objects():
    result = {
        "benchmark": "accelerator",
        "environment": {"backend": "jax", "backend_version": "0.10.2", "date": "2026-12-04T14:00:00+00:00",
                        "finished": "2026-12-04T14:07:30+00:00", "keras_version": "3.15.1",
                        "accelerator": {"device": "NVIDIA H200"}},
        "budget": {"seconds": 450, "used": 449.0, "stopped": None},
        "step_time": [
            {"workload": "applications", "precision": "float32", "plain_ms": {"median": 5.0},
             "O1_ms": {"median": 4.0}, "speedup": {"median": 1.25, "min": 1.2, "max": 1.3},
             "models": {"plain": {"jit_compile": True}, "O1": {"jit_compile": True}}},
            {"workload": "transformer", "precision": "float32", "skipped": "budget: 3 s left"},
        ],
        "time_to_accuracy": [],
    }
    text = report(result)
    assert "| applications | float32 | 5.00 | 4.00 | 1.250 [1.200, 1.300] | True/True |" in text
    assert "- step time transformer float32: budget: 3 s left" in text
    entry = journal_entry([result, failed("torch", "no module named torch")], "cmd")
    assert entry.startswith("## 2026-12-04 14:00-14:07 UTC: accelerator check, plain Keras against O1 (NVIDIA H200)")
    assert "Failed: no module named torch" in entry


def test_the_script_has_help_and_a_readme_entry(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0 and "usage: python -m benchmarks.accelerator" in capsys.readouterr().out
    readme = (ROOT / "benchmarks" / "README.md").read_text()
    assert "python -m benchmarks.accelerator" in readme and "bash benchmarks/accelerator.sh" in readme


def test_several_backends_need_an_output_per_backend(capsys):
    with pytest.raises(SystemExit):
        main(["--backends", "jax,torch", "--output", "one.json"])
    assert "--output must hold {backend}" in capsys.readouterr().err
