"""LessBN and fused batch norm: step time per variant, and LessBN's time to accuracy.

Three workloads, each trained as the original model ("baseline") and as
`LessBN(model, fn_flag=True)` compiled with `GradientCentralization` (what
the less_bn part of level O1 does: "less_bn"); `--variants` adds "fused"
(`boost.surgery.fuse_batch_norm(model)`: every BN trained with one fused
kernel) and "less_bn+fused" (both: O1's model):

- `residual_cnn`: the quickstart CNN on the embedded MNIST sample, batch 64;
- `realistic`: the bench's realistic ResNet-20 (with its augmentation
  layers) on the same sample, batch 32;
- `resnet50`: `keras.applications.ResNet50(weights=None)` on random 64x64x3
  images, 10 classes, batch 16.

Step time: each model is warmed up (compilation excluded), then each repeat
runs one `fit` epoch of `--steps` batches per variant, timed from
`on_epoch_begin` to `on_epoch_end`; variants are interleaved and their order
alternates between repeats. Reported: median seconds per step, and per
variant the per-repeat ratio to the baseline (median, min, max).

Time to accuracy (`--accuracy`): the quickstart CNN on MNIST, SGD(0.05,
momentum 0.9), from the same initial weights and batch order, evaluated on
the test split after each epoch; reports the training time until the test
accuracy first reaches `--target`, and the final accuracy. A third variant,
"less_bn_no_fn" (BN removal and GC, the original Dense head), separates the
BN removal from the NormalizedDense head.

Example:

```shell
KERAS_BACKEND=tensorflow python -m benchmarks.less_bn --output less_bn_tf.json
KERAS_BACKEND=jax python -m benchmarks.less_bn --quick
python -m benchmarks.less_bn --workloads realistic,resnet50 \
    --variants baseline,less_bn,fused,less_bn+fused --output fused_tf.json
```
"""

import gc
import statistics
import time
import warnings

import keras
import numpy as np

import keras_boost as boost
from benchmarks import runner
from benchmarks.overhead import EpochTimer
from keras_boost.bench.catalog import realistic_workload
from keras_boost.bench.report import spread
from keras_boost.bench.workloads import mnist_data
from keras_boost.bench.workloads import residual_cnn

SEED = 1234
VARIANTS = ("baseline", "less_bn", "fused", "less_bn+fused")
DEFAULT_VARIANTS = "baseline,less_bn"
# The accuracy run also trains LessBN without the NormalizedDense head, to
# separate the BN removal from the head.
ACCURACY_VARIANTS = ("baseline", "less_bn", "less_bn_no_fn")


def parse_args(argv=None):
    parser = runner.parser("less_bn", __doc__)
    parser.add_argument("--workloads", default="residual_cnn,resnet50",
                        help="comma-separated; empty: no step-time run")
    parser.add_argument("--variants", default=DEFAULT_VARIANTS,
                        help=f"comma-separated step-time variants, baseline first; of {', '.join(VARIANTS)}")
    parser.add_argument("--steps", type=int, default=30, help="timed steps per repeat")
    parser.add_argument("--repeats", type=int, default=5, help="timed repeats per variant (default 5)")
    parser.add_argument("--accuracy", action="store_true", help="also run time to accuracy")
    parser.add_argument("--epochs", type=int, default=8, help="epochs of the accuracy run")
    parser.add_argument("--target", type=float, default=0.93, help="target test accuracy")
    parser.add_argument("--quick", action="store_true", help="few steps, 2 repeats")
    args = runner.parse(parser, argv, positive=("steps", "repeats", "epochs"))
    if args.quick:
        args.steps, args.repeats = 5, 2
    args.variants = tuple(v.strip() for v in args.variants.split(",") if v.strip())
    unknown = [v for v in args.variants if v not in VARIANTS]
    if unknown or not args.variants or args.variants[0] != "baseline":
        parser.error(f"--variants must start with baseline and name only {list(VARIANTS)}, got {args.variants}")
    return args


def build_workload(name):
    """`(model, x, y, batch_size)` for one workload."""
    keras.utils.set_random_seed(SEED)
    if name == "residual_cnn":
        (x, y), _ = mnist_data()
        return residual_cnn(seed=SEED), x, y, 64
    if name == "realistic":
        (x, y), _ = mnist_data()
        return realistic_workload().build(SEED), x, y, 32
    if name == "resnet50":
        model = keras.applications.ResNet50(weights=None, input_shape=(64, 64, 3), classes=10,
                                            classifier_activation=None)
        rng = np.random.default_rng(SEED)
        x = rng.random((16 * 8, 64, 64, 3), dtype=np.float32)
        y = rng.integers(0, 10, len(x)).astype("int32")
        return model, x, y, 16
    raise ValueError(f"Unknown workload {name!r}; valid: 'residual_cnn', 'realistic', 'resnet50'.")


def variant(model, name, lr=0.05):
    """The model and optimizer of one variant, compiled."""
    optimizer = keras.optimizers.SGD(lr, momentum=0.9)
    if name in ("less_bn", "less_bn_no_fn", "less_bn+fused"):
        model = boost.LessBN(model, fn_flag=name != "less_bn_no_fn")
        optimizer = boost.GradientCentralization(optimizer)
    if name in ("fused", "less_bn+fused"):
        model = boost.surgery.fuse_batch_norm(model)
    model.compile(optimizer=optimizer, metrics=["accuracy"],
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def _take(x, y, steps, batch_size, offset=0):
    n = steps * batch_size
    idx = (np.arange(n) + offset) % len(x)
    return x[idx], y[idx]


def step_times(workload, steps, repeats, variants=("baseline", "less_bn")):
    base, x, y, batch_size = build_workload(workload)
    models = {v: variant(base, v) for v in variants}
    report = boost.surgery.find_less_bn(base)
    for model in models.values():  # warm-up: compilation excluded
        wx, wy = _take(x, y, 3, batch_size)
        model.fit(wx, wy, batch_size=batch_size, epochs=1, shuffle=False, verbose=0)
    per_step = {v: [] for v in variants}
    for r in range(repeats):
        order = variants if r % 2 == 0 else variants[::-1]
        for v in order:
            rx, ry = _take(x, y, steps, batch_size, offset=r * steps * batch_size)
            timer = EpochTimer()
            gc.collect()
            models[v].fit(rx, ry, batch_size=batch_size, epochs=1, shuffle=False, verbose=0,
                          callbacks=[timer])
            per_step[v].append(timer.seconds / steps)
    ratios = {v: [a / b for a, b in zip(per_step[v], per_step["baseline"])] for v in variants[1:]}
    return {
        "workload": workload,
        "batch_size": batch_size,
        "steps": steps,
        "repeats": repeats,
        "bn_removed": report.num_removed,
        "bn_total": report.num_bn,
        "seconds_per_step": per_step,
        "median_seconds_per_step": {v: statistics.median(t) for v, t in per_step.items()},
        # Per variant: the median, min and max of its per-repeat ratios to the baseline.
        "ratio_to_baseline": {v: spread(r) for v, r in ratios.items()},
    }


def time_to_accuracy(epochs, target):
    (x, y), (x_test, y_test) = mnist_data()
    # Absorb the process's one-off backend start-up, so that it does not land
    # on whichever variant runs first.
    variant(residual_cnn(seed=SEED), "baseline").fit(x[:64], y[:64], batch_size=64, verbose=0)
    results = {}
    for v in ACCURACY_VARIANTS:
        model = variant(residual_cnn(seed=SEED), v)
        keras.utils.set_random_seed(SEED)
        history = []
        for epoch in range(epochs):
            start = time.perf_counter()
            model.fit(x, y, batch_size=64, epochs=1, verbose=0)
            seconds = time.perf_counter() - start  # the first epoch includes compilation
            _, acc = model.evaluate(x_test, y_test, batch_size=256, verbose=0)
            history.append({"epoch": epoch + 1, "epoch_seconds": seconds, "test_accuracy": acc})
        # "steady": the first epoch counted at the median of the others (no compilation).
        steady_epoch = statistics.median(h["epoch_seconds"] for h in history[1:]) if epochs > 1 else None
        wall = steady = 0.0
        reached = reached_steady = epoch_reached = None
        for h in history:
            wall += h["epoch_seconds"]
            steady += steady_epoch if (h["epoch"] == 1 and steady_epoch) else h["epoch_seconds"]
            h["train_seconds"] = wall
            if reached is None and h["test_accuracy"] >= target:
                reached, reached_steady, epoch_reached = wall, steady, h["epoch"]
        results[v] = {"history": history, "seconds_to_target": reached,
                      "steady_seconds_to_target": reached_steady, "epochs_to_target": epoch_reached,
                      "steady_seconds_per_epoch": steady_epoch,
                      "final_accuracy": history[-1]["test_accuracy"],
                      "best_accuracy": max(h["test_accuracy"] for h in history)}
    return {"target": target, "epochs": epochs, "results": results}


def measure(args):
    warnings.filterwarnings("ignore", category=UserWarning)
    out = {"step_time": []}
    for workload in [w.strip() for w in args.workloads.split(",") if w.strip()]:
        result = step_times(workload, args.steps, args.repeats, args.variants)
        out["step_time"].append(result)
        med = result["median_seconds_per_step"]
        ratios = "; ".join(
            f"{v} {med[v]:.4f} s, x{r['median']:.3f} [{r['min']:.3f}, {r['max']:.3f}]"
            for v, r in result["ratio_to_baseline"].items()
        )
        print(
            f"{workload}: BN removed by LessBN {result['bn_removed']}/{result['bn_total']}; "
            f"s/step baseline {med['baseline']:.4f}; {ratios} (over {args.repeats} repeats)",
            flush=True,
        )
    if args.accuracy:
        acc = time_to_accuracy(args.epochs, args.target)
        out["time_to_accuracy"] = acc
        for v, r in acc["results"].items():
            curve = ", ".join(f"{h['test_accuracy']:.3f}@{h['train_seconds']:.1f}s" for h in r["history"])
            print(f"accuracy {v}: to {acc['target']}: epoch {r['epochs_to_target']}, "
                  f"{r['seconds_to_target']} s wall, {r['steady_seconds_to_target']} s steady; "
                  f"{r['steady_seconds_per_epoch']:.2f} s/epoch; final {r['final_accuracy']:.4f}, "
                  f"best {r['best_accuracy']:.4f}; {curve}", flush=True)
    return out


def main(argv=None):
    return runner.main("less_bn", measure, parse_args, argv)


if __name__ == "__main__":
    main()
