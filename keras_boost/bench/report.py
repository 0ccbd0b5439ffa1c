"""Reports of a benchmark result: JSON, a Markdown table, a PNG plot."""

import json
import statistics

from keras_boost.bench.harness import validate_result


def write_json(result, path):
    validate_result(result)
    with open(path, "w") as f:
        json.dump(result, f, indent=1)


def load_json(path):
    with open(path) as f:
        return validate_result(json.load(f))


def _mean_std(values):
    if not values:
        return "n/a"
    if len(values) == 1:
        return f"{values[0]:.3g}"
    return f"{statistics.mean(values):.3g} ± {statistics.stdev(values):.2g}"


def summarize(result):
    """Per (variant, precision): aggregates over seeds, and ratios to the baselines."""
    groups = {}
    for run in result["runs"]:
        groups.setdefault((run["variant"], run["precision"]), []).append(run)
    rows = []
    for (variant, precision), runs in groups.items():
        done = [r for r in runs if "skipped" not in r]
        row = {"variant": variant, "precision": precision, "runs": len(runs)}
        if not done:
            row["skipped"] = runs[0]["skipped"]
            rows.append(row)
            continue
        reached = [r["time_to_target"] for r in done if r["time_to_target"] is not None]
        row.update(
            final_accuracy=[r["final_accuracy"] for r in done],
            train_seconds=[r["train_seconds"] for r in done],
            steps_per_second=[r["steps_per_second"] for r in done],
            time_to_target=reached,
            reached=f"{len(reached)}/{len(done)}",
            note=done[0].get("note"),
        )
        rows.append(row)
    by_key = {(r["variant"], r["precision"]): r for r in rows}
    for row in rows:
        if "skipped" in row:
            continue
        base = by_key.get(("baseline", row["precision"]))
        short = by_key.get(("baseline-short", row["precision"]))
        f32 = by_key.get(("baseline", "float32"))
        if base and "skipped" not in base:
            row["time_vs_baseline"] = statistics.mean(row["train_seconds"]) / statistics.mean(base["train_seconds"])
        if f32 and "skipped" not in f32:
            row["time_vs_float32_baseline"] = statistics.mean(row["train_seconds"]) / statistics.mean(f32["train_seconds"])
        row["beats_short_baseline"] = _beats(row, short)
    return rows


def _beats(row, short):
    """Reaches the target sooner than the rescaled baseline, at least as accurate?"""
    if not short or "skipped" in short or row["variant"].startswith("baseline"):
        return None
    if not row["time_to_target"] or len(row["time_to_target"]) < len(row["final_accuracy"]):
        return False
    if short["time_to_target"] and len(short["time_to_target"]) == len(short["final_accuracy"]):
        if statistics.mean(row["time_to_target"]) >= statistics.mean(short["time_to_target"]):
            return False
    return statistics.mean(row["final_accuracy"]) >= statistics.mean(short["final_accuracy"]) - 0.005


def markdown_table(result):
    """The results as a Markdown table (mean ± std over seeds)."""
    env, work = result["environment"], result["workload"]
    lines = [
        f"Workload `{work['name']}`: {work['epochs']} epochs (short baseline: x{result['short_ratio']}), "
        f"batch {work['batch_size']}, target accuracy {work['target']}. "
        f"{env['backend']} {env['backend_version']}, Keras {env['keras_version']}, "
        f"{env['processor']} x{env['nproc']}, {env['date']}.",
        "",
        "| variant | precision | final acc. | train time (s) | × baseline | × f32 baseline | steps/s | "
        "time to target (s) | reached | beats short baseline |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in summarize(result):
        if "skipped" in row:
            reason = row["skipped"].split(".")[0]
            lines.append(f"| {row['variant']} | {row['precision']} | skipped: {reason} | | | | | | | |")
            continue
        ratio = f"{row['time_vs_baseline']:.2f}" if "time_vs_baseline" in row else "n/a"
        ratio32 = f"{row['time_vs_float32_baseline']:.2f}" if "time_vs_float32_baseline" in row else "n/a"
        verdict = {None: "—", True: "yes", False: "no"}[row["beats_short_baseline"]]
        lines.append(
            f"| {row['variant']} | {row['precision']} | {_mean_std(row['final_accuracy'])} | "
            f"{_mean_std(row['train_seconds'])} | {ratio} | {ratio32} | "
            f"{_mean_std(row['steps_per_second'])} | {_mean_std(row['time_to_target'])} | "
            f"{row['reached']} | {verdict} |"
        )
    return "\n".join(lines) + "\n"


def plot(result, path):
    """Accuracy vs training wall time, one line per run; needs matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as error:
        raise ImportError(
            "The plot needs matplotlib: pip install 'keras-boost[plot]'."
        ) from error
    fig, ax = plt.subplots(figsize=(8, 5))
    colors, styles = {}, {"float32": "-", "mixed_bfloat16": "--"}
    cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for run in result["runs"]:
        if "skipped" in run:
            continue
        color = colors.setdefault(run["variant"], cycle[len(colors) % len(cycle)])
        times, accuracies = zip(*run["curve"])
        label = f"{run['variant']} ({run['precision']})" if run["seed"] == 0 else None
        ax.plot(times, accuracies, styles.get(run["precision"], ":"), marker="o", markersize=3,
                color=color, label=label, alpha=0.8)
    ax.axhline(result["workload"]["target"], color="gray", linewidth=0.8, linestyle=":")
    ax.set_xlabel("training wall time (s, evaluation excluded)")
    ax.set_ylabel("test accuracy")
    ax.set_title(f"keras_boost bench: {result['workload']['name']} ({result['environment']['backend']})")
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
