"""ModelParallel (`boost.distribute.auto_layout`) vs DataParallel on 8 host devices (JAX).

Runs itself in a fresh process with `XLA_FLAGS=--xla_force_host_platform_device_count=N`
(the host device count is fixed when JAX starts) and trains a small transformer
(embedding, `--blocks` x [MultiHeadAttention + Dense FFN], pooled head) on random
tokens with SGD, on these meshes:

- `data`: `keras.distribution.DataParallel` over N devices (all weights replicated);
- `model_RxM`: `keras.distribution.ModelParallel` with the `auto_layout` of the
  model on an R x M ("batch", "model") mesh (e.g. 2x4 and 1x8).

Measured per mesh: step time (median of `--repeats` timed runs of `--steps`
`train_on_batch` calls after a warm-up), per-device parameter bytes (the bytes of
device 0's shards of the model's variables, read from the JAX arrays) and, for
comparison, `boost.distribute.plan`'s estimate. Host CPU "devices" share the
machine's cores: the step times say what the partitioning costs here, not how a
multi-chip run would scale.

Example:

```shell
python -m benchmarks.parallel --devices 8 --output benchmarks/results/parallel_jax.json
```
"""

import os
import statistics
import time

from benchmarks import runner

BACKENDS = ("jax",)  # host devices through XLA_FLAGS


def parse_args(argv):
    parser = runner.parser("parallel", __doc__, output="bench_results/parallel_jax.json", backends=BACKENDS)
    parser.add_argument("--devices", type=int, default=8, help="host devices (default 8)")
    parser.add_argument("--meshes", nargs="+", default=["data", "model_2x4", "model_1x8"],
                        help="data and/or model_RxM (R x M = --devices; default data model_2x4 model_1x8)")
    parser.add_argument("--min-size", type=int, default=None, help="auto_layout min_size (default: its own)")
    parser.add_argument("--vocab", type=int, default=1024, help="the transformer's vocabulary (default 1024)")
    parser.add_argument("--seq", type=int, default=16, help="sequence length (default 16)")
    parser.add_argument("--dim", type=int, default=256, help="model width (default 256)")
    parser.add_argument("--heads", type=int, default=8, help="attention heads (default 8)")
    parser.add_argument("--ffn", type=int, default=1024, help="feed-forward width (default 1024)")
    parser.add_argument("--blocks", type=int, default=2, help="transformer blocks (default 2)")
    parser.add_argument("--batch", type=int, default=16, help="global batch (default 16)")
    parser.add_argument("--steps", type=int, default=5, help="timed steps per repeat (default 5)")
    parser.add_argument("--repeats", type=int, default=3, help="timed repeats per mesh (default 3)")
    args = runner.parse(parser, argv, positive=("devices", "vocab", "seq", "dim", "heads", "ffn", "blocks", "batch",
                                                "steps", "repeats"))
    for mesh in args.meshes:
        _mesh_shape(mesh, args.devices)  # validates
    return args


def _mesh_shape(name, devices):
    if name == "data":
        return (devices,)
    try:
        rows, cols = (int(s) for s in name.removeprefix("model_").split("x"))
    except ValueError:
        raise SystemExit(f"Unknown mesh {name!r}: use 'data' or 'model_RxM' (e.g. model_2x4).") from None
    if rows * cols != devices:
        raise SystemExit(f"The mesh {name!r} has {rows * cols} devices but --devices is {devices}.")
    return (rows, cols)


def transformer(args):
    import keras

    tokens = keras.Input((args.seq,), dtype="int32", name="tokens")
    x = keras.layers.Embedding(args.vocab, args.dim, name="embed")(tokens)
    for i in range(args.blocks):
        a = keras.layers.MultiHeadAttention(args.heads, args.dim // args.heads, name=f"mha{i}")(x, x)
        x = keras.layers.LayerNormalization(name=f"ln{i}a")(x + a)
        h = keras.layers.Dense(args.ffn, activation="relu", name=f"ffn{i}_in")(x)
        h = keras.layers.Dense(args.dim, name=f"ffn{i}_out")(h)
        x = keras.layers.LayerNormalization(name=f"ln{i}b")(x + h)
    x = keras.layers.GlobalAveragePooling1D(name="pool")(x)
    return keras.Model(tokens, keras.layers.Dense(16, name="head")(x), name="bench_transformer")


def worker(args):
    """The measurement, in a process whose JAX sees `args.devices` host devices."""
    import keras
    import numpy as np

    import keras_boost as boost

    devices = keras.distribution.list_devices()
    if len(devices) != args.devices:
        raise SystemExit(f"JAX sees {len(devices)} devices, expected {args.devices} (XLA_FLAGS not applied?).")
    rng = np.random.default_rng(0)
    x = rng.integers(0, args.vocab, size=(args.batch, args.seq)).astype("int32")
    y = rng.normal(size=(args.batch, 16)).astype("float32")

    keras.utils.set_random_seed(0)
    template = transformer(args)
    init = template.get_weights()
    params = int(sum(np.prod(v.shape) for v in template.variables))
    result = {
        "environment": {"host_devices": len(devices), "xla_flags": os.environ.get("XLA_FLAGS", "")},
        "parameters": params,
        "parameter_bytes": int(sum(np.prod(v.shape) * 4 for v in template.variables)),
        "meshes": {},
    }
    for name in args.meshes:
        shape = _mesh_shape(name, args.devices)
        if name == "data":
            distribution = keras.distribution.DataParallel(devices=devices)
            sharded, estimate = 0, result["parameter_bytes"]
        else:
            mesh = boost.distribute.device_mesh(shape, ("batch", "model"), devices)
            sizes = {} if args.min_size is None else {"min_size": args.min_size}
            layout_map = boost.distribute.auto_layout(template, mesh, **sizes)
            distribution = keras.distribution.ModelParallel(layout_map=layout_map)
            sharded = len(layout_map.sharded)
            estimate = boost.distribute.plan(template, devices, model_size=shape[1], **sizes).per_device_bytes
        keras.distribution.set_distribution(distribution)
        model = transformer(args)
        model.set_weights(init)
        model.compile(optimizer=keras.optimizers.SGD(0.003), loss="mse")
        for _ in range(2):  # warm-up: compile
            model.train_on_batch(x, y)
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            for _ in range(args.steps):
                loss = model.train_on_batch(x, y)
            times.append((time.perf_counter() - start) / args.steps)
        measured = int(sum(v.value.addressable_shards[0].data.nbytes for v in model.variables))
        keras.distribution.set_distribution(None)
        result["meshes"][name] = {
            "mesh_shape": list(shape), "sharded_variables": sharded,
            "seconds_per_step_median": statistics.median(times), "seconds_per_step": times,
            "per_device_parameter_bytes": measured, "plan_estimate_bytes": int(estimate), "final_loss": float(loss),
        }
        print(f"{name:10s} mesh {shape}: {statistics.median(times) * 1000:7.1f} ms/step, "
              f"{measured / 1024:8.1f} KiB parameters/device ({sharded} variables sharded)", flush=True)
    base = result["meshes"].get("data")
    if base:
        for name, m in result["meshes"].items():
            m["step_time_over_data"] = m["seconds_per_step_median"] / base["seconds_per_step_median"]
            m["memory_over_data"] = m["per_device_parameter_bytes"] / base["per_device_parameter_bytes"]
    return result


def measure(args):
    env = {"KERAS_BACKEND": "jax", "XLA_FLAGS": f"--xla_force_host_platform_device_count={args.devices}"}
    return runner.spawn("parallel", args, env)


def main(argv=None):
    return runner.main("parallel", measure, parse_args, argv, backends=BACKENDS, child=worker)


if __name__ == "__main__":
    main()
