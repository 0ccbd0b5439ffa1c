"""Benchmark: time to the quickstart target accuracy with and without progressive resizing.

The quickstart workload (`residual_cnn` on the embedded MNIST sample, 4,000
train / 1,000 test images, SGD momentum 0.9 with cosine decay from 0.05,
batch 64, 5 epochs, target test accuracy 0.93), run twice per seed from the
same initial weights and batch order, interleaved (the order alternates
with the seed):

- `plain`: the model as is;
- `progressive`: the same model with `boost.callbacks.ProgressiveResizing`
  (`initial_scale`, `finish_fraction`; defaults 0.5 and 0.6).

Both models hold a `keras_boost.layers.ProgressiveResize` layer in front of
a size-agnostic `residual_cnn` (identity without the callback), so their
weights are identical. Training time excludes the first step (its tracing)
and the per-epoch evaluation, like `examples/quickstart.py`; the retraces
at each new image size count. One measurement per seed on a shared
machine: the timings are noisy (the load average is recorded).

```shell
KERAS_BACKEND=tensorflow python -m benchmarks.progressive --seeds 3
```

It writes `benchmarks/results/progressive_<backend>.json` (see `--output`).
"""

import json
import os
import statistics
import time

import keras
import numpy as np

from benchmarks import runner


def parse_args(argv):
    parser = runner.parser("progressive", __doc__, seeds=3, output="benchmarks/results/progressive_{backend}.json")
    parser.add_argument("--epochs", type=int, default=5, help="epochs per run (default 5)")
    parser.add_argument("--batch-size", type=int, default=64, help="batch size (default 64)")
    parser.add_argument("--learning-rate", type=float, default=0.05, help="peak of the cosine decay (default 0.05)")
    parser.add_argument("--target", type=float, default=0.93, help="quickstart target test accuracy")
    parser.add_argument("--initial-scale", type=float, default=0.5,
                        help="ProgressiveResizing's first image scale (default 0.5)")
    parser.add_argument("--finish-fraction", default="0.6dur",
                        help="when the images reach full size (default 0.6dur: 60%% of the run)")
    parser.add_argument("--evals-per-epoch", type=int, default=2,
                        help="test evaluations per epoch (time-to-target resolution)")
    return runner.parse(parser, argv, positive=("epochs", "batch_size", "evals_per_epoch"))


class _Clock(keras.callbacks.Callback):
    """Training seconds after the first step, and test accuracy `evals` times per epoch."""

    def __init__(self, x_test, y_test, steps_per_epoch, evals):
        super().__init__()
        self.x_test, self.y_test = x_test, y_test
        self.every = max(1, steps_per_epoch // evals)
        self.steps_per_epoch = steps_per_epoch
        self.points = []  # (epoch fraction, seconds, accuracy)
        self._start, self._elapsed, self._epoch = None, 0.0, 0

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        now = time.perf_counter()
        if self._start is None:  # the first step (tracing) is the warm-up
            self._start = now
            return
        if (batch + 1) % self.every == 0 or batch + 1 == self.steps_per_epoch:
            self._elapsed += now - self._start
            logits = self.model.predict(self.x_test, batch_size=500, verbose=0)
            accuracy = float(np.mean(np.argmax(logits, -1) == self.y_test))
            self.points.append((self._epoch + (batch + 1) / self.steps_per_epoch, self._elapsed, accuracy))
            self._start = time.perf_counter()

    def time_to(self, target):
        return next((s for _, s, a in self.points if a >= target - 1e-9), None)


def _spread(values):
    values = [v for v in values if v is not None]
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "values": values}


def measure(args):
    import keras_boost as boost
    from keras_boost.bench.workloads import mnist_data
    from keras_boost.bench.workloads import residual_cnn

    (x, y), (x_test, y_test) = mnist_data()
    steps_per_epoch = -(-len(x) // args.batch_size)
    total_steps = args.epochs * steps_per_epoch
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def build(seed):
        inputs = keras.Input((28, 28, 1), name="image")
        resized = boost.layers.ProgressiveResize(name="progressive_resize")(inputs)
        outputs = residual_cnn(input_shape=(None, None, 1), seed=seed)(resized)
        model = keras.Model(inputs, outputs, name="progressive_residual_cnn")
        schedule = keras.optimizers.schedules.CosineDecay(args.learning_rate, total_steps)
        model.compile(optimizer=keras.optimizers.SGD(schedule, momentum=0.9), loss=loss, metrics=["accuracy"])
        return model

    modes = ("plain", "progressive")
    result = {
        "settings": {"steps_per_epoch": steps_per_epoch},
        "note": "One run per seed and mode on a shared machine; timings are noisy.",
    }
    runs = []
    for seed in runner.seeds(args):
        for mode in modes if seed % 2 == 0 else modes[::-1]:
            model = build(seed)
            clock = _Clock(x_test, y_test, steps_per_epoch, args.evals_per_epoch)
            callbacks = [clock]
            resizing = None
            if mode == "progressive":
                resizing = boost.callbacks.ProgressiveResizing(
                    initial_scale=args.initial_scale, finish_fraction=args.finish_fraction)
                callbacks.insert(0, resizing)
            keras.utils.set_random_seed(seed)  # the same batch order for both modes
            model.fit(x, y, batch_size=args.batch_size, epochs=args.epochs, verbose=0, callbacks=callbacks)
            reached = clock.time_to(args.target)
            run_result = {
                "mode": mode, "seed": seed, "train_seconds": clock.points[-1][1],
                "final_accuracy": clock.points[-1][2], "seconds_to_target": reached,
                "curve": clock.points, "load_average_after": os.getloadavg(),
            }
            if resizing is not None:
                run_result["sizes"] = resizing.sizes
                run_result["train_function_builds"] = resizing.compiles
            runs.append(run_result)
            print(f"seed {seed} {mode:<12} final accuracy {run_result['final_accuracy']:.4f}, "
                  f"train {run_result['train_seconds']:.1f} s, to {args.target}: "
                  f"{'not reached' if reached is None else f'{reached:.1f} s'}", flush=True)
    result["runs"] = runs
    summary = {}
    for mode in modes:
        mine = [r for r in runs if r["mode"] == mode]
        summary[mode] = {
            "seconds_to_target": _spread([r["seconds_to_target"] for r in mine]),
            "reached": sum(r["seconds_to_target"] is not None for r in mine),
            "train_seconds": _spread([r["train_seconds"] for r in mine]),
            "final_accuracy": _spread([r["final_accuracy"] for r in mine]),
        }
    ratios = []
    for seed in runner.seeds(args):
        by_mode = {r["mode"]: r["seconds_to_target"] for r in runs if r["seed"] == seed}
        if by_mode["plain"] and by_mode["progressive"]:
            ratios.append(by_mode["progressive"] / by_mode["plain"])
    summary["ratio_progressive_over_plain_time_to_target"] = _spread(ratios)
    result["summary"] = summary
    print(json.dumps(summary, indent=2))
    return result


def main(argv=None):
    return runner.main("progressive", measure, parse_args, argv)


if __name__ == "__main__":
    main()
