"""DimReduce's two-stage recipe against more plain epochs (the tutorial's shape).

Stage 1: a `keras-boost bench` workload's model (`--workload`, default the
quickstart residual CNN; `realistic` is the augmented ResNet-20) trains
`--stage1-epochs` epochs of SGD with the workload's momentum and weight
decay at a constant learning rate (the workload's peak rate unless
`--learning-rate` says otherwise), with `boost.callbacks.WeightTrajectory`
saving a snapshot every `--every` steps from epoch `--trajectory-start-epoch`
on. Then, from the same stage-1 model and optimizer state (saved and
reloaded per branch), these continuations:

- `dim_reduce`: 2 epochs of DimReduce (BFGS in the top-`--components` PCA
  subspace of the trajectory + residual momentum SGD); with several
  `--max-line-search` or `--alpha` values, one branch per combination
  (`dim_reduce/ls<n>/a<alpha>`, naming the settings that vary);
- `plain+2`, `plain+long`: 2 and `--long-epochs` (10) more epochs of the
  same SGD;
- `plain+2-annealed`: 2 more epochs of the same SGD with its rate decayed
  linearly to 0. DimReduce's small steps act partly as an annealing of a
  constant-rate stage 1; this branch says how much of its gain plain
  annealing gets for the same epochs.

Reported per seed: test accuracy after each branch and its training wall
time (evaluation excluded). The tutorial's claim, in this shape: DimReduce
+ 2 epochs at or above plain + 10 epochs.

Example:

```shell
python -m benchmarks.dim_reduce --seeds 2 --output dim_reduce.json
python -m benchmarks.dim_reduce --stage1-epochs 12 --components 32 \
    --max-line-search 2,4 --seeds 4 --output dim_reduce_ls.json
python -m benchmarks.dim_reduce --workload realistic --stage1-epochs 8 \
    --components 32 --seeds 4 --output dim_reduce_realistic.json
```
"""

import json
import math
import os
import statistics
import tempfile
import time
import warnings

import keras
import numpy as np

import keras_boost as boost
from benchmarks import runner
from keras_boost.bench.arguments import number_list
from keras_boost.bench.arguments import require_positive
from keras_boost.bench.catalog import WORKLOADS

LOSS = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def parse_args(argv):
    parser = runner.parser("dim_reduce", __doc__, seeds=2, output="bench_results/dim_reduce.json")
    parser.add_argument("--workload", choices=sorted(WORKLOADS), default="quickstart",
                        help="the model, data and SGD recipe (momentum, weight decay) of stage 1")
    parser.add_argument("--stage1-epochs", type=int, default=4, help="epochs of stage 1 (default 4)")
    parser.add_argument("--every", type=int, default=10, help="steps between trajectory snapshots")
    parser.add_argument("--trajectory-start-epoch", type=int, default=0,
                        help="first stage-1 epoch recorded (MindSpore's tutorial skips the early ones)")
    parser.add_argument("--components", type=int, default=16, help="PCA components of the subspace (default 16)")
    parser.add_argument("--learning-rate", type=float, help="constant SGD rate (default: the workload's peak)")
    parser.add_argument("--batch-size", type=int, help="default: the workload's")
    parser.add_argument("--alpha", type=number_list(float, 0.0), default=[0.001],
                        help="DimReduce's residual rate; a comma-separated list runs one branch per value")
    parser.add_argument("--max-line-search", type=number_list(int, 1), default=[2],
                        help="Armijo trials per step; a comma-separated list runs one branch per value")
    parser.add_argument("--long-epochs", type=int, default=10, help="epochs of the long plain branch")
    args = runner.parse(parser, argv)
    workload = WORKLOADS[args.workload]()
    if args.learning_rate is None:
        args.learning_rate = workload.learning_rate
    if args.batch_size is None:
        args.batch_size = workload.batch_size
    require_positive(parser, args, ("stage1_epochs", "every", "components", "batch_size", "long_epochs"))
    if not args.learning_rate > 0:
        parser.error(f"--learning-rate must be > 0, got {args.learning_rate}")
    if args.trajectory_start_epoch < 0:
        parser.error(f"--trajectory-start-epoch must be >= 0, got {args.trajectory_start_epoch}")
    for alpha in args.alpha:  # the config's own rule (alpha > 0), before stage 1 runs
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                boost.config.resolve_config("O0", {"boost": {"mode": "manual", "dim_reduce": True},
                                                   "dim_reduce": {"alpha": alpha}})
        except ValueError as error:
            parser.error(f"--alpha: {error}")
    if args.trajectory_start_epoch >= args.stage1_epochs:
        parser.error(f"--trajectory-start-epoch must be below --stage1-epochs ({args.stage1_epochs}), "
                     f"got {args.trajectory_start_epoch}")
    return args


def _branch_names(trial_counts, alphas):
    """{(trials, alpha): branch name}; a name shows only the settings that vary."""
    names = {}
    for trials in trial_counts:
        for alpha in alphas:
            parts = ["dim_reduce"]
            if len(trial_counts) > 1:
                parts.append(f"ls{trials}")
            if len(alphas) > 1:
                parts.append(f"a{alpha:g}")
            names[trials, alpha] = "/".join(parts)
    return names


class _LinearDecay(keras.callbacks.Callback):
    """Decays the optimizer's constant learning rate linearly to 0 over `total_steps` batches."""

    def __init__(self, initial_rate, total_steps):
        super().__init__()
        self.initial_rate = float(initial_rate)
        self.total_steps = int(total_steps)
        self.step = 0

    def on_train_begin(self, logs=None):
        self.step = 0

    def on_train_batch_begin(self, batch, logs=None):
        self.model.optimizer.learning_rate = self.initial_rate * (1.0 - self.step / self.total_steps)
        self.step += 1


def _accuracy(model, x, y):
    logits = model.predict(x, batch_size=500, verbose=0)
    return float(np.mean(np.argmax(logits, -1) == y))


def _timed_fit(model, x, y, epochs, batch_size, seed, callbacks=()):
    keras.utils.set_random_seed(seed)
    start = time.perf_counter()
    model.fit(x, y, batch_size=batch_size, epochs=epochs, verbose=0, callbacks=list(callbacks))
    return time.perf_counter() - start


def measure(args):
    """Yields the result after every seed: an interrupted run keeps its seeds."""
    workload = WORKLOADS[args.workload]()
    (x, y), (x_test, y_test) = workload.data()
    steps_per_epoch = math.ceil(len(x) / args.batch_size)
    runs = []
    dim_reduce_branches = _branch_names(args.max_line_search, args.alpha)
    plain_branches = {"plain+2": (2, ()), "plain+long": (args.long_epochs, ()),
                      "plain+2-annealed": (2, (_LinearDecay(args.learning_rate, 2 * steps_per_epoch),))}
    branches = (*plain_branches, *dim_reduce_branches.values())
    for seed in runner.seeds(args):
        with tempfile.TemporaryDirectory() as work:
            keras.utils.set_random_seed(seed)
            model = workload.build(seed)
            model.compile(optimizer=keras.optimizers.SGD(args.learning_rate, momentum=workload.momentum,
                                                         weight_decay=workload.weight_decay), loss=LOSS)
            trajectory = os.path.join(work, "trajectory")
            snapshots = boost.callbacks.WeightTrajectory(
                trajectory, every=args.every, start_epoch=args.trajectory_start_epoch)
            seconds = _timed_fit(model, x, y, args.stage1_epochs, args.batch_size, seed, (snapshots,))
            record = {"seed": seed, "stage1_seconds": seconds, "stage1_accuracy": _accuracy(model, x_test, y_test)}
            saved = os.path.join(work, "stage1.keras")
            model.save(saved)
            for branch, (epochs, callbacks) in plain_branches.items():
                continued = keras.saving.load_model(saved)
                seconds = _timed_fit(continued, x, y, epochs, args.batch_size, seed + 1, callbacks)
                record[branch] = {"accuracy": _accuracy(continued, x_test, y_test), "seconds": seconds}
            for (trials, alpha), branch in dim_reduce_branches.items():
                config = {"boost": {"mode": "manual", "dim_reduce": True},
                          "dim_reduce": {"weight_load_dir": trajectory, "n_components": args.components,
                                         "alpha": alpha, "max_line_search": trials,
                                         "pca_mat_path": os.path.join(work, "pca_mat.npy")}}
                stage2 = boost.BoostModel.from_model(keras.saving.load_model(saved), boost_config_dict=config)
                stage2.compile(optimizer="sgd", loss=LOSS)
                seconds = _timed_fit(stage2, x, y, 2, args.batch_size, seed + 1)
                optimizer = boost.optimizers.find_in_chain(stage2.optimizer, boost.optimizers.DimReduce)
                record[branch] = {
                    "accuracy": _accuracy(stage2, x_test, y_test), "seconds": seconds,
                    "accepted_steps": int(keras.ops.convert_to_numpy(optimizer.accepted_steps)),
                    "steps": int(keras.ops.convert_to_numpy(optimizer.iterations)),
                }
        runs.append(record)
        print(f"seed {seed}: stage 1 {record['stage1_accuracy']:.4f}; "
              + ", ".join(f"{b} {record[b]['accuracy']:.4f} ({record[b]['seconds']:.0f} s)"
                          for b in branches), flush=True)
        result = {
            "complete": len(runs) == args.seeds,
            "runs": runs,
            "median_accuracy": {b: statistics.median(r[b]["accuracy"] for r in runs) for b in branches},
        }
        yield result
    print(json.dumps(result["median_accuracy"], indent=1))


def main(argv=None):
    return runner.main("dim_reduce", measure, parse_args, argv)


if __name__ == "__main__":
    main()
