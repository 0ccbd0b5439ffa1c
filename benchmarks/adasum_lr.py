"""O2 (AdaSum) against plain and O1 at the user's learning rate, on N replicas.

Issue 28 (class 9): MobileNetV2 under `MirroredStrategy` with SGD 0.02,
momentum 0.9 trained worse at O2 than plain (the loss rose). This script
measures it: `keras.applications.MobileNetV2` (`weights=None`, 32x32x3, 10
classes) on the embedded MNIST sample (padded to 32x32, tiled to 3
channels), `--replicas` logical CPUs, `--steps` steps per run. Within a seed
every mode starts from the same initial weights and sees the same batches
(the seed sets both). Per mode and seed: the loss on a fixed held-out set
(`--eval-samples` test images, BatchNorm in training mode as in the steps,
so that the 30-step-old moving statistics do not blur it) before and after
training (`start`, `end`), the per-step training loss (recovered from the
running mean Keras logs) and the wall time; per seed, AdaSum's step against
the mean's at the initial weights (`gain`: the global norm of the combined
first-batch gradient over the mean's, unbounded and bounded).

Modes (`--modes`): `plain` (the model as is, Keras' mean all-reduce),
`O1`, `O2`, `O2-nolessbn` (O2 with LessBN off), each optionally with
`adasum` config overrides, e.g. `O2+norm_bound=false` (Horovod's unbounded
rule, what O2 did before the bound) or `O2+reduce_on=delta+norm_bound=false`.

Example:

```shell
KERAS_BACKEND=tensorflow python -m benchmarks.adasum_lr --seeds 3 \
    --modes plain,O1,O2,O2+norm_bound=false --output adasum_lr.json
```
"""

import json
import statistics
import time

import keras
import numpy as np

from benchmarks import runner

BACKENDS = ("tensorflow",)  # tf.distribute
BASE_MODES = ("plain", "O1", "O2", "O2-nolessbn")


def parse_args(argv):
    parser = runner.parser("adasum_lr", __doc__, seeds=1, output="bench_results/adasum_lr_tensorflow.json",
                           backends=BACKENDS)
    parser.add_argument("--replicas", type=int, default=2, help="logical CPUs under MirroredStrategy (default 2)")
    parser.add_argument("--per-replica-batch", type=int, default=32, help="batch per replica (default 32)")
    parser.add_argument("--steps", type=int, default=30, help="training steps per run (default 30)")
    parser.add_argument("--eval-samples", type=int, default=512,
                        help="held-out test images of the start and end losses (default 512)")
    parser.add_argument("--learning-rate", type=float, default=0.02, help="SGD's learning rate (default 0.02)")
    parser.add_argument("--momentum", type=float, default=0.9, help="SGD's momentum (default 0.9)")
    parser.add_argument("--modes", default="plain,O1,O2,O2-nolessbn",
                        help=f"comma-separated, of {', '.join(BASE_MODES)}, each with +KEY=VALUE adasum overrides")
    args = runner.parse(parser, argv, positive=("replicas", "per_replica_batch", "steps", "eval_samples"))
    args.modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    for mode in args.modes:
        try:
            boost_config(mode)
        except ValueError as error:
            parser.error(f"--modes: {error}")
    return args


def boost_config(mode):
    """`(level, config dict)` of a mode name; `(None, None)` for plain."""
    base, *overrides = mode.split("+")
    if base not in BASE_MODES:
        raise ValueError(f"unknown mode {mode!r}; valid: {', '.join(BASE_MODES)}, each with +KEY=VALUE")
    if base == "plain":
        if overrides:
            raise ValueError(f"{mode!r}: plain takes no adasum override")
        return None, None
    config = {"boost": {"mode": "manual", "less_bn": False}} if base == "O2-nolessbn" else {}
    if overrides:
        config["adasum"] = {key: _json_or_text(value) for key, _, value in (o.partition("=") for o in overrides)}
    return base[:2], config


def _json_or_text(value):
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value  # a bare string, e.g. reduce_on=delta


class StepLosses(keras.callbacks.Callback):
    """Per-step training losses, recovered from Keras' running mean
    (equal batches: loss_t = (t + 1) m_t - t m_(t-1))."""

    def on_epoch_begin(self, epoch, logs=None):
        self.means = []

    def on_train_batch_end(self, batch, logs=None):
        self.means.append(float(logs["loss"]))

    def losses(self):
        previous = [0.0, *self.means[:-1]]
        return [(t + 1) * m - t * p for t, (m, p) in enumerate(zip(self.means, previous))]


def mnist_rgb32():
    """The embedded MNIST sample as (n, 32, 32, 3) float32: `(train, test)`."""
    from keras_boost.datasets import load_mnist_sample

    def rgb32(x):
        return np.repeat(np.pad(x, ((0, 0), (2, 2), (2, 2), (0, 0))), 3, axis=-1)

    (x, y), (x_test, y_test) = load_mnist_sample()
    return (rgb32(x), y), (rgb32(x_test), y_test)


def held_out_loss(model, x, y, loss, batch):
    """Mean loss over `(x, y)` in batches, BatchNorm in training mode."""
    values = [float(loss(y[i : i + batch], model(x[i : i + batch], training=True)))
              for i in range(0, len(x), batch)]
    return float(np.mean(values))


def mobilenet(seed):
    keras.utils.set_random_seed(seed)
    return keras.applications.MobileNetV2(
        input_shape=(32, 32, 3), classes=10, weights=None, classifier_activation=None)


def step_gain(model, shards, loss):
    """AdaSum's step over the mean's at `model`'s weights, global norms:
    `{"unbounded": ..., "bounded": ...}` for the local gradients of `shards`
    (one `(x, y)` per replica), computed on one device."""
    import tensorflow as tf

    from keras_boost.ops import adasum_tree

    local = []
    for x, y in shards:
        with tf.GradientTape() as tape:
            value = loss(y, model(x, training=True))
        local.append(tape.gradient(value, model.trainable_variables))
    stacked = [tf.stack(per_replica) for per_replica in zip(*local)]

    def norm(tensors):
        return float(tf.sqrt(sum(tf.reduce_sum(tf.square(t)) for t in tensors)))

    mean = norm([tf.reduce_mean(s, 0) for s in stacked])
    return {
        "unbounded": norm([adasum_tree(s) for s in stacked]) / mean,
        "bounded": norm([adasum_tree(s, norm_bound=True) for s in stacked]) / mean,
    }


def summarize(runs, modes):
    """Per mode: mean start and end losses over seeds, and in how many seeds the loss rose."""
    return {
        mode: {
            "start": statistics.mean(r["start"] for r in runs[mode]),
            "end": statistics.mean(r["end"] for r in runs[mode]),
            "rose": sum(r["end"] > r["start"] for r in runs[mode]),
            "seeds": len(runs[mode]),
        }
        for mode in modes
    }


def measure(args):
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * args.replicas)
    strategy = tf.distribute.MirroredStrategy([f"/CPU:{i}" for i in range(args.replicas)])

    import keras_boost as boost

    (images, labels), (x_eval, y_eval) = mnist_rgb32()
    x_eval, y_eval = x_eval[: args.eval_samples], y_eval[: args.eval_samples]
    global_batch = args.replicas * args.per_replica_batch
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def train(mode, seed, x, y):
        level, config = boost_config(mode)
        with strategy.scope():
            model = mobilenet(seed)
            if level is not None:
                model = boost.BoostModel.from_model(model, boost_level=level, boost_config_dict=config)
            model.compile(optimizer=keras.optimizers.SGD(args.learning_rate, momentum=args.momentum), loss=loss)
        dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(global_batch, drop_remainder=True)
        recorder = StepLosses()
        before = held_out_loss(model, x_eval, y_eval, loss, global_batch)
        start = time.perf_counter()
        model.fit(dataset, epochs=1, shuffle=False, verbose=0, callbacks=[recorder])
        seconds = time.perf_counter() - start
        return {
            "seed": seed, "start": before, "end": held_out_loss(model, x_eval, y_eval, loss, global_batch),
            "losses": recorder.losses(), "seconds": seconds,
        }

    runs, gains = {mode: [] for mode in args.modes}, []
    for seed in runner.seeds(args):
        order = np.random.default_rng(seed).permutation(len(images))[: args.steps * global_batch]
        x, y = images[order], labels[order]
        shards = [(x[r * args.per_replica_batch : (r + 1) * args.per_replica_batch],
                   y[r * args.per_replica_batch : (r + 1) * args.per_replica_batch]) for r in range(args.replicas)]
        gains.append({"seed": seed, **step_gain(mobilenet(seed), shards, loss)})
        print(f"seed {seed}: AdaSum's first step / the mean's: {gains[-1]['unbounded']:.2f} unbounded, "
              f"{gains[-1]['bounded']:.2f} bounded", flush=True)
        for i in range(len(args.modes)):
            mode = args.modes[(i + seed) % len(args.modes)]  # rotate which mode runs first
            runs[mode].append(train(mode, seed, x, y))
            r = runs[mode][-1]
            print(f"seed {seed} {mode:>24}: loss {r['start']:.3f} -> {r['end']:.3f}  ({r['seconds']:.0f} s)",
                  flush=True)
    summary = summarize(runs, args.modes)
    for mode, s in summary.items():
        print(f"{mode:>24}: {s['start']:.2f} -> {s['end']:.2f} (mean of {s['seeds']} seeds; rose in {s['rose']})")
    return {"summary": summary, "gain": gains, "runs": runs}


def main(argv=None):
    return runner.main("adasum_lr", measure, parse_args, argv, backends=BACKENDS)


if __name__ == "__main__":
    main()
