"""Prefix caching: wall time of `model.fit` against `fit_with_cached_prefix`.

The workload: the embedded MNIST sample (4,000 training images, 28x28), a
small conv base (three conv-BN-ReLU stages of 32, 64 and 128 channels, with
max pooling, global average pooling) called as a nested model with
`training=False`, and a Dense(128)-Dense(10) head; SGD momentum 0.9, batch
64, `shuffle=False` (so that both runs take the same steps and must end with
the same weights). Two settings:

- `frozen`: the whole base frozen (keras-io's transfer learning, phase 1):
  the cut is the base's pooled output;
- `partly`: the base's last conv stage unfrozen (phase 2): the cut is inside
  the nested base, before that stage.

Each repeat builds the model afresh from the same seed and times the whole
call (`fit` against split + prefix `predict` + suffix `fit`, first-step
tracing included in both), the two interleaved; the result is the median of
the repeats and the ratio of the medians, with the largest weight
difference between the two runs' final weights.

Example:

```shell
KERAS_BACKEND=tensorflow python -m benchmarks.prefix_cache
python -m benchmarks.prefix_cache --backend tensorflow --repeats 1 --epochs 1 --cases frozen
```
"""

import time
import warnings

import keras
import numpy as np

from benchmarks import runner
from keras_boost.algorithms.prefix_cache import fit_with_cached_prefix
from keras_boost.algorithms.prefix_cache import split_frozen_prefix
from keras_boost.datasets import load_mnist_sample

SETTINGS = ("frozen", "partly")


def build(setting, seed):
    keras.utils.set_random_seed(seed)
    inputs = keras.Input((28, 28, 1))
    h = inputs
    for stage, filters in enumerate((32, 64, 128)):
        h = keras.layers.Conv2D(filters, 3, padding="same", use_bias=False, name=f"conv{stage}")(h)
        h = keras.layers.BatchNormalization(name=f"bn{stage}")(h)
        h = keras.layers.ReLU(name=f"relu{stage}")(h)
        if stage < 2:
            h = keras.layers.MaxPooling2D(name=f"pool{stage}")(h)
    h = keras.layers.GlobalAveragePooling2D(name="gap")(h)
    base = keras.Model(inputs, h, name="base")
    base.trainable = setting == "partly"
    if setting == "partly":
        for layer in base.layers:
            layer.trainable = layer.name in ("conv2", "bn2")
    images = keras.Input((28, 28, 1))
    h = base(images, training=False)
    h = keras.layers.Dense(128, activation="relu", name="fc")(h)
    outputs = keras.layers.Dense(10, activation="softmax", name="classes")(h)
    model = keras.Model(images, outputs, name=f"cnn_{setting}")
    model.compile(optimizer=keras.optimizers.SGD(0.05, momentum=0.9), loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"])
    return model


def run(setting, variant, x, y, args):
    model = build(setting, args.seed)
    fit = model.fit if variant == "plain" else (lambda *a, **k: fit_with_cached_prefix(model, *a, **k))
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        history = fit(x, y, batch_size=args.batch_size, epochs=args.epochs, shuffle=False, verbose=0)
    seconds = time.perf_counter() - start
    weights = [np.array(keras.ops.convert_to_numpy(w)) for w in model.weights]
    return seconds, float(history.history["accuracy"][-1]), weights


def parse_args(argv=None):
    parser = runner.parser("prefix_cache", __doc__, seed=0, output="bench_results/prefix_cache_{backend}.json")
    parser.add_argument("--cases", default=",".join(SETTINGS), help=f"comma-separated, of {', '.join(SETTINGS)}")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved repeats (default 3)")
    parser.add_argument("--epochs", type=int, default=3, help="epochs per run (default 3)")
    parser.add_argument("--batch-size", type=int, default=64, help="batch size (default 64)")
    return runner.parse(parser, argv, positive=("repeats", "epochs", "batch_size"))


def measure(args):
    (x, y), _ = load_mnist_sample()
    results = []
    for setting in args.cases.split(","):
        report = split_frozen_prefix(build(setting, args.seed)).report
        print(report, flush=True)
        times = {"plain": [], "cached": []}
        accuracy, weights = {}, {}
        for repeat in range(args.repeats):
            for variant in ("plain", "cached") if repeat % 2 == 0 else ("cached", "plain"):
                seconds, accuracy[variant], weights[variant] = run(setting, variant, x, y, args)
                times[variant].append(seconds)
                print(f"{setting:<8}{variant:<8}repeat {repeat}: {seconds:7.2f} s  "
                      f"train accuracy {accuracy[variant]:.4f}", flush=True)
        medians = {v: float(np.median(t)) for v, t in times.items()}
        ratio = medians["cached"] / medians["plain"]
        difference = max(float(np.max(np.abs(a - b))) for a, b in zip(weights["plain"], weights["cached"]))
        print(f"{setting}: plain {medians['plain']:.2f} s, cached {medians['cached']:.2f} s (medians): "
              f"cached/plain {ratio:.3f} ({1 / ratio:.2f}x faster); largest weight difference "
              f"{difference:.2e}", flush=True)
        results.append({
            "setting": setting, "cut": list(report.cut), "cached_layers": len(report.cached_layers),
            "features_per_example": report.features_per_example, "seconds": times, "median_seconds": medians,
            "cached_over_plain": ratio, "train_accuracy": accuracy, "max_weight_difference": difference,
        })
    return {"settings": {"workload": "mnist_sample 4000 x 28x28, conv base 32-64-128 + Dense head"},
            "results": results}


def main(argv=None):
    return runner.main("prefix_cache", measure, parse_args, argv)


if __name__ == "__main__":
    main()
