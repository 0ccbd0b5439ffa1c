"""Gradient accumulation: memory, throughput and all-reduces, in one run.

Three measurements, each in its own fresh subprocess (peak RSS only grows,
and the logical devices of MirroredStrategy must be set before any TF op):

1. `big`: `residual_cnn` (the shared workload, MNIST sample) trained with
   SGD(momentum) on batches of 256.
2. `accum`: the same model and samples, batches of 32 through
   `boost.GradientAccumulation(SGD(momentum), 8)`: the same effective batch
   and the same number of updates.
   For both: the process's resident memory before training (model, data,
   framework) and its peak during training (`ru_maxrss`), their difference
   (what training adds: activations, gradients, optimizer state), and the
   throughput in samples/s (median over timed epochs, after one warm-up
   epoch that absorbs tracing/compilation).
3. `mirrored` (TensorFlow): `tf.distribute.MirroredStrategy` over 4 logical
   CPUs, global micro-batch 32, k = 8, against stock Keras with global batch
   32. All-reduces are counted at run time on every replica, at the
   optimizer's gradient all-reduce hook and at every
   `ReplicaContext.all_reduce`; reported per update and per micro-step,
   with the bytes of gradient communicated per update and per sample.

The backend of 1-2 is `KERAS_BACKEND` (default tensorflow); 3 always runs
on TensorFlow.

Example:

```shell
python -m benchmarks.accumulation                 # ~3-4 minutes on 2 CPU cores
python -m benchmarks.accumulation --quick --output acc.json
```
"""

import json
import os
import statistics
import time

from benchmarks import runner

K = 8
MICRO = 32
BIG = K * MICRO
N_REPLICAS = 4
_DEFAULTS = {"updates": 12, "epochs": 3}
_QUICK = {"updates": 4, "epochs": 2}



def _epoch_timer():
    """A callback recording the wall time of every epoch in `.times`.

    Built on call: keras is imported only inside the child processes, after
    they set up their devices.
    """
    import keras

    class EpochTimes(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.times = []

        def on_epoch_begin(self, epoch, logs=None):
            self._start = time.perf_counter()

        def on_epoch_end(self, epoch, logs=None):
            self.times.append(time.perf_counter() - self._start)

    return EpochTimes()


def _rss_mb():
    """Current resident set size (MB), from /proc (Linux)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def _peak_rss_mb():
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    return peak / 1024


# --- children ------------------------------------------------------------------


def _single(mode, updates, epochs):
    import keras
    import numpy as np

    import keras_boost as boost
    from keras_boost.bench.workloads import mnist_data
    from keras_boost.bench.workloads import residual_cnn

    (x, y), _ = mnist_data()
    n = updates * BIG
    reps = -(-n // len(x))
    x = np.concatenate([x] * reps)[:n]
    y = np.concatenate([y] * reps)[:n]
    model = residual_cnn(seed=0)
    opt = keras.optimizers.SGD(0.05, momentum=0.9)
    batch = BIG
    if mode == "accum":
        opt = boost.GradientAccumulation(opt, K)
        batch = MICRO
    model.compile(
        optimizer=opt, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    )
    rss_before = _rss_mb()
    peak_before = _peak_rss_mb()
    timer = _epoch_timer()

    model.fit(x, y, batch_size=batch, epochs=epochs, shuffle=False, verbose=0,
              callbacks=[timer])
    timed = timer.times[1:] or timer.times
    return {
        "mode": mode,
        "backend": keras.backend.backend(),
        "batch_size": batch,
        "max_accumulation_step": K if mode == "accum" else 1,
        "samples_per_epoch": n,
        "updates_per_epoch": updates,
        "iterations": int(keras.ops.convert_to_numpy(model.optimizer.iterations)),
        "epoch_seconds": timer.times,
        "samples_per_s": n / statistics.median(timed),
        "rss_before_training_mb": rss_before,
        "peak_rss_before_training_mb": peak_before,
        "peak_rss_mb": _peak_rss_mb(),
        "training_adds_mb": _peak_rss_mb() - rss_before,
        "params": int(model.count_params()),
    }


def _mirrored(updates, epochs):
    os.environ["KERAS_BACKEND"] = "tensorflow"
    import tensorflow as tf

    cpus = tf.config.list_physical_devices("CPU")
    tf.config.set_logical_device_configuration(
        cpus[0], [tf.config.LogicalDeviceConfiguration()] * N_REPLICAS
    )
    import keras
    import numpy as np

    import keras_boost as boost
    from keras_boost.bench.workloads import mnist_data
    from keras_boost.bench.workloads import residual_cnn

    counters = {}
    original_all_reduce = tf.distribute.ReplicaContext.all_reduce

    def bump(name):
        if name in counters:
            counters[name].assign_add(1)

    def counted_all_reduce(self, reduce_op, value, options=None):
        bump("replica_ctx_all_reduce")
        return original_all_reduce(self, reduce_op, value, options)

    tf.distribute.ReplicaContext.all_reduce = counted_all_reduce

    (x, y), _ = mnist_data()
    n = updates * BIG
    reps = -(-n // len(x))
    x = np.concatenate([x] * reps)[:n]
    y = np.concatenate([y] * reps)[:n]
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(MICRO)
    strategy = tf.distribute.MirroredStrategy([f"/CPU:{i}" for i in range(N_REPLICAS)])
    results = {}
    for mode in ("stock", "accum"):
        with strategy.scope():
            model = residual_cnn(seed=0)
            inner = keras.optimizers.SGD(0.05, momentum=0.9)
            opt = boost.GradientAccumulation(inner, K) if mode == "accum" else inner
            model.compile(
                optimizer=opt,
                loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            )
            opt.build(model.trainable_variables)
            counters.clear()
            for name in ("gradient_all_reduce", "replica_ctx_all_reduce"):
                counters[name] = keras.Variable(
                    0, dtype="int32", trainable=False, aggregation="none", name=name
                )
            hook = inner._all_reduce_sum_gradients

            def counted(grads_and_vars, hook=hook):
                bump("gradient_all_reduce")
                return hook(grads_and_vars)

            inner._all_reduce_sum_gradients = counted
        timer = _epoch_timer()

        model.fit(ds, epochs=epochs, verbose=0, callbacks=[timer])
        micro_steps = epochs * (n // MICRO)
        update_count = int(inner.iterations.numpy())
        counts = {
            name: [int(t.numpy()) for t in strategy.experimental_local_results(v.value)]
            for name, v in counters.items()
        }
        grad_bytes = sum(int(np.prod(v.shape)) * 4 for v in model.trainable_variables)
        timed = timer.times[1:] or timer.times
        results[mode] = {
            "global_micro_batch": MICRO,
            "max_accumulation_step": K if mode == "accum" else 1,
            "micro_steps": micro_steps,
            "updates": update_count,
            "all_reduce_counts_per_replica": counts,
            "gradient_all_reduces_per_update": counts["gradient_all_reduce"][0] / update_count,
            "gradient_all_reduces_per_micro_step": counts["gradient_all_reduce"][0] / micro_steps,
            "all_reduced_bytes_per_replica": counts["gradient_all_reduce"][0] * grad_bytes,
            "all_reduced_bytes_per_sample": counts["gradient_all_reduce"][0]
            * grad_bytes / (micro_steps * MICRO),
            "epoch_seconds": timer.times,
            "samples_per_s": n / statistics.median(timed),
        }
    return {"n_replicas": N_REPLICAS, "gradient_bytes": grad_bytes, **results}


# --- driver ---------------------------------------------------------------------


def parse_args(argv=None):
    parser = runner.parser("accumulation", "k=8 micro-batches of 32 vs one batch of 256: memory, "
                           "throughput, and all-reduces per update under MirroredStrategy.")
    parser.add_argument("--updates", type=int, help="updates per epoch (default 12; quick 4)")
    parser.add_argument("--epochs", type=int, help="epochs, the first is warm-up (default 3; quick 2)")
    parser.add_argument("--quick", action="store_true", help="a ~1-2 minute smoke run")
    parser.add_argument("--skip-mirrored", action="store_true", help="skip part 3")
    return runner.parse(parser, argv, positive=("updates", "epochs"), defaults=_DEFAULTS, quick=_QUICK)


def child(args):
    """One part, in its own process: `big`, `accum` or `mirrored`."""
    if args.part == "mirrored":
        return _mirrored(args.updates, args.epochs)
    return _single(args.part, args.updates, args.epochs)


def measure(args):
    results = {"k": K, "micro_batch": MICRO, "big_batch": BIG}
    for mode in ("big", "accum"):
        print(f"running {mode} ...", flush=True)
        results[mode] = runner.spawn("accumulation", args, part=mode)
    big, acc = results["big"], results["accum"]
    results["summary"] = {
        "training_memory_ratio_accum_over_big": acc["training_adds_mb"] / big["training_adds_mb"],
        "peak_rss_ratio_accum_over_big": acc["peak_rss_mb"] / big["peak_rss_mb"],
        "throughput_ratio_accum_over_big": acc["samples_per_s"] / big["samples_per_s"],
    }
    if not args.skip_mirrored:
        print("running mirrored ...", flush=True)
        results["mirrored"] = runner.spawn(
            "accumulation", args, {"KERAS_BACKEND": "tensorflow", "CUDA_VISIBLE_DEVICES": ""}, part="mirrored")
        m = results["mirrored"]
        results["summary"].update(
            mirrored_gradient_all_reduces_per_update_accum=m["accum"]["gradient_all_reduces_per_update"],
            mirrored_gradient_all_reduces_per_micro_step_accum=m["accum"]["gradient_all_reduces_per_micro_step"],
            mirrored_gradient_all_reduces_per_micro_step_stock=m["stock"]["gradient_all_reduces_per_micro_step"],
            mirrored_throughput_ratio_accum_over_stock=m["accum"]["samples_per_s"]
            / m["stock"]["samples_per_s"],
        )
    print(json.dumps(results["summary"], indent=1))
    return results


def main(argv=None):
    return runner.main("accumulation", measure, parse_args, argv, child=child)


if __name__ == "__main__":
    main()
