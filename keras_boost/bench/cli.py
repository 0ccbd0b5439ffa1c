"""`keras-boost bench`: time-to-accuracy of every algorithm and level.

Example:

```shell
keras-boost bench --quick                         # baseline, baseline-short, O1, one seed: a first look
keras-boost bench --workload realistic --seeds 3 \
    --variants baseline,baseline-short,O1,less_bn,grad_freeze --precisions float32
keras-boost bench --workload resnet --seeds 3 --backend jax --output-dir results/
keras-boost bench --factory mypackage.bench:workload --variants baseline,O1
keras-boost bench --report bench_results/bench_realistic_tensorflow.json   # re-render only
keras-boost                                       # the commands (`keras-boost bench --help`: the options)
# the short baseline given O1's time (O1 took 0.68x the baseline's time in an earlier run):
keras-boost bench --workload realistic --seeds 10 --short-ratio 0.6875 --precisions float32 \
    --variants baseline,baseline-short,O1
keras-boost bench --workload realistic --seeds 2 --first-seed 3 --precisions float32 \
    --variants baseline,baseline-short,O1 --append-to bench_results/bench_realistic_tensorflow.json
python -m keras_boost.bench --quick               # the same as keras-boost bench --quick
keras-boost bench --seeds 5 --variants baseline,baseline-short,O1 --precisions float32   # a real comparison
```

`keras-boost bench --quick` is a first look: one seed, so its ratios swing
with the machine's load. A real comparison repeats the runs over seeds,
each giving every variant the same initial weights and batches: `--seeds 5`
(seeds 0-4), and `--seeds N --first-seed K --append-to RESULT.json` to add
seeds K .. K+N-1 to a result; the table then reports medians with their
min-max spreads.

The command line is parsed by the console script `keras_boost_cli`
(outside this package, so `--help` answers before Keras is imported),
which calls `run` with the parsed options; this module does not import it.
"""

import importlib
import os

__all__ = ["run"]


def _load_workload(args):
    from keras_boost.bench import catalog
    from keras_boost.bench.recipe import Workload

    if args.factory:
        module_name, _, function = args.factory.partition(":")
        if not function:
            raise SystemExit(f"--factory must look like module:function, got {args.factory!r}")
        workload = getattr(importlib.import_module(module_name), function)()
        if not isinstance(workload, Workload):
            raise SystemExit(f"{args.factory} must return a keras_boost.bench.Workload, got {type(workload).__name__}")
    elif args.workload in catalog.WORKLOADS:
        workload = catalog.WORKLOADS[args.workload]()
    else:
        raise SystemExit(f"Unknown workload {args.workload!r}; valid: {sorted(catalog.WORKLOADS)}")
    epochs = args.epochs or min(workload.epochs, args.max_epochs or workload.epochs)
    try:
        workload = workload.with_epochs(epochs)
    except ValueError as error:
        raise SystemExit(f"--epochs: {error}")
    return workload


def _one_torch_thread():
    """`--quick` trains PyTorch on one thread.

    On 2 cores shared with other jobs PyTorch's two OpenMP threads
    spin-waited for each other: 20 steps of the `quick` workload took
    25-28 CPU seconds (105-145 s) on two threads against 1.3-1.5 (10-15 s)
    on one (AMD EPYC, 2 cores at load average 14-18, 2026-12-07). Every
    variant trains on the same thread, so the comparison stays even.
    """
    import torch

    torch.set_num_threads(1)


def _write_reports(result, stem, args):
    """Writes the full table and the plot next to the JSON; prints the
    table (`--quick`: its essential columns) and the verdict."""
    from keras_boost.bench import report

    table = report.markdown_table(result, args.accuracy_drop)
    with open(stem + ".md", "w") as f:
        f.write(table)
    print("\n" + (report.quick_table(result, args.accuracy_drop) if args.quick else table))
    try:
        report.plot(result, stem + ".png", args.accuracy_drop)
        print(f"Wrote {stem}.md (every column) and {stem}.png")
    except ImportError as error:
        print(f"Wrote {stem}.md (every column); no plot: {error}")
    print("\n" + report.verdict(result, args.accuracy_drop))


def run(args):
    """Runs `keras-boost bench` with its parsed options; returns the result dict.

    Example:

    ```python
    import keras_boost_cli
    run(keras_boost_cli.parse_args(["--quick"]))
    ```
    """
    if args.report:
        from keras_boost.bench import report

        try:
            result = report.load_json(args.report)
        except (OSError, ValueError) as error:
            raise SystemExit(f"Cannot read the result {args.report!r}: {error}")
        stem = args.report[: -len(".json")] if args.report.endswith(".json") else args.report
        _write_reports(result, stem, args)
        return result
    import keras

    from keras_boost.bench import harness
    from keras_boost.bench import report
    from keras_boost.bench import results
    from keras_boost.bench import variants as bench_variants
    from keras_boost.bench.schedule import short_epochs

    if args.backend and args.backend != keras.backend.backend():
        raise SystemExit(f"--backend {args.backend}: this process runs Keras on {keras.backend.backend()} "
                         "already; start it with KERAS_BACKEND set, or through keras_boost_cli.main")

    if args.quick and keras.backend.backend() == "torch":
        _one_torch_thread()
    workload = _load_workload(args)
    if args.variants:
        variants = bench_variants.split_variants(args.variants)
    else:
        variants = list(bench_variants.DEFAULT_VARIANTS)
    precisions = [p.strip() for p in args.precisions.split(",") if p.strip()]
    try:
        for variant in variants:
            bench_variants.variant_spec(variant)
            bench_variants.variant_recipe(variant, workload)
    except ValueError as error:
        raise SystemExit(f"--variants: {error}")
    if "baseline-short" in variants:
        try:
            short_epochs(workload.epochs, args.short_ratio)
        except ValueError as error:
            raise SystemExit(f"--short-ratio / --epochs: {error}")
    earlier = report.load_json(args.append_to) if args.append_to else None  # fail before running
    os.makedirs(args.output_dir, exist_ok=True)
    stem = os.path.join(args.output_dir, f"bench_{workload.name}_{keras.backend.backend()}")
    # Saved after every run: an interrupted benchmark keeps what it measured
    # (`--report` renders it, `--append-to` extends it).
    partial = stem + "_partial.json"
    result = harness.run_benchmark(
        workload, variants, precisions, args.seeds, args.short_ratio, progress=not args.no_progress,
        burn_in_fit=not args.no_burn_in, first_seed=args.first_seed,
        on_run=lambda result_so_far: report.write_json(result_so_far, partial),
    )
    if earlier is not None:
        try:
            result = results.merge_results(earlier, result)
        except ValueError as error:
            report.write_json(result, stem + "_unmerged.json")  # the runs are not lost
            raise SystemExit(f"--append-to {args.append_to!r}: {error} This run: {stem}_unmerged.json.")
    report.write_json(result, stem + ".json")
    os.remove(partial)
    print(f"Wrote {stem}.json")
    _write_reports(result, stem, args)
    return result
