"""keras_boost on keras-io's transfer-learning flow: freeze a base, train a head, fine-tune the top.

keras-io's "Transfer learning & fine-tuning" guide, on the MNIST sample
embedded in the package (nothing downloads):

0. a small conv base is pretrained on the digits 0-4 (plain Keras);
1. a new model calls it frozen, `base(inputs, training=False)`, under a new
   head for the digits 5-9, and trains the head;
2. the base's top block is unfrozen and the model recompiled at a tenth of
   the learning rate, and fine-tuned.

Phases 1 and 2 run twice from the same weights and batch order: as a plain
`keras.Model`, and as `boost.BoostModel.from_model(model, boost_level="O1")`.
At O1, `fit` on arrays computes the frozen part once per phase and trains
the rest on its outputs (prefix caching); the line it prints at the end of
each `fit` says what ran. Printed at the end: each run's training time and
test accuracy.

Run (about a minute on 2 CPU cores):

```shell
KERAS_BACKEND=tensorflow python examples/transfer_learning.py
KERAS_BACKEND=torch python examples/transfer_learning.py --epochs 2 --quiet
```
"""

import argparse
import time

import keras
import numpy as np

import keras_boost as boost
from keras_boost.datasets import load_mnist_sample

SEED = 7


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epochs", type=int, default=4, help="epochs of each phase (default 4)")
    parser.add_argument("--pretrain-epochs", type=int, default=3, help="epochs of the base's pretraining (default 3)")
    parser.add_argument("--samples", type=int, default=None,
                        help="train on the first N images of the sample (default: all 4,000)")
    parser.add_argument("--quiet", action="store_true", help="no Keras progress bar")
    args = parser.parse_args(argv)
    for name in ("epochs", "pretrain_epochs", "samples"):
        value = getattr(args, name)
        if value is not None and value < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1, got {value}")
    return args


def split_digits(x, y, low):
    """The images of digits 0-4 (`low`) or 5-9, labelled 0-4."""
    keep = (y < 5) if low else (y >= 5)
    return x[keep], (y[keep] % 5).astype("int32")


def make_base():
    """Three conv-BN-ReLU blocks and global pooling: the "pretrained" network."""
    inputs = keras.Input((28, 28, 1))
    h = inputs
    for i, filters in enumerate((16, 32, 64), start=1):
        h = keras.layers.Conv2D(filters, 3, strides=1 if i == 1 else 2, padding="same", use_bias=False,
                                name=f"block{i}_conv")(h)
        # momentum 0.9: the moving statistics, which the frozen base uses,
        # must follow the data within the short pretraining.
        h = keras.layers.BatchNormalization(momentum=0.9, name=f"block{i}_bn")(h)
        h = keras.layers.ReLU(name=f"block{i}_relu")(h)
    return keras.Model(inputs, keras.layers.GlobalAveragePooling2D(name="pool")(h), name="base")


def pretrained_base(x, y, epochs):
    """The base trained with a temporary head on the digits 0-4."""
    keras.utils.set_random_seed(SEED)
    base = make_base()
    model = keras.Sequential([base, keras.layers.Dense(5)])
    model.compile(optimizer=keras.optimizers.SGD(0.05, momentum=0.9),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(x, y, batch_size=32, epochs=epochs, verbose=0)
    return base


def transfer_model(base_weights):
    """keras-io's model: the frozen base in inference mode, a new head."""
    keras.utils.set_random_seed(SEED + 1)
    base = make_base()
    base.set_weights(base_weights)
    base.trainable = False
    inputs = keras.Input((28, 28, 1))
    h = base(inputs, training=False)  # its BNs keep their pretrained statistics
    h = keras.layers.Dropout(0.2)(h)
    return keras.Model(inputs, keras.layers.Dense(5, name="head")(h), name="transfer")


def train(model, data, args, learning_rate):
    (x, y), _ = data
    model.compile(optimizer=keras.optimizers.SGD(learning_rate, momentum=0.9),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    keras.utils.set_random_seed(SEED)  # the same shuffling for both runs
    start = time.perf_counter()
    model.fit(x, y, batch_size=32, epochs=args.epochs, verbose=0 if args.quiet else 2)
    seconds = time.perf_counter() - start
    if args.quiet and isinstance(model, boost.BoostModel):
        print(model.boost_summary())  # fit prints it itself when verbose
    return seconds


def run(model, data, args):
    """Phase 1 (the head), then phase 2 (the base's top block too); returns
    (training seconds, test accuracy)."""
    seconds = train(model, data, args, learning_rate=0.05)
    base = model.get_layer("base")
    base.trainable = True
    for layer in base.layers:
        layer.trainable = layer.name.startswith("block3_") and "bn" not in layer.name
    seconds += train(model, data, args, learning_rate=0.005)
    _, (x_test, y_test) = data
    _, accuracy = model.evaluate(x_test, y_test, batch_size=256, verbose=0)
    return seconds, float(accuracy)


def main(argv=None):
    args = parse_args(argv)
    print(f"Keras {keras.__version__}, backend {keras.backend.backend()}, keras_boost {boost.__version__}")
    (x, y), (x_test, y_test) = load_mnist_sample()
    x, y = x[:args.samples], y[:args.samples]
    base = pretrained_base(*split_digits(x, y, low=True), epochs=args.pretrain_epochs)
    data = (split_digits(x, y, low=False), split_digits(x_test, y_test, low=False))
    results = {}
    for name in ("keras.Model", "BoostModel O1"):
        print(f"\n{name}")
        model = transfer_model(base.get_weights())
        if name != "keras.Model":
            model = boost.BoostModel.from_model(model, boost_level="O1")
        results[name] = run(model, data, args)
    print(f"\n{'run':<16}{'train time (s)':>16}{'test accuracy':>16}")
    for name, (seconds, accuracy) in results.items():
        print(f"{name:<16}{seconds:>16.1f}{accuracy:>16.4f}")
    plain, boosted = results.values()
    print(f"\nBoostModel O1 / keras.Model train time: {boosted[0] / plain[0]:.2f} (one run on a shared "
          "machine: `keras-boost bench --workload finetune` gives medians over seeds)")
    return results


if __name__ == "__main__":
    main()
