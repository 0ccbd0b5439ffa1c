"""keras_boost quickstart: the same residual CNN, trained with and without boost.

Trains `keras_boost.bench.residual_cnn` on the MNIST sample embedded in the
package (4,000 train / 1,000 test images; nothing downloads) twice, from the
same initial weights and batch order:

1. a plain `keras.Model`;
2. a `keras_boost.BoostModel` compiled with `boost.wrap(optimizer, level)`.

then prints test accuracy and wall time side by side. At level "O0" boost
changes nothing in the math (loss scaling is off for float32), so both runs
reach the same accuracy and the time column shows the overhead of boost's
train step. "O1" adds LessBN and gradient freezing (the BoostModel prints
which BatchNormalization layers LessBN removed); "O2" needs AdaSum, which is
not implemented yet, and is reported as unavailable.

Run (about 1-2 minutes on 2 CPU cores):

```shell
KERAS_BACKEND=tensorflow python examples/quickstart.py
KERAS_BACKEND=jax python examples/quickstart.py --epochs 5 --optimizer adam --quiet
```
"""

import argparse
import time

import keras

import keras_boost as boost
from keras_boost.bench import mnist_data
from keras_boost.bench import residual_cnn

SEED = 1234


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epochs", type=int, default=3, help="epochs per run (default 3)")
    parser.add_argument("--batch-size", type=int, default=64, help="batch size (default 64)")
    parser.add_argument(
        "--level", default="O0", choices=("O0", "O1", "O2"), help="boost level (default O0)"
    )
    parser.add_argument(
        "--optimizer", default="sgd", choices=("sgd", "adam"),
        help="SGD with momentum 0.9 (lr 0.05) or Adam (lr 1e-3); default sgd",
    )
    parser.add_argument("--quiet", action="store_true", help="no Keras progress bar")
    return parser.parse_args(argv)


def make_optimizer(name):
    """A fresh optimizer: each run needs its own (optimizers hold state)."""
    if name == "adam":
        return keras.optimizers.Adam(learning_rate=1e-3)
    return keras.optimizers.SGD(learning_rate=0.05, momentum=0.9)


def train_and_evaluate(model, optimizer, data, args):
    """Compiles, fits and evaluates `model`; returns a row of the results table.

    The wall time is that of `fit` alone, so it includes the one-off
    tracing/compilation of the train step, as a user would experience it.
    """
    (x, y), (x_test, y_test) = data
    model.compile(
        optimizer=optimizer,
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    # Same seed before each fit: both runs see the same shuffling order.
    keras.utils.set_random_seed(SEED)
    verbose = 0 if args.quiet else 1
    start = time.perf_counter()
    history = model.fit(
        x, y, batch_size=args.batch_size, epochs=args.epochs, verbose=verbose
    )
    seconds = time.perf_counter() - start
    _, accuracy = model.evaluate(x_test, y_test, batch_size=256, verbose=0)
    return {
        "train_loss": float(history.history["loss"][-1]),
        "test_accuracy": float(accuracy),
        "seconds": seconds,
    }


def build_boost_run(level, optimizer_name):
    """The BoostModel and wrapped optimizer for `level`, or None if unavailable.

    `BoostModel.from_model` applies the level's model surgery (LessBN at
    O1/O2) to a fresh copy of the same network (same seed, so the same
    initial weights as the baseline); `boost.wrap` builds the optimizer
    chain of the same level. Levels whose algorithms are not implemented yet
    raise `NotImplementedError` (never a silent no-op): reported, run skipped.
    """
    # The freeze schedule is sized by fit instead of MindSpore's 65536 steps.
    config = {"grad_freeze": {"total_steps": "auto"}} if level != "O0" else None
    try:
        model = boost.BoostModel.from_model(
            residual_cnn(seed=SEED), boost_level=level, boost_config_dict=config,
            name="residual_cnn_boost",
        )
        optimizer = boost.wrap(make_optimizer(optimizer_name), level, config)
    except NotImplementedError as error:
        print(f"\nBoost level {level} is not available yet in keras_boost "
              f"{boost.__version__}; skipping it. ({error})")
        return None
    if getattr(model, "less_bn_report", None) is not None:
        print(model.less_bn_report)
    return model, optimizer


def print_table(rows):
    header = f"{'run':<22}{'test accuracy':>15}{'train loss':>12}{'fit time (s)':>14}"
    print("\n" + header)
    print("-" * len(header))
    for name, row in rows.items():
        print(f"{name:<22}{row['test_accuracy']:>15.4f}{row['train_loss']:>12.4f}"
              f"{row['seconds']:>14.1f}")
    if len(rows) == 2:
        base, boosted = rows.values()
        print(f"\nboost / keras fit time: {boosted['seconds'] / base['seconds']:.3f} "
              "(includes tracing; see `python -m keras_boost.bench.overhead` "
              "for steady-state step rates)")


def main(argv=None):
    args = parse_args(argv)
    print(f"Keras {keras.__version__}, backend {keras.backend.backend()}, "
          f"keras_boost {boost.__version__}")
    data = mnist_data()
    print(f"Embedded MNIST sample: {len(data[0][0])} train / {len(data[1][0])} test images")

    baseline = residual_cnn(seed=SEED)
    boost_run = build_boost_run(args.level, args.optimizer)

    rows = {}
    print(f"\n[1/2] keras.Model ({baseline.count_params():,} weights)")
    rows["keras.Model"] = train_and_evaluate(
        baseline, make_optimizer(args.optimizer), data, args
    )
    if boost_run is not None:
        print(f"\n[2/2] boost.BoostModel at {args.level}")
        rows[f"BoostModel {args.level}"] = train_and_evaluate(*boost_run, data, args)
    print_table(rows)


if __name__ == "__main__":
    main()
