"""Why a keras.applications model does (not) train under the zoo's recipe.

Trains one `keras_boost.bench.zoo.applications` model plainly under the
`applications` recipe (SGD with momentum 0.9, weight decay 5e-5, batch 32,
a 1-epoch warmup, cosine decay over `--epochs`) with one change per
variant, and prints after each epoch:

- the training accuracy of that epoch (`fit`'s, with dropout);
- the test accuracy with the moving BN statistics (inference, as the bench
  measures it);
- the test accuracy with each test batch's own statistics (`training=True`):
  when this is high and the first is low, the moving statistics are at
  fault, not the training.

A variant is comma-separated `key=value` changes: `lr=` the peak learning
rate, `bn=` every BatchNormalization's momentum (the zoo sets 0.9),
`drop=` every Dropout's rate (EfficientNet's stochastic depth and top
dropout), `scale=` inputs `(x + 1) * scale` instead of [-1, 1] (Keras'
EfficientNet rescales its input by 1/255 in its stem). `base` changes
nothing.

Example:

```shell
KERAS_BACKEND=tensorflow python -m benchmarks.application_recipe \\
    --model EfficientNetB0 --variants base,lr=0.003,bn=0.99 --epochs 4 --seeds 1
```
"""

import math
import time

import keras
import numpy as np

from benchmarks import runner
from keras_boost.bench import pipeline
from keras_boost.bench import schedule
from keras_boost.bench import training
from keras_boost.bench.zoo import applications

KEYS = ("lr", "bn", "drop", "scale")


def parse_args(argv=None):
    parser = runner.parser("application_recipe", __doc__, seeds=1)
    parser.add_argument("--model", default="EfficientNetB0", choices=sorted(applications.APPLICATIONS))
    parser.add_argument("--variants", default="base,lr=0.003",
                        help=f"semicolon-separated variants, each `base` or comma-separated {'/'.join(KEYS)}=value")
    parser.add_argument("--epochs", type=int, default=4, help="epochs per run (default 4)")
    return runner.parse(parser, argv, positive=("epochs",))


def parse_variant(text):
    """`"lr=0.003,bn=0.99"` -> `{"lr": 0.003, "bn": 0.99}`; `"base"` -> `{}`."""
    if text == "base":
        return {}
    changes = {}
    for part in text.split(","):
        key, equals, value = part.partition("=")
        if key not in KEYS or not equals:
            raise ValueError(f"Bad variant part {part!r} in {text!r}: expected one of {KEYS} as key=value.")
        changes[key] = float(value)
    return changes


def run(model_name, changes, seed, epochs):
    workload = applications.applications_workload(model_name)
    (x, y), (x_test, y_test) = workload.data()
    if "scale" in changes:
        x, x_test = (x + 1.0) * changes["scale"], (x_test + 1.0) * changes["scale"]
    keras.utils.clear_session()
    model = applications.application_model(model_name, seed=seed)
    for layer in model.layers:
        if "bn" in changes and isinstance(layer, keras.layers.BatchNormalization):
            layer.momentum = changes["bn"]
        if "drop" in changes and isinstance(layer, keras.layers.Dropout):
            layer.rate = changes["drop"]
    steps = math.ceil(len(x) / workload.batch_size)
    learning_rate = changes.get("lr", workload.learning_rate)
    optimizer = schedule.recipe_optimizer(workload, steps * epochs, steps, learning_rate=learning_rate)
    model.compile(optimizer=optimizer, loss=training.LOSS, metrics=["accuracy"])
    keras.utils.set_random_seed(seed)
    dataset = pipeline.training_dataset(x, y, workload.batch_size, seed)[0]
    curve = []
    for _ in range(epochs):
        start = time.perf_counter()
        history = model.fit(dataset, steps_per_epoch=steps, epochs=1, verbose=0)
        seconds = time.perf_counter() - start
        moving = np.argmax(model.predict(x_test, batch_size=250, verbose=0), -1)
        # Batch statistics: this also moves the moving statistics a little,
        # which the next epoch's 125 steps at momentum 0.9 wash out.
        batch = np.concatenate([keras.ops.convert_to_numpy(model(x_test[i:i + 250], training=True))
                                for i in range(0, len(x_test), 250)]).argmax(-1)
        curve.append({"train": float(history.history["accuracy"][0]),
                      "test_moving_stats": float(np.mean(moving == y_test)),
                      "test_batch_stats": float(np.mean(batch == y_test)), "seconds": seconds})
    return curve


def measure(args):
    out = {"settings": {"model": args.model, "epochs": args.epochs}, "runs": []}
    for text in args.variants.split(";"):
        changes = parse_variant(text)
        for seed in runner.seeds(args):
            curve = run(args.model, changes, seed, args.epochs)
            out["runs"].append({"variant": text, "seed": seed, "curve": curve})
            print(f"{text:24s} seed {seed} train/test(moving)/test(batch): "
                  + "  ".join(f"{e['train']:.2f}/{e['test_moving_stats']:.2f}/{e['test_batch_stats']:.2f}"
                              for e in curve), flush=True)
    return out


def main(argv=None):
    return runner.main("application_recipe", measure, parse_args, argv)


if __name__ == "__main__":
    main()
