"""AdaSum and the compressed all-reduce against Keras' mean all-reduce on N replicas.

Splits this machine's CPU into `--replicas` logical devices under
`MirroredStrategy` (TensorFlow backend) and trains the quickstart residual
CNN at a large global batch (replicas x `--per-replica-batch`), once per
seed and mode: SGD with momentum and the same cosine schedule, with the
gradients combined by (`--modes`, default `mean,adasum`)

- `mean`: Keras' own all-reduce (the mean of the replicas' gradients);
- `adasum`: `boost.AdaSum(optimizer)` (the AdaSum tree over the replicas;
  the halving/doubling exchange for 2**k replicas);
- `adasum-gather`: the same with `exchange="gather"` (every replica gathers
  every gradient);
- `adasum-unbounded`: `norm_bound=False` (Horovod's unbounded rule, AdaSum's
  default before the bound);
- `bf16`, `bf16-ef`, `f16`: `boost.optimizers.CompressedAllReduce` in
  bfloat16 (without / with error feedback) or float16.

Bytes on the wire: what one replica hands the all-reduce per step (its
gradients in the wire dtype; AdaSum's all-gather sends float32), and what it
sends per step under the standard cost models
(`keras_boost.algorithms.adasum.bytes_sent_per_replica`: ring all-reduce, ring
all-gather, halving/doubling; the pattern AdaSum's traced step used).

Measured, in one process:

(a) step time: after a warm-up fit of each, `--repeats` interleaved timed
    epochs of `--timing-steps` steps per mode, rotating which goes first;
    the per-repeat ratio mode / mean, median and min-max;
(b) epochs to the target accuracy (`--target`, the quickstart's 0.93): each
    run trains up to `--max-epochs` epochs (the schedule spans them all),
    evaluated after every epoch, and stops at the first epoch that reaches
    the target; per seed and mode, the order alternating between seeds.

Logical CPUs share the machine's cores: the step-time ratio is the cost of
the combine relative to compute on this machine, not a network measurement.

Example:

```shell
python -m benchmarks.adasum --replicas 8 --seeds 2 --output adasum.json
python -m benchmarks.adasum --replicas 4 --modes mean,bf16,bf16-ef --output compressed.json
```
"""

import statistics
import time

# Importing keras does not initialize TensorFlow's devices, so the logical
# CPUs can still be configured in `run`.
import keras
import numpy as np

from benchmarks import runner
from benchmarks.overhead import EpochTimer

BACKENDS = ("tensorflow",)  # tf.distribute
MODES = ("mean", "adasum", "adasum-gather", "adasum-unbounded", "bf16", "bf16-ef", "f16")


def parse_args(argv):
    parser = runner.parser("adasum", __doc__, seeds=2, output="bench_results/adasum_tensorflow.json",
                           backends=BACKENDS)
    parser.add_argument("--replicas", type=int, default=8, help="logical CPUs under MirroredStrategy (default 8)")
    parser.add_argument("--per-replica-batch", type=int, default=64, help="batch per replica (default 64)")
    parser.add_argument("--learning-rate", type=float, default=0.05, help="peak of the cosine decay (default 0.05)")
    parser.add_argument("--max-epochs", type=int, default=20, help="epochs at most per run (default 20)")
    parser.add_argument("--target", type=float, default=0.93, help="target test accuracy (default 0.93)")
    parser.add_argument("--timing-steps", type=int, default=6, help="steps per timed epoch (default 6)")
    parser.add_argument("--repeats", type=int, default=5, help="timed epochs per mode (default 5)")
    parser.add_argument("--modes", default="mean,adasum",
                        help=f"comma-separated, from {','.join(MODES)}; mean is always run")
    args = runner.parse(parser, argv, positive=("replicas", "per_replica_batch", "max_epochs", "timing_steps",
                                                "repeats"))
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        parser.error(f"--modes: unknown {unknown}; valid: {list(MODES)}")
    args.modes = ["mean", *[m for m in dict.fromkeys(modes) if m != "mean"]]
    return args


def _configure_devices(replicas):
    """Logical CPUs; must run before TensorFlow initializes its devices."""
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * replicas)
    return tf.distribute.MirroredStrategy([f"/CPU:{i}" for i in range(replicas)])


class _TargetClock(keras.callbacks.Callback):
    """Test accuracy after every epoch; stops `fit` at the target."""

    def __init__(self, x_test, y_test, target):
        super().__init__()
        self.x_test, self.y_test, self.target = x_test, y_test, target
        self.curve, self.reached = [], None

    def on_epoch_end(self, epoch, logs=None):
        logits = self.model.predict(self.x_test, batch_size=500, verbose=0)
        self.curve.append(float(np.mean(np.argmax(logits, -1) == self.y_test)))
        if self.curve[-1] >= self.target - 1e-9:
            self.reached = epoch + 1
            self.model.stop_training = True


def measure(args):
    strategy = _configure_devices(args.replicas)
    import tensorflow as tf

    import keras_boost as boost
    from keras_boost.algorithms.adasum import bytes_sent_per_replica
    from keras_boost.algorithms.compressed_all_reduce import wire_bytes
    from keras_boost.bench.workloads import mnist_data
    from keras_boost.bench.workloads import residual_cnn

    (x, y), (x_test, y_test) = mnist_data()
    global_batch = args.replicas * args.per_replica_batch
    steps_per_epoch = len(x) // global_batch
    if steps_per_epoch < 1:
        raise SystemExit(f"The global batch {global_batch} is larger than the {len(x)} training images.")
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def dataset(seed):
        ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(len(x), seed=seed)
        return ds.batch(global_batch, drop_remainder=True).repeat()

    def build(mode, seed, total_steps):
        with strategy.scope():
            model = residual_cnn(seed=seed)
            schedule = keras.optimizers.schedules.CosineDecay(args.learning_rate, total_steps)
            optimizer = keras.optimizers.SGD(schedule, momentum=0.9)
            if mode.startswith("adasum"):
                optimizer = boost.AdaSum(optimizer, exchange="gather" if mode == "adasum-gather" else "auto",
                                         norm_bound=mode != "adasum-unbounded")
            elif mode != "mean":
                optimizer = boost.optimizers.CompressedAllReduce(
                    optimizer, dtype="float16" if mode == "f16" else "bfloat16",
                    error_feedback=mode.endswith("-ef"))
            model.compile(optimizer=optimizer, loss=loss, metrics=["accuracy"])
        return model

    modes = tuple(args.modes)
    result = {"settings": {"global_batch": global_batch, "steps_per_epoch": steps_per_epoch}}

    # (a) step time, interleaved.
    timer = EpochTimer()
    models = {m: build(m, 0, 1000) for m in modes}
    for model in models.values():  # warm-up: tracing and the first steps
        model.fit(dataset(0), steps_per_epoch=2, epochs=1, verbose=0)
    times = {m: [] for m in modes}
    for r in range(args.repeats):
        for mode in modes[r % len(modes):] + modes[: r % len(modes)]:
            models[mode].fit(dataset(r), steps_per_epoch=args.timing_steps, epochs=1, verbose=0, callbacks=[timer])
            times[mode].append(timer.seconds / args.timing_steps)
        print(f"timing repeat {r + 1}/{args.repeats}: "
              + ", ".join(f"{m} {times[m][-1] * 1000:.0f} ms/step" for m in modes), flush=True)
    result["step_time"] = {"seconds_per_step": times}
    for mode in modes[1:]:
        ratios = [a / m for a, m in zip(times[mode], times["mean"])]
        result["step_time"][f"ratio_{mode}_over_mean"] = {
            "median": statistics.median(ratios), "min": min(ratios), "max": max(ratios), "per_repeat": ratios}
    wire_dtype = {"bf16": "bfloat16", "bf16-ef": "bfloat16", "f16": "float16"}  # else float32
    result["wire_bytes_per_replica_step"] = {
        m: wire_bytes(models["mean"].trainable_variables, wire_dtype.get(m, "float32")) for m in modes}
    variables = models["mean"].trainable_variables
    values = sum(int(np.prod(v.shape)) for v in variables)
    patterns, sent = {}, {}
    for m in modes:
        optimizer = models[m].optimizer
        patterns[m] = getattr(optimizer, "traced_exchange", "ring_all_reduce")
        width = 2 if m in wire_dtype else 4
        sent[m] = bytes_sent_per_replica(values, args.replicas, patterns[m], len(variables), width)
    result["exchange_pattern"] = patterns
    result["bytes_sent_per_replica_step"] = sent

    # (b) epochs to the target accuracy.
    total_steps = args.max_epochs * steps_per_epoch
    runs = []
    seeds = runner.seeds(args)
    for seed in seeds:
        for mode in modes[seed % len(modes):] + modes[: seed % len(modes)]:
            model = build(mode, seed, total_steps)
            clock = _TargetClock(x_test, y_test, args.target)
            start = time.perf_counter()
            model.fit(dataset(seed), steps_per_epoch=steps_per_epoch, epochs=args.max_epochs,
                      verbose=0, callbacks=[clock])
            curve, reached = clock.curve, clock.reached
            runs.append({"mode": mode, "seed": seed, "epochs_to_target": reached, "accuracy_curve": curve,
                         "seconds": time.perf_counter() - start})
            print(f"seed {seed} {mode}: {'epoch ' + str(reached) if reached else 'not reached'} "
                  f"(accuracy {curve[-1]:.3f} after {len(curve)} epochs)", flush=True)
    result["runs"] = runs
    for mode in modes[1:]:
        ratios = []
        for seed in seeds:
            by_mode = {r["mode"]: r["epochs_to_target"] for r in runs if r["seed"] == seed}
            if by_mode[mode] and by_mode["mean"]:
                ratios.append(by_mode[mode] / by_mode["mean"])
        result[f"epochs_ratio_{mode}_over_mean"] = ratios
    return result


def markdown(result):
    """The result as a short Markdown report."""
    s = result["settings"]
    env = result["environment"]
    lines = [
        f"Gradient combines vs the mean all-reduce: {s['replicas']} replicas x {s['per_replica_batch']} "
        f"(global batch {s['global_batch']}), {env['cpu_model']} ({env['cpu_count']} cores), {env['date']}",
        "",
    ]
    for mode in s["modes"][1:]:
        ratio = result["step_time"][f"ratio_{mode}_over_mean"]
        lines.append(f"Step time {mode} / mean: median {ratio['median']:.3f} [{ratio['min']:.3f}, "
                     f"{ratio['max']:.3f}] over {len(ratio['per_repeat'])} interleaved repeats")
    wire = result["wire_bytes_per_replica_step"]
    lines += ["", "Bytes into the all-reduce per replica and step: "
              + ", ".join(f"{m} {b:,}" for m, b in wire.items())]
    if "bytes_sent_per_replica_step" in result:
        sent, ring = result["bytes_sent_per_replica_step"], result["bytes_sent_per_replica_step"]["mean"]
        lines += ["", "Bytes sent per replica and step (cost model of the pattern used): "
                  + ", ".join(f"{m} {b:,} ({result['exchange_pattern'][m]}, {b / ring:.2f}x the mean's)"
                              for m, b in sent.items())]
    lines += ["",
              "| seed | mode | epochs to target | final accuracy | wall s (eval included) |",
              "|---|---|---|---|---|"]
    for r in result["runs"]:
        reached = r["epochs_to_target"] or f"> {len(r['accuracy_curve'])}"
        lines.append(f"| {r['seed']} | {r['mode']} | {reached} | {r['accuracy_curve'][-1]:.3f} | {r['seconds']:.0f} |")
    for mode in s["modes"][1:]:
        if result[f"epochs_ratio_{mode}_over_mean"]:
            lines += ["", f"Epochs ratio {mode} / mean per seed: "
                      + ", ".join(f"{x:.2f}" for x in result[f"epochs_ratio_{mode}_over_mean"])]
    return "\n".join(lines) + "\n"


def main(argv=None):
    return runner.main("adasum", measure, parse_args, argv, backends=BACKENDS, report=markdown)


if __name__ == "__main__":
    main()
