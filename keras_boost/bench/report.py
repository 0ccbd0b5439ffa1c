"""Reports of a benchmark result: JSON, a summary, a Markdown table, a PNG plot.

The summary (`summarize`) aggregates the seeds of each (variant, precision)
by their **median**, with the **min-max spread**, for the final accuracy,
the training time and the time to accuracy. A run that never reaches an
accuracy counts as an infinite time: the median is finite when more than
half of the seeds reached it (with an even number of seeds, all but at most
half minus one), and the spread's max is then "not reached".

Besides the workload's fixed target it measures, for each precision, the
time to **the baseline's median final accuracy minus 0.5 point**
(`accuracy_drop`), the accuracy a speed-up may give up, and that time as a
ratio to the baseline's own time to it. Times to an accuracy follow
`clock.time_to_accuracy`: the training time at the end of the first epoch
whose test accuracy reaches it, not interpolated between evaluations.

A workload whose metric is the test loss (`Workload(metric="loss")`, the
`lm` workload; lower is better) is reported the same way with the
directions turned: its runs record `final_loss`, the rows `final_loss`
and `final_loss_spread`, the threshold is **the baseline's median final
loss plus 0.02** (`LOSS_RISE`; the same `accuracy_drop` argument, on the
command line `--loss-rise`), a time to it is the first epoch at or below
it, "beats" means a lower loss at equal or less time (or less time at an
equal or lower loss), and the paired tables hold `loss_difference` (the
final loss minus the reference's, in nats).

A variant **beats `baseline-short`** (the baseline trained for fewer
epochs, its schedule rescaled) when its median (training time, final
accuracy) point is better in one and no worse in the other: higher accuracy
at equal or less time, or less time at equal or higher accuracy. With 3
seeds a margin inside the min-max spreads is not evidence: read the spreads
too, and `paired(result, reference="baseline-short")`. A short baseline
given a variant's measured time ratio (`short_ratio`) compares the two at
equal time; a longer one (the default 0.8 against a 0.65x variant) differs
on both axes, and on an accuracy plateau the verdict then turns on noise.

Example:

```python
from keras_boost.bench import report
result = report.load_json("bench_results/bench_realistic_tensorflow.json")
for row in report.summarize(result):
    print(row["variant"], row.get("time_to_threshold_vs_baseline"), row.get("beats_short_baseline"))
print(report.markdown_table(result))
report.plot(result, "bench_realistic_tensorflow.png")
```
"""

import json
import math
import statistics

from keras_boost.atomic_write import atomic_write
from keras_boost.bench.clock import time_to_target
from keras_boost.bench.results import result_metric
from keras_boost.bench.results import validate_result
from keras_boost.bench.variants import PLAIN_VARIANTS

__all__ = [
    "ACCURACY_DROP", "LOSS_RISE", "REAL_COMPARISON_SEEDS", "beats", "load_json", "margin", "markdown_table",
    "median_curve", "paired", "plot", "quick_table", "spread", "summarize", "verdict", "write_json",
]

# The baseline's median final accuracy minus this is the accuracy that
# "time to the baseline's accuracy" measures (0.5 point).
ACCURACY_DROP = 0.005
# For a loss workload: the baseline's median final loss plus this (nats).
LOSS_RISE = 0.02
_EPS = 1e-9
# "beats short baseline": "—" for the baselines themselves.
_BEATS = {None: "—", True: "yes", False: "no"}
# Fewer seeds than this make the verdict say it is a first look only.
REAL_COMPARISON_SEEDS = 5


def write_json(result, path):
    """Validates `result` and writes it as JSON to `path` (atomically: a
    reader never sees a half-written file)."""
    validate_result(result)
    atomic_write(path, lambda f: f.write(json.dumps(result, indent=1).encode()))


def load_json(path):
    """Reads and validates a result written by `write_json`."""
    with open(path) as f:
        return validate_result(json.load(f))


def spread(values):
    """Median, min and max of `values`; None stands for "never reached" (+inf).

    Returns:
        `{"median": m, "min": lo, "max": hi}` (floats, possibly `math.inf`),
        or None when `values` is empty.

    Example:

    ```python
    spread([3.0, 1.0, 2.0])     # {"median": 2.0, "min": 1.0, "max": 3.0}
    spread([3.0, None, 1.0])    # {"median": 3.0, "min": 1.0, "max": inf}
    ```
    """
    values = [math.inf if v is None else float(v) for v in values]
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def beats(time, accuracy, other_time, other_accuracy, lower_is_better=False):
    """Whether (time, accuracy) is better than the other point in one, no worse in the other.

    Higher accuracy at equal or less time, or less time at equal or higher
    accuracy (Pareto dominance; accuracies equal within 1e-9 are equal).
    With `lower_is_better` (a loss) the second coordinate is better lower.

    Example:

    ```python
    beats(90, 0.985, 100, 0.985)   # True: less time, same accuracy
    beats(90, 0.980, 100, 0.985)   # False: faster but less accurate
    beats(100, 0.99, 100, 0.985)   # True: same time, more accurate
    beats(90, 1.20, 100, 1.25, lower_is_better=True)   # True: less time, lower loss
    ```
    """
    if lower_is_better:
        accuracy, other_accuracy = -accuracy, -other_accuracy
    higher = accuracy > other_accuracy + _EPS
    not_lower = accuracy >= other_accuracy - _EPS
    return bool((higher and time <= other_time) or (time < other_time and not_lower))


def _ratio(numerator, denominator):
    if numerator is None or denominator is None or math.isinf(denominator) or denominator <= 0:
        return None
    return numerator / denominator  # inf when the numerator never reached


def margin(result, accuracy_drop=None):
    """The threshold's distance from the baseline's median final value:
    `accuracy_drop`, or by default `ACCURACY_DROP` (accuracy) or
    `LOSS_RISE` (loss); checked to be in [0, 1).

    Example:

    ```python
    margin(lm_result)          # 0.02
    margin(tiny_result, 0.01)  # 0.01
    ```
    """
    if accuracy_drop is None:
        accuracy_drop = LOSS_RISE if result_metric(result) == "loss" else ACCURACY_DROP
    if not 0 <= accuracy_drop < 1:
        raise ValueError(f"accuracy_drop must be in [0, 1), got {accuracy_drop!r}.")
    return accuracy_drop


def _threshold_label(result, accuracy_drop):
    """The threshold's name in the tables: "base -0.5pt", or "base +0.02" for a loss."""
    if result_metric(result) == "loss":
        return f"base +{accuracy_drop:g}"
    return f"base -{accuracy_drop * 100:g}pt"


def _value_name(result):
    return "val. loss" if result_metric(result) == "loss" else "acc."


def summarize(result, accuracy_drop=None):
    """Per (variant, precision): medians and spreads over seeds, ratios, verdicts.

    Args:
        result: a benchmark result (see `harness.run_benchmark`).
        accuracy_drop: the threshold accuracy of a precision is the median
            final accuracy of its `baseline` minus this (default
            `ACCURACY_DROP`); for a loss workload, the threshold loss is
            the baseline's median final loss plus this (default
            `LOSS_RISE`), and `final_loss` replaces `final_accuracy` below.

    Returns:
        A list of row dicts, in the order the variants first ran. Each row
        holds `variant`, `precision`, `runs` and either `skipped` (the
        reason) or: the per-seed lists `final_accuracy`, `train_seconds`,
        `steps_per_second`, `time_to_target` and `time_to_threshold` (None:
        not reached), ordered by seed; their `spread`s under the same name
        plus `_spread`; `reached` / `threshold_reached` ("k/n");
        `threshold`; `time_vs_baseline` and `time_vs_float32_baseline`
        (ratios of median training times); `time_to_threshold_vs_baseline`
        (median time to the threshold over the baseline's; inf when the
        variant's median never reached it); `beats_short_baseline` (True,
        False, or None for the baselines or without a `baseline-short`).

    Example:

    ```python
    rows = summarize(result)
    row = next(r for r in rows if r["variant"] == "O1")
    row["final_accuracy_spread"]           # {"median": ..., "min": ..., "max": ...}
    row["time_to_threshold_vs_baseline"]   # < 1: reached the baseline's accuracy sooner
    ```
    """
    accuracy_drop = margin(result, accuracy_drop)
    lower = result_metric(result) == "loss"
    final = f"final_{result_metric(result)}"
    groups = {}
    for run in result["runs"]:
        groups.setdefault((run["variant"], run["precision"]), []).append(run)
    rows = []
    for (variant, precision), runs in groups.items():
        done = sorted((r for r in runs if "skipped" not in r), key=lambda r: r["seed"])
        row = {"variant": variant, "precision": precision, "runs": len(runs)}
        if not done:
            row["skipped"] = runs[0]["skipped"]
            rows.append(row)
            continue
        reached = [r["time_to_target"] for r in done]
        row.update(
            seeds=[r["seed"] for r in done],
            **{final: [r[final] for r in done]},
            train_seconds=[r["train_seconds"] for r in done],
            steps_per_second=[r["steps_per_second"] for r in done],
            time_to_target=reached,
            reached=f"{sum(t is not None for t in reached)}/{len(done)}",
            note=done[0].get("note"),
            _curves=[r["curve"] for r in done],
        )
        for key in (final, "train_seconds", "steps_per_second", "time_to_target"):
            row[key + "_spread"] = spread(row[key])
        rows.append(row)

    by_key = {(r["variant"], r["precision"]): r for r in rows if "skipped" not in r}
    thresholds = {}
    for (variant, precision), row in by_key.items():
        if variant == "baseline":
            median = row[final + "_spread"]["median"]
            thresholds[precision] = median + accuracy_drop if lower else median - accuracy_drop
    for row in rows:
        if "skipped" in row:
            continue
        precision = row["precision"]
        base = by_key.get(("baseline", precision))
        short = by_key.get(("baseline-short", precision))
        f32 = by_key.get(("baseline", "float32"))
        median_time = row["train_seconds_spread"]["median"]
        row["threshold"] = thresholds.get(precision)
        if row["threshold"] is not None:
            times = [time_to_target(curve, row["threshold"], lower) for curve in row["_curves"]]
            row["time_to_threshold"] = times
            row["time_to_threshold_spread"] = spread(times)
            row["threshold_reached"] = f"{sum(t is not None for t in times)}/{len(times)}"
        if base:
            row["time_vs_baseline"] = median_time / base["train_seconds_spread"]["median"]
        if f32:
            row["time_vs_float32_baseline"] = median_time / f32["train_seconds_spread"]["median"]
        row["beats_short_baseline"] = None
        if short and not row["variant"].startswith("baseline"):
            row["beats_short_baseline"] = beats(
                median_time, row[final + "_spread"]["median"],
                short["train_seconds_spread"]["median"], short[final + "_spread"]["median"], lower,
            )
    for row in rows:
        if "time_to_threshold_spread" in row:
            base = by_key[("baseline", row["precision"])]
            row["time_to_threshold_vs_baseline"] = _ratio(
                row["time_to_threshold_spread"]["median"], base["time_to_threshold_spread"]["median"]
            )
        row.pop("_curves", None)
    return rows


def _paired_ratio(time, reference_time):
    """A seed's time to the threshold over its reference's (see `paired`)."""
    if time is None:
        return None  # never reached: +inf in `spread`, even if the reference never did either
    return 0.0 if reference_time is None else time / reference_time


def paired(result, accuracy_drop=None, reference="baseline"):
    """Each variant against the `reference` run of the same seed and precision.

    A seed gives every variant the same initial weights, augmentations and
    batch order, so per-seed ratios cancel what the seeds share; their
    spread shows what medians of separate columns hide. Against
    `"baseline-short"` this is the per-seed form of the "beats the short
    baseline" verdict, which compares medians of separate columns.

    Args:
        result: a benchmark result.
        accuracy_drop: as in `summarize` (the threshold is always the
            `baseline`'s median final accuracy minus it).
        reference: `"baseline"` or `"baseline-short"`. Against
            `"baseline-short"` only the non-baseline variants are paired.

    Returns:
        A list of dicts, one per (variant, precision) with at least one
        seed in common with its reference: `variant`, `precision`,
        `reference`, `seeds`, and per seed (ordered by seed) `time_ratio`
        (training time over the reference's), `threshold_time_ratio` (time
        to the threshold of `summarize` over the reference's: None, read
        as "not reached", when the variant never reached it; 0 when only
        the reference never did) and `accuracy_difference` (final accuracy
        minus the reference's, in points; for a loss workload
        `loss_difference`, the final loss minus the reference's in nats),
        each also as a `spread` under
        the name plus `_spread`.

    Example:

    ```python
    row = next(r for r in paired(result) if r["variant"] == "O1")
    row["time_ratio_spread"]["median"], row["accuracy_difference"]
    paired(result, reference="baseline-short")   # O1 against the short run
    ```
    """
    if reference not in ("baseline", "baseline-short"):
        raise ValueError(f"reference must be 'baseline' or 'baseline-short', got {reference!r}.")
    thresholds = {r["precision"]: r.get("threshold") for r in summarize(result, accuracy_drop)
                  if r["variant"] == "baseline"}
    lower = result_metric(result) == "loss"
    final = f"final_{result_metric(result)}"
    difference = "loss_difference" if lower else "accuracy_difference"
    runs = {(r["variant"], r["precision"], r["seed"]): r for r in result["runs"] if "skipped" not in r}
    rows = {}
    for (variant, precision, seed), run in sorted(runs.items(), key=lambda item: item[0][2]):
        base = runs.get((reference, precision, seed))
        if variant == reference or base is None or (reference != "baseline" and variant.startswith("baseline")):
            continue
        row = rows.setdefault((variant, precision), {
            "variant": variant, "precision": precision, "reference": reference, "seeds": [],
            "time_ratio": [], "threshold_time_ratio": [], difference: []})
        threshold = thresholds.get(precision)
        reached = [time_to_target(r["curve"], threshold, lower) if threshold is not None else None
                   for r in (run, base)]
        row["seeds"].append(seed)
        row["time_ratio"].append(run["train_seconds"] / base["train_seconds"])
        row["threshold_time_ratio"].append(_paired_ratio(*reached))
        row[difference].append((1.0 if lower else 100.0) * (run[final] - base[final]))
    for row in rows.values():
        for key in ("time_ratio", "threshold_time_ratio", difference):
            row[key + "_spread"] = spread(row[key])
    return list(rows.values())


def _number(value, digits):
    if value is None:
        return "n/a"
    if math.isinf(value):
        return "not reached"
    return f"{value:.{digits}g}"


def _format_spread(stats, digits=3, number=_number):
    """`median [min, max]`, or the value alone for one seed."""
    if stats is None:
        return "n/a"
    if stats["min"] == stats["max"]:
        return number(stats["median"], digits)
    return f"{number(stats['median'], digits)} [{number(stats['min'], digits)}, {number(stats['max'], digits)}]"


def _paired_time_ratio(value, digits):
    """A paired ratio of times to the threshold: 0 means only the reference never reached it."""
    return "ref. never" if value == 0 else _number(value, digits)


def _format_ratio(value):
    if value is None:
        return "n/a"
    return "not reached" if math.isinf(value) else f"{value:.2f}"


def _paired_table(pairs, result, accuracy_drop):
    """Markdown lines of `paired`'s rows (none when there are no rows)."""
    if not pairs:
        return []
    reference = pairs[0]["reference"]
    loss = result_metric(result) == "loss"
    difference = "loss_difference" if loss else "accuracy_difference"
    unit = "final val. loss − {} (nats)" if loss else "final acc. − {} (points)"
    lines = [
        "",
        f"Paired with the {reference} run of the same seed (same initial weights, augmentations and "
        "batch order): median [min, max] over the seeds both ran; \"ref. never\": only the "
        f"{reference} run never reached the {'loss' if loss else 'accuracy'}.",
        "",
        f"| variant | precision | seeds | train time × {reference} | "
        f"time to {_threshold_label(result, accuracy_drop)} × {reference}'s | {unit.format(reference)} |",
        "|---|---|---|---|---|---|",
    ]
    for row in pairs:
        lines.append(
            f"| {row['variant']} | {row['precision']} | {len(row['seeds'])} | "
            f"{_format_spread(row['time_ratio_spread'], 2)} | "
            f"{_format_spread(row['threshold_time_ratio_spread'], 2, _paired_time_ratio)} | "
            f"{_format_spread(row[difference + '_spread'], 2)} |"
        )
    return lines


def markdown_table(result, accuracy_drop=None):
    """The summary as a Markdown table: median [min, max] over seeds.

    Example:

    ```python
    print(markdown_table(load_json("bench_results/bench_realistic_tensorflow.json")))
    ```
    """
    env, work = result["environment"], result["workload"]
    accuracy_drop = margin(result, accuracy_drop)
    rows = summarize(result, accuracy_drop)
    loss = result_metric(result) == "loss"
    final, value = f"final_{result_metric(result)}", _value_name(result)
    label = _threshold_label(result, accuracy_drop)
    seeds = max((r["runs"] for r in rows), default=0)
    recipe = f"batch {work['batch_size']}, peak learning rate {work['learning_rate']}"
    if work.get("warmup_epochs"):
        recipe += f", {work['warmup_epochs']:g}-epoch warmup"
    if work.get("weight_decay"):
        recipe += f", weight decay {work['weight_decay']:g}"
    thresholds = ", ".join(
        f"{r['precision']} {r['threshold']:.4f}" for r in rows
        if r["variant"] == "baseline" and r.get("threshold") is not None
    )
    cpu = env.get("cpu_model") or env.get("processor")
    lines = [
        f"Workload `{work['name']}`: {work['epochs']} epochs (short baseline: x{result['short_ratio']}), "
        f"{recipe}, target {'validation loss' if loss else 'accuracy'} {work['target']}; {seeds} seed(s)"
        f"{', runs interleaved' if result['version'] >= 2 else ''}. "
        f"{env['backend']} {env['backend_version']}, Keras {env['keras_version']}, "
        f"{cpu} x{env['nproc']}, {env['date']}.",
        "",
        f"Median [min, max] over seeds. \"{label}\": time to the baseline's median "
        + (f"final validation loss plus {accuracy_drop:g} ({thresholds or 'no baseline'}), at the end of "
           if loss else
           f"final accuracy minus {accuracy_drop * 100:g} point ({thresholds or 'no baseline'}), at the end of ")
        + 
        "the first epoch that reaches it; \"× base's\" divides it by the baseline's own. Times are training "
        "seconds (compilation included, evaluation excluded).",
        "",
        f"| variant | precision | final {value} | train time (s) | × baseline | × f32 baseline | steps/s | "
        f"time to {work['target']} (s) | reached | time to {label} (s) | reached | "
        "× base's | beats short baseline |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        if "skipped" in row:
            reason = row["skipped"].split(".")[0]
            lines.append(f"| {row['variant']} | {row['precision']} | skipped: {reason} |" + " |" * 10)
            continue
        verdict = _BEATS[row["beats_short_baseline"]]
        lines.append(
            f"| {row['variant']} | {row['precision']} | {_format_spread(row[final + '_spread'], 4)} | "
            f"{_format_spread(row['train_seconds_spread'])} | {_format_ratio(row.get('time_vs_baseline'))} | "
            f"{_format_ratio(row.get('time_vs_float32_baseline'))} | "
            f"{_format_spread(row['steps_per_second_spread'])} | {_format_spread(row['time_to_target_spread'])} | "
            f"{row['reached']} | {_format_spread(row.get('time_to_threshold_spread'))} | "
            f"{row.get('threshold_reached', 'n/a')} | "
            f"{_format_ratio(row.get('time_to_threshold_vs_baseline'))} | {verdict} |"
        )
    lines += _paired_table(paired(result, accuracy_drop), result, accuracy_drop)
    lines += _paired_table(paired(result, accuracy_drop, "baseline-short"), result, accuracy_drop)
    return "\n".join(lines) + "\n"


def quick_table(result, accuracy_drop=None):
    """The essential columns of `markdown_table`, narrow enough for a terminal.

    Variant, final accuracy, training time and its ratio to the baseline's,
    time to the baseline's accuracy minus `accuracy_drop`, and whether the
    variant beats `baseline-short` (`keras-boost bench --help` explains
    each); `keras-boost bench --quick` prints it, the .md file holds every
    column.

    Example:

    ```python
    print(quick_table(load_json("bench_results/bench_quick_torch.json")))
    ```
    """
    accuracy_drop = margin(result, accuracy_drop)
    rows = summarize(result, accuracy_drop)
    final = f"final_{result_metric(result)}"
    several = len({r["precision"] for r in rows}) > 1
    header = ["variant", f"final {_value_name(result)}", "train time (s)", "× baseline",
              f"time to {_threshold_label(result, accuracy_drop)} (s)", "beats short"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        name = f"{row['variant']} ({row['precision']})" if several else row["variant"]
        if "skipped" in row:
            lines.append(f"| {name} | skipped: {row['skipped'].split('.')[0]} |" + " |" * (len(header) - 2))
            continue
        cells = [name, _format_spread(row[final + "_spread"], 4), _format_spread(row["train_seconds_spread"]),
                 _format_ratio(row.get("time_vs_baseline")), _format_spread(row.get("time_to_threshold_spread")),
                 _BEATS[row["beats_short_baseline"]]]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _finding(row, baseline, name, metric="accuracy"):
    """What one keras_boost variant did against the baseline, in words."""
    if "skipped" in row:
        return f"{name} was skipped"
    text = name
    if baseline is not None:
        final = f"final_{metric}_spread"
        difference = row[final]["median"] - baseline[final]["median"]
        text += f" trained in {row['time_vs_baseline']:.2f}x the baseline's time and ended "
        text += (f"{difference:+.3f} from its final validation loss" if metric == "loss"
                 else f"{100.0 * difference:+.1f} points from its final accuracy")
    if row["beats_short_baseline"] is not None:
        text += " and beat baseline-short" if row["beats_short_baseline"] else " but did not beat baseline-short"
    return text


def _load(environment, key):
    loads = environment.get(key)
    return "?" if not loads else f"{loads[0]:.1f}"


def verdict(result, accuracy_drop=None):
    """One line: what a benchmark found for each keras_boost variant, and how sure it is.

    How sure: the number of seeds, and the load average before and after
    the runs (a loaded machine stretches some runs more than others). Below
    `REAL_COMPARISON_SEEDS` seeds it says that this is a first look and
    how to make a real comparison.

    Example:

    ```python
    verdict(result)
    # "Verdict: O1 trained in 0.81x the baseline's time and ended -0.4 points from its final accuracy
    #  but did not beat baseline-short. 1 seed, load average 3.2 -> 4.1 on 2 CPUs: ..."
    ```
    """
    rows = summarize(result, accuracy_drop)
    baselines = {r["precision"]: r for r in rows if r["variant"] == "baseline" and "skipped" not in r}
    several = len({r["precision"] for r in rows}) > 1
    findings = [
        _finding(r, baselines.get(r["precision"]), f"{r['variant']} ({r['precision']})" if several else r["variant"],
                 result_metric(result))
        for r in rows if r["variant"] not in PLAIN_VARIANTS
    ]
    found = "; ".join(findings) if findings else "only plain Keras variants ran"
    seeds = len({r["seed"] for r in result["runs"]})
    env = result["environment"]
    sureness = (f"{seeds} seed{'s' if seeds > 1 else ''}, load average {_load(env, 'load_average')} -> "
                f"{_load(env, 'load_average_finished')} on {env.get('nproc', '?')} CPUs")
    if seeds < REAL_COMPARISON_SEEDS:
        sureness += (": a first look, whose ratios swing with the load; a real comparison: "
                     f"--seeds {REAL_COMPARISON_SEEDS} (the min-max spreads then say how sure)")
    else:
        sureness += ": read the min-max spreads and the paired tables of the .md file"
    return f"Verdict: {found}. {sureness}."


def median_curve(curves):
    """Per epoch: median time, median / min / max accuracy over seeds.

    Seeds of one variant have the same number of epochs; if not, the
    curves are cut to the shortest.

    Returns:
        `(times, median_accuracy, min_accuracy, max_accuracy)`, lists with
        one entry per epoch.

    Example:

    ```python
    median_curve([[[10, 0.9], [20, 0.95]], [[12, 0.8], [22, 0.97]], [[11, 0.85], [21, 0.96]]])
    # ([11, 21], [0.85, 0.96], [0.8, 0.95], [0.9, 0.97])
    ```
    """
    epochs = min(len(c) for c in curves)
    times, med, low, high = [], [], [], []
    for e in range(epochs):
        ts = [c[e][0] for c in curves]
        accs = [c[e][1] for c in curves]
        times.append(statistics.median(ts))
        med.append(statistics.median(accs))
        low.append(min(accs))
        high.append(max(accs))
    return times, med, low, high


def plot(result, path, accuracy_drop=None):
    """Accuracy vs training time per precision, and a time vs accuracy panel.

    One panel per precision: for each variant, the median over seeds of the
    test accuracy at each epoch against the median training time at that
    epoch, with the min-max band of the accuracy; the workload's target and
    the baseline's final accuracy minus `accuracy_drop` as horizontal lines.
    A last panel places each (variant, precision) at its median training
    time and final accuracy, with min-max error bars (up and left is
    better). A loss workload plots the validation loss (down and left is
    better), its threshold the baseline's final loss plus `accuracy_drop`.
    Needs matplotlib (`pip install 'keras-boost[plot]'`).

    Example:

    ```python
    plot(load_json("bench_results/bench_realistic_tensorflow.json"), "realistic.png")
    ```
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as error:
        raise ImportError(
            "The plot needs matplotlib: pip install 'keras-boost[plot]'."
        ) from error
    accuracy_drop = margin(result, accuracy_drop)
    loss = result_metric(result) == "loss"
    final, value = f"final_{result_metric(result)}", ("validation loss" if loss else "test accuracy")
    rows = [r for r in summarize(result, accuracy_drop) if "skipped" not in r]
    curves = {}
    for run in result["runs"]:
        if "skipped" not in run:
            curves.setdefault((run["variant"], run["precision"]), []).append(run["curve"])
    precisions = list(dict.fromkeys(r["precision"] for r in rows))
    variants = list(dict.fromkeys(r["variant"] for r in rows))
    cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    colors = {v: cycle[i % len(cycle)] for i, v in enumerate(variants)}
    markers = dict(zip(precisions, "osD^v"))

    # The interesting range is near the end: start the axis a little under
    # the lowest accuracy of the second half of any run.
    late = [a for c in curves.values() for curve in c for _, a in curve[len(curve) // 2:]]
    lowest = min(late, default=0.0)
    bottom = max(0.0, lowest - 0.5 * (1.0 - lowest))

    fig, axes = plt.subplots(1, len(precisions) + 1, figsize=(6 * (len(precisions) + 1), 4.8), squeeze=False)
    axes = axes[0]
    for ax, precision in zip(axes, precisions):
        for variant in variants:
            if (variant, precision) not in curves:
                continue
            times, med, low, high = median_curve(curves[(variant, precision)])
            color = colors[variant]
            ax.plot(times, med, marker="o", markersize=3, color=color, label=variant)
            if len(curves[(variant, precision)]) > 1:
                ax.fill_between(times, low, high, color=color, alpha=0.15, linewidth=0)
        ax.axhline(result["workload"]["target"], color="gray", linewidth=0.8, linestyle=":",
                   label=f"target {result['workload']['target']}")
        threshold = next((r["threshold"] for r in rows
                          if r["precision"] == precision and r.get("threshold") is not None), None)
        if threshold is not None:
            ax.axhline(threshold, color="black", linewidth=0.8, linestyle="--",
                       label=f"baseline {_threshold_label(result, accuracy_drop)[5:]} ({threshold:.3f})")
        if not loss:
            ax.set_ylim(bottom, 1.0)
        ax.set_xlabel("training wall time (s, evaluation excluded)")
        ax.set_ylabel(f"{value} (median, min-max band)")
        ax.set_title(f"{precision}: {'loss' if loss else 'accuracy'} vs time")
        ax.legend(fontsize=7, loc="upper right" if loss else "lower right")
        ax.grid(alpha=0.3)

    ax = axes[-1]
    for row in rows:
        t, a = row["train_seconds_spread"], row[final + "_spread"]
        ax.errorbar(
            t["median"], a["median"],
            xerr=[[t["median"] - t["min"]], [t["max"] - t["median"]]],
            yerr=[[a["median"] - a["min"]], [a["max"] - a["median"]]],
            fmt=markers[row["precision"]], color=colors[row["variant"]], capsize=3,
            label=f"{row['variant']} ({row['precision']})" if len(precisions) > 1 else row["variant"],
        )
    ax.set_xlabel("training wall time (s), median and min-max")
    ax.set_ylabel(f"final {value}, median and min-max")
    ax.set_title(f"time vs final {'loss (down' if loss else 'accuracy (up'}-left is better)")
    ax.legend(fontsize=7, loc="best")
    ax.grid(alpha=0.3)
    env = result["environment"]
    fig.suptitle(
        f"keras_boost bench: {result['workload']['name']} ({env['backend']}, "
        f"{env.get('cpu_model') or env.get('processor')} x{env.get('nproc')})", fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
