"""Early training with and without O1 on keras.applications models LessBN cannot shrink.

Issue 28 found that O1 swapped the head of models where LessBN removes no
BatchNormalization (a pre-activation ResNet, EfficientNet), and that this
head alone slowed the first steps (ResNet50V2: O1's loss 3.7-4.7x plain's
after the same steps). This script trains each model from the same initial
weights on the same random batches (input 32x32x3, 10 classes,
`weights=None`, SGD(0.02, momentum 0.9), softmax output with
`sparse_categorical_crossentropy`) as:

- `plain`: the Keras model;
- `O1`: `boost.BoostModel.from_model(model, "O1")` (what the user gets);
- `O1_no_freeze`: the same with gradient freezing off (the surgery alone).

and prints, per variant, the mean training loss of the last `--last` steps
(per-step losses recovered from fit's running mean), the ratio to plain's,
and what the surgery did (BNs removed, head swapped).

Example:

```shell
KERAS_BACKEND=tensorflow python -m benchmarks.head_swap
KERAS_BACKEND=tensorflow python -m benchmarks.head_swap --models ResNet50V2 --steps 10
```
"""

import warnings

import keras
import numpy as np

import keras_boost as boost
from benchmarks import runner
from benchmarks.adasum_lr import StepLosses

VARIANTS = {
    "plain": None,
    "O1": {},
    "O1_no_freeze": {"boost": {"mode": "manual", "grad_freeze": False}},
}


def build(name, seed):
    keras.utils.set_random_seed(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return getattr(keras.applications, name)(weights=None, input_shape=(32, 32, 3), classes=10)


def run(name, variant, args):
    """The per-step losses of one variant, and what its surgery did."""
    model = build(name, args.seed)  # same seed: same initial weights for every variant
    config = VARIANTS[variant]
    did = "-"
    if config is not None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = boost.BoostModel.from_model(model, "O1", boost_config_dict=config)
        report = getattr(model, "less_bn_report", None)
        if report is not None:
            did = f"{report.num_removed}/{report.num_bn} BNs removed, head: {report.head or 'kept'}"
        else:
            did = "no LessBN copy (nothing changed)"
    model.compile(optimizer=keras.optimizers.SGD(0.02, momentum=0.9),
                  loss="sparse_categorical_crossentropy")
    rng = np.random.default_rng(args.seed)
    n = args.steps * args.batch_size
    x = rng.normal(size=(n, 32, 32, 3)).astype("float32")
    y = rng.integers(0, 10, size=(n,))
    steps = StepLosses()
    model.fit(x, y, batch_size=args.batch_size, epochs=1, shuffle=False, verbose=0, callbacks=[steps])
    return steps.losses(), did


def parse_args(argv=None):
    parser = runner.parser("head_swap", __doc__, seed=0)
    parser.add_argument("--models", default="ResNet50V2,EfficientNetB0",
                        help="comma-separated keras.applications model names")
    parser.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated, of {', '.join(VARIANTS)}")
    parser.add_argument("--steps", type=int, default=20, help="training steps per run (default 20)")
    parser.add_argument("--last", type=int, default=5, help="steps averaged at the end")
    parser.add_argument("--batch-size", type=int, default=16, help="batch size (default 16)")
    return runner.parse(parser, argv, positive=("steps", "last", "batch_size"))


def measure(args):
    print(f"{args.steps} steps of {args.batch_size}")
    runs = []
    for name in args.models.split(","):
        plain = None
        for variant in args.variants.split(","):
            losses, did = run(name, variant, args)
            last = float(np.mean(losses[-args.last:]))
            plain = last if variant == "plain" else plain
            ratio = f"{last / plain:.2f}x plain" if plain else ""
            print(f"{name:<16}{variant:<14} loss(last {args.last}) {last:8.4f} {ratio:>12}  "
                  f"first {losses[0]:.4f}  {did}", flush=True)
            runs.append({"model": name, "variant": variant, "losses": losses, "last_mean_loss": last,
                         "surgery": did})
    return {"runs": runs}


def main(argv=None):
    return runner.main("head_swap", measure, parse_args, argv)


if __name__ == "__main__":
    main()
