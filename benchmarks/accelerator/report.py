"""Markdown of the results: one backend's tables, and a draft entry of the results journal."""

import datetime

__all__ = ["journal_entry", "now", "report"]


def now():
    return datetime.datetime.now().astimezone().isoformat(timespec="seconds")


def number(value, digits=2):
    return "—" if value is None else f"{value:.{digits}f}"


def report(result):
    """Markdown tables of one backend's result (plain dicts: no Keras needed).

    Example:

    ```python
    print(report(json.load(open("bench_results/accelerator_jax.json"))))
    ```
    """
    env = result.get("environment", {})
    accelerator = env.get("accelerator", {})
    lines = [f"### {env.get('backend', '?')} {env.get('backend_version', '')} on {accelerator.get('device', '?')}", ""]
    if result.get("failed"):
        return "\n".join(lines + [f"Failed: {result['failed']}", ""])
    skipped = []
    steps = [r for r in result.get("step_time", []) if "skipped" not in r]
    if steps:
        lines += ["| workload | precision | plain ms/step | O1 ms/step | O1 speed-up median [min, max] | "
                  "jit plain/O1 |", "|---|---|---|---|---|---|"]
    else:
        lines.append("No step time measured.")
    for r in result.get("step_time", []):
        if "skipped" in r:
            skipped.append((f"step time {r['workload']} {r['precision']}", r["skipped"]))
            continue
        s, models = r["speedup"], r["models"]
        lines.append(f"| {r['workload']} | {r['precision']} | {number(r['plain_ms']['median'])} | "
                     f"{number(r['O1_ms']['median'])} | {s['median']:.3f} [{s['min']:.3f}, {s['max']:.3f}] | "
                     f"{models['plain']['jit_compile']}/{models['O1']['jit_compile']} |")
    tta = [r for r in result.get("time_to_accuracy", []) if "skipped" not in r]
    if tta:
        lines += ["", "| workload | precision | epochs | final acc. baseline / O1 | train s baseline / O1 | "
                  "time to common acc. baseline / O1 (s) | O1 speed-up |", "|---|---|---|---|---|---|---|"]
    for r in result.get("time_to_accuracy", []):
        if "skipped" in r:
            skipped.append((f"time to accuracy {r['workload']} {r['precision']}", r["skipped"]))
            continue
        runs = r["runs"]
        if "common_accuracy" not in r:
            skipped.append((f"time to accuracy {r['workload']} {r['precision']}", "a variant was skipped: "
                            + "; ".join(run["skipped"] for run in runs.values() if "skipped" in run)))
            continue
        t = r["time_to_common"]
        lines.append(f"| {r['workload']} | {r['precision']} | {r['epochs']} | "
                     f"{runs['baseline']['final_accuracy']:.4f} / {runs['O1']['final_accuracy']:.4f} | "
                     f"{runs['baseline']['train_seconds']:.1f} / {runs['O1']['train_seconds']:.1f} | "
                     f"{number(t['baseline'], 1)} / {number(t['O1'], 1)} (to {r['common_accuracy']:.4f}) | "
                     f"{number(r['speedup_to_common'], 3)} |")
    budget = result.get("budget", {})
    lines += ["", f"Budget {budget.get('seconds')} s, used {budget.get('used')} s"
              + (f"; stopped: {budget['stopped']}" if budget.get("stopped") else "") + "."]
    if skipped:
        reasons = {}  # the same reason once, with every unit it skipped
        for unit, reason in skipped:
            reasons.setdefault(reason, []).append(unit)
        lines += ["", "Skipped:"] + [f"- {', '.join(units)}: {reason}" for reason, units in reasons.items()]
    return "\n".join(lines) + "\n"


def utc(text):
    return datetime.datetime.fromisoformat(text).astimezone(datetime.timezone.utc)


def journal_entry(results, command):
    """A draft entry of `benchmarks/results/JOURNAL.md` for the results of one check."""
    envs = [r.get("environment", {}) for r in results]
    dates = sorted(utc(e[k]) for e in envs for k in ("date", "finished") if e.get(k))
    devices = sorted({e.get("accelerator", {}).get("device", "?") for e in envs if e.get("accelerator")})
    backends = ", ".join(f"{e.get('backend')} {e.get('backend_version', '')}".strip() for e in envs)
    keras_versions = sorted({e.get("keras_version") for e in envs if e.get("keras_version")})
    when = f"{dates[0]:%Y-%m-%d %H:%M}-{dates[-1]:%H:%M} UTC" if dates else f"{utc(now()):%Y-%m-%d %H:%M} UTC"
    lines = [
        f"## {when}: accelerator check, plain Keras against O1 ({', '.join(devices) or 'no device recorded'})",
        "",
        f"- Machine: {', '.join(devices) or '?'}; CPU {envs[0].get('cpu_model', '?') if envs else '?'} "
        f"x{envs[0].get('nproc', '?') if envs else '?'}; {backends} / Keras {', '.join(keras_versions) or '?'}",
        f"- Command: `{command}`",
        "- Data: " + (", ".join(f"`benchmarks/results/accelerator_{e.get('backend')}.json`" for e in envs
                                if e.get("date")) or "none written"),
        "",
        "Step time: interleaved fits of the same batches, median [min, max] over the repeats; "
        "time to accuracy: one seed, the workload shortened (see `benchmarks/accelerator/`).",
        "",
    ]
    for result in results:
        lines.append(report(result))
    return "\n".join(lines)
