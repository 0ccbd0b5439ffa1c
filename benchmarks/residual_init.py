"""Does a SkipInit/Fixup-style initialization help LessBN's first epochs?

LessBN removes bn1 (and the projection-shortcut BN) of each basic block and
keeps bn2, so a residual branch is still normalized at its end but no
longer in the middle. This script measures whether re-initializing what the
surgery touches helps, on the `quickstart` and `deep_narrow` models of
`benchmarks.head_scale`, trained as LessBN (`fn_flag=False`, the
original Dense head, so that only the BN removal differs) with
`GradientCentralization`:

- `baseline`: the original model (every BN), plain SGD, for reference;
- `less_bn`: LessBN as is (MindSpore's forward math);
- `skipinit`: the kept bn2 of every block that lost its bn1 starts with
  gamma = 0, so each residual branch starts at 0 (SkipInit, De & Smith
  2020; "zero-init residual", Goyal et al. 2017);
- `fixup`: `skipinit`, plus conv1 of those branches scaled by `L**-0.5` for
  `L` residual branches (Fixup's rescaling for two-layer branches, Zhang et
  al. 2019) and the BN-less projection convs scaled to unit gain (1/sqrt 2).

SGD(0.05, momentum 0.9), batch 64, same initial weights and batch order per
(model, seed); test accuracy after each epoch.

Example:

```shell
KERAS_BACKEND=tensorflow python -m benchmarks.residual_init
```
"""

import statistics
import warnings

import keras
import numpy as np

import keras_boost as boost
from benchmarks import runner
from benchmarks.head_scale import MODELS
from benchmarks.head_scale import train
from keras_boost.bench.workloads import mnist_data

VARIANTS = ("baseline", "less_bn", "skipinit", "fixup")


def parse_args(argv=None):
    parser = runner.parser("residual_init", __doc__, seeds=2)
    parser.add_argument("--models", default="quickstart,deep_narrow",
                        help=f"comma-separated, of {', '.join(MODELS)}")
    parser.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated, of {', '.join(VARIANTS)}")
    parser.add_argument("--epochs", type=int, default=4, help="epochs per run (default 4)")
    return runner.parse(parser, argv, positive=("epochs",))


def _scale(layer, factor):
    layer.kernel.assign(keras.ops.convert_to_numpy(layer.kernel) * factor)


def build(model_name, seed, variant_name):
    model = MODELS[model_name](seed)
    optimizer = keras.optimizers.SGD(0.05, momentum=0.9)
    if variant_name != "baseline":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = boost.LessBN(model, fn_flag=False)
        optimizer = boost.GradientCentralization(optimizer)
        removed = model.less_bn_report.removed_names
        blocks = [n[: -len("bn1")] for n in removed if n.endswith("_bn1")]
        if variant_name in ("skipinit", "fixup"):
            for prefix in blocks:
                bn = model.get_layer(prefix + "bn2")
                bn.gamma.assign(np.zeros(bn.gamma.shape, "float32"))
        if variant_name == "fixup":
            num_branches = sum(isinstance(l, keras.layers.Add) for l in model.layers)
            for prefix in blocks:
                _scale(model.get_layer(prefix + "conv1"), num_branches**-0.5)
            for name in removed:
                if name.endswith("_proj_bn"):
                    _scale(model.get_layer(name[: -len("bn")] + "conv"), 2**-0.5)
    model.compile(optimizer=optimizer, metrics=["accuracy"],
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def measure(args):
    data = mnist_data()
    out = {"runs": []}
    for model_name in args.models.split(","):
        for seed in runner.seeds(args):
            for variant_name in args.variants.split(","):
                keras.utils.clear_session()
                result = train(build(model_name, seed, variant_name), data, seed, args.epochs)
                result.update(model=model_name, seed=seed, variant=variant_name)
                out["runs"].append(result)
                print(f"{model_name:12s} seed {seed} {variant_name:9s} acc "
                      + "/".join(f"{a:.3f}" for a in result["curve"]), flush=True)
    print("\n| model | variant | " + " | ".join(f"acc ep{e + 1}" for e in range(args.epochs))
          + " |\n|---|---|" + "---|" * args.epochs)
    for model_name in args.models.split(","):
        for variant_name in args.variants.split(","):
            curves = [r["curve"] for r in out["runs"]
                      if (r["model"], r["variant"]) == (model_name, variant_name)]
            accs = " | ".join(f"{statistics.mean(a):.3f}" for a in zip(*curves))
            print(f"| {model_name} | {variant_name} | {accs} |")
    return out


def main(argv=None):
    return runner.main("residual_init", measure, parse_args, argv)


if __name__ == "__main__":
    main()
