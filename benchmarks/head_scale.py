"""Initial scale of LessBN's NormalizedDense head: which rule trains fastest.

MindSpore starts the head's scale at 1, so the logits are cosines in
[-1, 1] and the softmax cannot get confident until the scale has grown. This
script trains `LessBN(model, fn_flag=True)` + `GradientCentralization`
(the less_bn part of level O1) with the head's scale started by each rule:

- `dense`: LessBN without the head (`fn_flag=False`), the reference;
- `1`: MindSpore's unit scale;
- `adacos`: AdaCos' fixed scale `sqrt(2) * log(C - 1)` (3.11 for 10 classes);
- `matched`: `keras_boost.algorithms.less_bn.matched_scale(kernel)`, the logit spread of the
  replaced Dense on isotropic inputs (depends on the head's input size);
- a number: that fixed scale.

on three models of the embedded MNIST sample (4,000 train / 1,000 test):

- `quickstart`: `residual_cnn()`, the quickstart CNN (head input 64);
- `deep_narrow`: `residual_cnn(width=8, blocks=(2, 2, 2))` (6 blocks, 32);
- `mlp`: Flatten-Dense(256)-BN-ReLU twice (no BN removed: head only, 256).

SGD(0.05, momentum 0.9), batch 64, the same initial weights and batch order
for every rule of a (model, seed); test accuracy after each epoch. Also
printed: the std of the initial logits on the test images.

Example:

```shell
KERAS_BACKEND=tensorflow python -m benchmarks.head_scale
KERAS_BACKEND=tensorflow python -m benchmarks.head_scale --models quickstart \\
    --rules 1,matched --epochs 2 --seeds 1
```
"""

import statistics
import time
import warnings

import keras
import numpy as np

import keras_boost as boost
from benchmarks import runner
from keras_boost.bench.workloads import mnist_data
from keras_boost.bench.workloads import residual_cnn
from keras_boost.algorithms.less_bn import adacos_scale
from keras_boost.algorithms.less_bn import matched_scale

L = keras.layers


def mlp(seed, name="mlp"):
    """Flatten, then (Dense(256) -> BN -> ReLU) x 2, then Dense(10)."""
    seeds = iter(range(seed * 1000, seed * 1000 + 10))
    inputs = keras.Input((28, 28, 1), name="image")
    x = L.Flatten()(inputs)
    for i in (1, 2):
        x = L.Dense(256, use_bias=False, name=f"fc{i}",
                    kernel_initializer=keras.initializers.HeNormal(seed=next(seeds)))(x)
        x = L.ReLU(name=f"relu{i}")(L.BatchNormalization(momentum=0.9, name=f"bn{i}")(x))
    out = L.Dense(10, name="logits",
                  kernel_initializer=keras.initializers.GlorotUniform(seed=next(seeds)))(x)
    return keras.Model(inputs, out, name=name)


MODELS = {
    "quickstart": lambda seed: residual_cnn(seed=seed),
    "deep_narrow": lambda seed: residual_cnn(seed=seed, width=8, blocks=(2, 2, 2),
                                             name="deep_narrow"),
    "mlp": mlp,
}


def parse_args(argv=None):
    parser = runner.parser("head_scale", __doc__, seeds=2)
    parser.add_argument("--models", default=",".join(MODELS), help=f"comma-separated, of {', '.join(MODELS)}")
    parser.add_argument("--rules", default="dense,1,adacos,matched,16",
                        help="comma-separated initial-scale rules: dense, 1, adacos, matched or a number")
    parser.add_argument("--epochs", type=int, default=4, help="epochs per run (default 4)")
    parser.add_argument("--lr", type=float, default=0.05, help="SGD's learning rate (default 0.05)")
    return runner.parse(parser, argv, positive=("epochs",))


def rule_scale(rule, head):
    """The initial scale `rule` gives the `NormalizedDense` head, or None."""
    if rule == "dense":
        return None
    if rule == "adacos":
        return adacos_scale(head.units)
    if rule == "matched":
        return matched_scale(head.kernel)
    return float(rule)


def build(model_name, seed, rule, lr):
    """LessBN'd model for one (model, seed, rule), compiled; and its head scale."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # mlp: head only, NoEffectWarning
        model = boost.LessBN(MODELS[model_name](seed), fn_flag=rule != "dense")
    scale = None
    if rule != "dense":
        head = model.layers[-1]
        scale = rule_scale(rule, head)
        head.scale.assign(scale)
    model.compile(
        optimizer=boost.GradientCentralization(keras.optimizers.SGD(lr, momentum=0.9)),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    return model, scale


def train(model, data, seed, epochs):
    (x, y), (x_test, y_test) = data
    logits = keras.ops.convert_to_numpy(model(x_test[:512], training=False))
    keras.utils.set_random_seed(seed)  # same batch order for every rule
    curve, start = [], time.perf_counter()
    for _ in range(epochs):
        model.fit(x, y, batch_size=64, epochs=1, verbose=0)
        curve.append(float(model.evaluate(x_test, y_test, batch_size=256, verbose=0)[1]))
    return {"curve": curve, "initial_logit_std": float(np.std(logits)),
            "seconds": time.perf_counter() - start}


def measure(args):
    data = mnist_data()
    out = {"runs": []}
    for model_name in args.models.split(","):
        for seed in runner.seeds(args):
            for rule in args.rules.split(","):
                keras.utils.clear_session()
                model, scale = build(model_name, seed, rule, args.lr)
                result = train(model, data, seed, args.epochs)
                result.update(model=model_name, seed=seed, rule=rule, initial_scale=scale,
                              final_scale=None if scale is None else float(
                                  keras.ops.convert_to_numpy(model.layers[-1].scale)))
                out["runs"].append(result)
                print(f"{model_name:12s} seed {seed} {rule:8s} s0="
                      f"{'-' if scale is None else f'{scale:.2f}':>6s} "
                      f"logit std {result['initial_logit_std']:.3f} acc "
                      + "/".join(f"{a:.3f}" for a in result["curve"])
                      + f" ({result['seconds']:.0f} s)", flush=True)
    print()
    print(table(out, args.epochs))
    return out


def table(out, epochs):
    """Markdown table: mean test accuracy per epoch over the seeds."""
    rows = ["| model | rule | initial scale | initial logit std | "
            + " | ".join(f"acc ep{e + 1}" for e in range(epochs)) + " |",
            "|---|---|---|---|" + "---|" * epochs]
    keys = []
    for r in out["runs"]:
        if (r["model"], r["rule"]) not in keys:
            keys.append((r["model"], r["rule"]))
    for model_name, rule in keys:
        runs = [r for r in out["runs"] if (r["model"], r["rule"]) == (model_name, rule)]
        scale = runs[0]["initial_scale"]
        accs = [statistics.mean(a) for a in zip(*(r["curve"] for r in runs))]
        std = statistics.mean(r["initial_logit_std"] for r in runs)
        rows.append(f"| {model_name} | {rule} | {'-' if scale is None else f'{scale:.2f}'} | "
                    f"{std:.3f} | " + " | ".join(f"{a:.3f}" for a in accs) + " |")
    return "\n".join(rows)


def main(argv=None):
    return runner.main("head_scale", measure, parse_args, argv)


if __name__ == "__main__":
    main()
