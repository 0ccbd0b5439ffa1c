"""keras_boost quickstart: the same residual CNN, trained with and without boost.

Trains `keras_boost.bench.residual_cnn` on the MNIST sample embedded in the
package (4,000 train / 1,000 test images; nothing downloads) twice, from the
same initial weights, batch order and learning-rate schedule (SGD with
momentum 0.9, cosine decay over the run):

1. a plain `keras.Model`;
2. `boost.BoostModel.from_model(model, boost_level=level)`, compiled with the
   same plain optimizer (the BoostModel wraps it in the level's chain).

It prints, for each run, the test accuracy after the last epoch, the
training time, and the time at which the run first reached the baseline's
final accuracy minus 0.5 point. Times exclude the first step of each run
(its one-off tracing/compilation: the warm-up) and the evaluations after
each epoch; compilation of any later function (e.g. a freeze depth) counts.

Level "O1" (the default) is LessBN (BatchNormalization removal, with
gradient centralization) plus gradient freezing, with the remaining
BatchNormalization layers trained by one fused kernel (TensorFlow, PyTorch;
the same math); "O0" changes nothing in the
math, so both runs reach the same accuracy and the times differ only by the
overhead of boost's step. "O2" adds AdaSum, which acts only across replicas
(a `tf.distribute` strategy); on one device `check_adasum_enable()` says so
and O2 trains like O1.

Run (about 1-2 minutes on 2 CPU cores):

```shell
KERAS_BACKEND=tensorflow python examples/quickstart.py
KERAS_BACKEND=jax python examples/quickstart.py --level O0 --epochs 3 --quiet
```
"""

import argparse
import time

import keras

import keras_boost as boost
from keras_boost.bench import mnist_data
from keras_boost.bench import residual_cnn

SEED = 1234
TOLERANCE = 0.005  # "the baseline's accuracy": its final accuracy minus 0.5 point


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epochs", type=int, default=5, help="epochs per run (default 5)")
    parser.add_argument("--batch-size", type=int, default=64, help="batch size (default 64)")
    parser.add_argument(
        "--level", default="O1", choices=("O0", "O1", "O2"), help="boost level (default O1)"
    )
    parser.add_argument("--learning-rate", type=float, default=0.05,
                        help="peak learning rate of SGD (default 0.05)")
    parser.add_argument("--quiet", action="store_true", help="no Keras progress bar")
    args = parser.parse_args(argv)
    if args.epochs < 1 or args.batch_size < 1:
        parser.error("--epochs and --batch-size must be >= 1")
    return args


class TrainingClock(keras.callbacks.Callback):
    """Training time after the first step, and test accuracy after each epoch.

    The clock starts when the first batch ends (its tracing is the warm-up)
    and stops while the test set is evaluated.
    """

    def __init__(self, x_test, y_test):
        super().__init__()
        self.x_test, self.y_test = x_test, y_test
        self.seconds, self.accuracy = [], []
        self._start = None

    def on_train_batch_end(self, batch, logs=None):
        if self._start is None:
            self._start = time.perf_counter()
            self._elapsed = 0.0

    def on_epoch_end(self, epoch, logs=None):
        self._elapsed += time.perf_counter() - self._start
        _, accuracy = self.model.evaluate(self.x_test, self.y_test, batch_size=256, verbose=0)
        self.seconds.append(self._elapsed)
        self.accuracy.append(float(accuracy))
        self._start = time.perf_counter()

    def time_to(self, accuracy):
        """Training seconds until the first epoch at or above `accuracy`, or None."""
        return next((s for s, a in zip(self.seconds, self.accuracy) if a >= accuracy), None)


def make_optimizer(args, steps):
    """A fresh optimizer (each run needs its own: optimizers hold state)."""
    schedule = keras.optimizers.schedules.CosineDecay(args.learning_rate, steps)
    return keras.optimizers.SGD(learning_rate=schedule, momentum=0.9)


def train(model, data, args):
    """Compiles and fits `model`; returns its TrainingClock."""
    (x, y), (x_test, y_test) = data
    steps = args.epochs * -(-len(x) // args.batch_size)
    model.compile(
        optimizer=make_optimizer(args, steps),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    clock = TrainingClock(x_test, y_test)
    keras.utils.set_random_seed(SEED)  # the same shuffling order for both runs
    model.fit(x, y, batch_size=args.batch_size, epochs=args.epochs,
              verbose=0 if args.quiet else 1, callbacks=[clock])
    return clock


def build_boost_model(level):
    """The BoostModel for `level`, or None if the level is not available.

    `BoostModel.from_model` applies the level's model surgery (LessBN at
    O1/O2) to a fresh copy of the same network (same seed, so the same
    initial weights as the baseline). Levels whose algorithms are not
    implemented raise `NotImplementedError` (never a silent no-op):
    reported, run skipped.
    """
    try:
        model = boost.BoostModel.from_model(
            residual_cnn(seed=SEED), boost_level=level, name="residual_cnn_boost"
        )
    except NotImplementedError as error:
        print(f"\nBoost level {level} is not available yet in keras_boost "
              f"{boost.__version__}; skipping it. ({error})")
        return None
    if getattr(model, "less_bn_report", None) is not None:
        print(model.less_bn_report)
    return model


def print_table(clocks):
    baseline = next(iter(clocks.values()))
    target = baseline.accuracy[-1] - TOLERANCE
    header = (f"{'run':<16}{'final accuracy':>16}{'train time (s)':>16}"
              f"{f'time to {target:.3f} (s)':>22}")
    print("\n" + header)
    print("-" * len(header))
    for name, clock in clocks.items():
        reached = clock.time_to(target)
        reached_text = "not reached" if reached is None else f"{reached:.1f}"
        print(f"{name:<16}{clock.accuracy[-1]:>16.4f}{clock.seconds[-1]:>16.1f}{reached_text:>22}")
    if len(clocks) == 2:
        boosted = list(clocks.values())[1]
        print(f"\nboost / keras train time: {boosted.seconds[-1] / baseline.seconds[-1]:.3f}; "
              f"final accuracy {boosted.accuracy[-1] - baseline.accuracy[-1]:+.4f}. "
              "One run on a shared machine: see `keras-boost bench` for medians over seeds.")


def main(argv=None):
    args = parse_args(argv)
    print(f"Keras {keras.__version__}, backend {keras.backend.backend()}, "
          f"keras_boost {boost.__version__}")
    data = mnist_data()
    print(f"Embedded MNIST sample: {len(data[0][0])} train / {len(data[1][0])} test images")
    baseline = residual_cnn(seed=SEED)
    boosted = build_boost_model(args.level)
    clocks = {}
    print(f"\n[1/2] keras.Model ({baseline.count_params():,} weights)")
    clocks["keras.Model"] = train(baseline, data, args)
    if boosted is not None:
        print(f"\n[2/2] boost.BoostModel at {args.level}")
        clocks[f"BoostModel {args.level}"] = train(boosted, data, args)
        if getattr(boosted, "freeze_planner", None) is not None:
            print(boosted.freeze_planner.summary())
    print_table(clocks)
    return clocks


if __name__ == "__main__":
    main()
