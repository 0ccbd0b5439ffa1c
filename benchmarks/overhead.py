"""Per-step overhead of keras_boost against plain `keras.Model.fit`.

Two comparisons (`--compare`):

- `boost-o0` (default): `BoostModel` at "O0" vs `keras.Model`;
- `freeze-plain`: a plain `keras.Model` compiled with
  `boost.wrap(optimizer, "O1")` (LessBN off: gradient freezing alone, on a
  model whose step computes every gradient) vs the same model compiled with
  the plain optimizer. Freezing saves nothing there by design (it only keeps
  the frozen variables unchanged); this measures what it costs.

Both models are the same `residual_cnn` with the same initial weights, fit on
the same data in one process. Each model is warmed up first (one short `fit`,
so tracing/compilation is excluded), then each repeat runs one `fit` epoch of
exactly `--steps` full batches per model and times the epoch (from
`on_epoch_begin` to `on_epoch_end`, so `fit`'s fixed setup and teardown are
left out; the whole `fit` wall time is recorded too). The two are
interleaved, and their order alternates from one repeat to the next (keras,
boost / boost, keras / ...), so slow drift of the machine (thermal, other
load) hits both alike.

Reported: the median steps/s of each model, the per-repeat ratio
boost/keras with its median and min-max spread, and
`overhead % = (1 - median ratio) * 100` (positive: boost is slower).

At "O0" with float32 and `loss_scale="auto"` the boost step does the same
math as Keras' own, so the overhead should be within noise;
`--loss-scale dynamic` measures the cost of dynamic loss scaling (scale,
unscale, finite check, conditional apply).

The backend is whatever `KERAS_BACKEND` says.

Example:

```shell
KERAS_BACKEND=jax python -m benchmarks.overhead --quick
KERAS_BACKEND=tensorflow python -m benchmarks.overhead \
    --steps 200 --repeats 7 --loss-scale dynamic --output overhead_tf.json
```
"""

import gc
import statistics
import time

import keras
import numpy as np

import keras_boost as boost
from benchmarks import runner
from keras_boost.bench.workloads import copy_weights
from keras_boost.bench.workloads import mnist_data
from keras_boost.bench.workloads import residual_cnn

SEED = 1234
# (steps, repeats, warmup_steps): the full run, and --quick (about a minute
# on 2 CPU cores, compilation included).
_DEFAULTS = {"steps": 100, "repeats": 5, "warmup_steps": 5}
_QUICK = {"steps": 15, "repeats": 3, "warmup_steps": 3}
_LOSS_SCALES = {"auto": "auto", "dynamic": "dynamic", "none": None}


def parse_args(argv=None):
    parser = runner.parser("overhead", "Steady-state steps/s of BoostModel (O0) vs keras.Model.fit.")
    parser.add_argument("--steps", type=int, help="timed steps per fit (default 100; quick 15)")
    parser.add_argument("--repeats", type=int, help="timed fits per model (default 5; quick 3)")
    parser.add_argument("--warmup-steps", type=int, help="steps of the warm-up fit (default 5)")
    parser.add_argument("--batch-size", type=int, default=64, help="batch size (default 64)")
    parser.add_argument(
        "--loss-scale", default="auto", choices=sorted(_LOSS_SCALES),
        help="BoostModel's loss_scale: auto (off for float32), dynamic or none",
    )
    parser.add_argument(
        "--optimizer", default="sgd", choices=("sgd", "adam"),
        help="SGD with momentum (default) or Adam",
    )
    parser.add_argument(
        "--compare", default="boost-o0", choices=("boost-o0", "freeze-plain"),
        help="BoostModel O0 vs keras.Model (default), or a plain model with "
        "boost.wrap(opt, 'O1') freezing vs the plain optimizer",
    )
    parser.add_argument("--quick", action="store_true", help="a ~1 minute smoke run")
    return runner.parse(parser, argv, positive=("steps", "repeats", "warmup_steps", "batch_size"),
                        defaults=_DEFAULTS, quick=_QUICK)


# --- models and data --------------------------------------------------------


def make_data(steps, batch_size):
    """Exactly `steps` full batches of the embedded MNIST (tiled if needed).

    Full batches only: a smaller last batch would be a new input shape, and
    tracing it would land inside the timed fit.
    """
    (x, y), _ = mnist_data()
    index = np.arange(steps * batch_size) % len(x)
    return x[index], y[index]


def make_optimizer(name):
    if name == "adam":
        return keras.optimizers.Adam(learning_rate=1e-3)
    return keras.optimizers.SGD(learning_rate=0.01, momentum=0.9)


FREEZE_ONLY = {"boost": {"mode": "manual", "less_bn": False}}


def build_models(optimizer_name, loss_scale, compare="boost-o0"):
    """The keras and boost models: same graph, same weights, same compile."""
    baseline = residual_cnn(seed=SEED, name="keras")
    if compare == "freeze-plain":
        boosted = residual_cnn(seed=SEED, name="boost")
        boost_optimizer = boost.wrap(make_optimizer(optimizer_name), "O1", FREEZE_ONLY)
    else:
        boosted = residual_cnn(
            seed=SEED, model_cls=boost.BoostModel, boost_level="O0",
            loss_scale=loss_scale, name="boost",
        )
        boost_optimizer = boost.wrap(make_optimizer(optimizer_name), "O0")
    copy_weights(baseline, boosted)
    optimizers = {"keras": make_optimizer(optimizer_name), "boost": boost_optimizer}
    models = {"keras": baseline, "boost": boosted}
    for name, model in models.items():
        model.compile(
            optimizer=optimizers[name],
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=["accuracy"],
        )
    return models


# --- timing -----------------------------------------------------------------


class EpochTimer(keras.callbacks.Callback):
    """Times the training epoch: from `on_epoch_begin` to `on_epoch_end`.

    This excludes `fit`'s fixed setup and teardown (building the input
    pipeline, shutting down Keras' callback thread pool, which on a loaded
    machine alone costs up to a second at random), which are the same for
    both models and would only add noise to their ratio. It is exact on
    asynchronous backends too: `on_epoch_end` receives the epoch's logs as
    Python numbers, so every step has finished by then. Only epoch hooks
    are overridden, so `fit` keeps its asynchronous batch-end dispatch.
    """

    def on_epoch_begin(self, epoch, logs=None):
        self.start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        self.seconds = time.perf_counter() - self.start


def _fit(model, x, y, batch_size, callbacks=None):
    # shuffle=False: the input pipeline does the same work for both models.
    return model.fit(
        x, y, batch_size=batch_size, epochs=1, shuffle=False, verbose=0,
        callbacks=callbacks,
    )


def time_fit(model, x, y, batch_size):
    """Times one `fit` epoch over `x` (full batches only).

    Returns:
        `(steps_per_second, fit_seconds)`: the step rate over the training
        epoch (see `EpochTimer`) and the wall time of the whole `fit` call.
    """
    timer = EpochTimer()
    # As `timeit` does: no cyclic garbage collection inside the timed region,
    # where it would land on whichever model happened to trigger it.
    gc.collect()
    gc.disable()
    try:
        start = time.perf_counter()
        _fit(model, x, y, batch_size, callbacks=[timer])
        fit_seconds = time.perf_counter() - start
    finally:
        gc.enable()
    return (len(x) // batch_size) / timer.seconds, fit_seconds


def run(args):
    """Warms both models up, then times `args.repeats` interleaved fits of each.

    Returns the list of per-repeat records.
    """
    x, y = make_data(args.steps, args.batch_size)
    models = build_models(args.optimizer, _LOSS_SCALES[args.loss_scale], args.compare)
    warm = args.warmup_steps * args.batch_size
    for name, model in models.items():
        start = time.perf_counter()
        _fit(model, x[:warm], y[:warm], args.batch_size)
        print(f"warm-up {name:<5} {time.perf_counter() - start:6.1f} s "
              f"({args.warmup_steps} steps, tracing/compilation included)")

    records = []
    for repeat in range(args.repeats):
        # Alternate which model goes first, so drift cancels over repeats.
        order = ("keras", "boost") if repeat % 2 == 0 else ("boost", "keras")
        timings = {name: time_fit(models[name], x, y, args.batch_size) for name in order}
        record = {"repeat": repeat + 1, "order": list(order)}
        for name in ("keras", "boost"):
            record[f"{name}_steps_per_s"], record[f"{name}_fit_seconds"] = timings[name]
        record["ratio"] = record["boost_steps_per_s"] / record["keras_steps_per_s"]
        records.append(record)
        print(f"repeat {repeat + 1}/{args.repeats}  first {order[0]:<5}  "
              f"keras {record['keras_steps_per_s']:7.2f} steps/s  "
              f"boost {record['boost_steps_per_s']:7.2f} steps/s  "
              f"ratio {record['ratio']:.3f}")
    return records


def summarize(records):
    ratios = [r["ratio"] for r in records]
    median_ratio = statistics.median(ratios)
    return {
        **{
            f"{name}_median_{key}": statistics.median(r[f"{name}_{key}"] for r in records)
            for name in ("keras", "boost")
            for key in ("steps_per_s", "fit_seconds")
        },
        "median_ratio": median_ratio,
        "min_ratio": min(ratios),
        "max_ratio": max(ratios),
        "overhead_percent": (1.0 - median_ratio) * 100.0,
    }


def print_summary(summary):
    print(f"\nmedian steps/s      keras {summary['keras_median_steps_per_s']:.2f}   "
          f"boost {summary['boost_median_steps_per_s']:.2f}")
    print(f"median fit() time   keras {summary['keras_median_fit_seconds']:.2f} s   "
          f"boost {summary['boost_median_fit_seconds']:.2f} s (setup/teardown included)")
    print(f"ratio boost/keras   median {summary['median_ratio']:.3f}   "
          f"min {summary['min_ratio']:.3f}   max {summary['max_ratio']:.3f}")
    print(f"overhead            {summary['overhead_percent']:+.1f}% "
          "(1 - median ratio; positive = boost slower)")


def measure(args):
    what = ("plain model, boost.wrap(opt, 'O1') freezing" if args.compare == "freeze-plain"
            else f"BoostModel O0, loss_scale={args.loss_scale}")
    print(f"{what}, optimizer {args.optimizer}, "
          f"batch {args.batch_size}, {args.steps} timed steps x {args.repeats} repeats\n")
    records = run(args)
    summary = summarize(records)
    print_summary(summary)
    return {"repeats": records, "summary": summary}


def main(argv=None):
    return runner.main("overhead", measure, parse_args, argv)


if __name__ == "__main__":
    main()
