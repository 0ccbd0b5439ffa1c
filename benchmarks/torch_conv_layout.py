"""Keras' PyTorch convolution and its layout copies: the train step with a copy-free conv.

Keras 3.15's torch `conv` turns a channels-last (NHWC) input into NCHW with
`permute(...).contiguous()` (a copy) and then back into PyTorch's
channels-last memory format with `.contiguous(memory_format=channels_last)`
(a second copy), so every convolution copies its input twice forward and
its gradient twice backward. An NHWC tensor seen through `permute(0, 3, 1,
2)` already *is* a channels-last NCHW tensor: the lean conv here passes that
view to `torch.nn.functional.conv2d` with no copy (the kernel is still
permuted and made channels-last, as Keras does; "same" padding as Keras).

The script checks that the lean conv gives Keras' outputs, then times one
`fit` epoch of `--steps` batches (after a warm-up fit) with Keras' conv and
with the lean one, interleaved, the order alternating between repeats, on
the zoo's MobileNetV2 (alpha 0.35, 32x32 colored digits, batch 32).
Reported: the median milliseconds per step of each and the per-repeat
ratio lean / Keras (median, min, max). An experiment: the lean conv is
swapped in by replacing Keras' private `keras.src.backend.torch.nn.conv`
for the run's duration, which keras_boost itself does not do.

Example:

```shell
python -m benchmarks.torch_conv_layout --output benchmarks/results/torch_conv_layout.json
```
"""

import statistics
import time

import keras
import numpy as np

from benchmarks import runner

STEPS_DEFAULT = 24


def parse_args(argv=None):
    parser = runner.parser("torch_conv_layout", __doc__, backends=("torch",))
    parser.add_argument("--steps", type=int, default=STEPS_DEFAULT, help="timed steps per fit (default 24)")
    parser.add_argument("--repeats", type=int, default=4, help="timed fits per conv (default 4)")
    return runner.parse(parser, argv, positive=("steps", "repeats"))


def lean_conv_for(torch_nn):
    """A drop-in for Keras' torch `conv` that skips the input's layout copies (2-D, channels-last)."""
    import torch
    import torch.nn.functional as F
    from keras.src.utils.argument_validation import standardize_tuple

    keras_conv = torch_nn.conv

    def conv(inputs, kernel, strides=1, padding="valid", data_format=None, dilation_rate=1):
        data_format = torch_nn.backend.standardize_data_format(data_format)
        inputs, kernel = torch_nn.convert_to_tensor(inputs), torch_nn.convert_to_tensor(kernel)
        if data_format != "channels_last" or inputs.ndim != 4:
            return keras_conv(inputs, kernel, strides, padding, data_format, dilation_rate)
        strides = standardize_tuple(strides, 2, "strides")
        x = inputs.permute(0, 3, 1, 2)  # a view: NHWC memory is channels-last NCHW
        k = kernel.permute(3, 2, 0, 1).contiguous(memory_format=torch.channels_last)
        pad = 0
        if padding == "same":
            x, pad = torch_nn._apply_same_padding(x, k.shape[2:], strides, data_format, "conv", dilation_rate)
        y = F.conv2d(x, k, stride=strides, padding=pad, dilation=dilation_rate, groups=x.shape[1] // k.shape[1])
        return y.permute(0, 2, 3, 1)

    return keras_conv, conv


def measure(args):
    import keras.src.backend.torch.nn as torch_nn

    from keras_boost.bench.zoo.applications import application_model
    from keras_boost.bench.zoo.applications import colored_digits

    keras_conv, lean_conv = lean_conv_for(torch_nn)
    convs = {"keras": keras_conv, "lean": lean_conv}
    (x, y), _ = colored_digits()
    n = 32 * args.steps
    x, y = np.ascontiguousarray(x[:n]), np.asarray(y[:n])

    def with_conv(name, fn):
        torch_nn.conv = convs[name]
        try:
            return fn()
        finally:
            torch_nn.conv = keras_conv

    def outputs(name):
        model = application_model("MobileNetV2", seed=0)
        return with_conv(name, lambda: keras.ops.convert_to_numpy(model(x[:32], training=False)))

    max_difference = float(np.max(np.abs(outputs("keras") - outputs("lean"))))
    print(f"largest output difference, lean vs Keras' conv: {max_difference:.3g}", flush=True)

    def seconds_per_step(name):
        model = application_model("MobileNetV2", seed=0)
        model.compile(optimizer=keras.optimizers.SGD(0.01, momentum=0.9),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))

        def run():
            model.fit(x[:64], y[:64], batch_size=32, epochs=1, verbose=0)  # warm-up
            start = time.perf_counter()
            model.fit(x, y, batch_size=32, epochs=1, verbose=0, shuffle=False)
            return (time.perf_counter() - start) / args.steps

        return with_conv(name, run)

    times = {"keras": [], "lean": []}
    for repeat in range(args.repeats):
        for name in ("keras", "lean") if repeat % 2 == 0 else ("lean", "keras"):
            times[name].append(seconds_per_step(name))
        print(f"repeat {repeat}: Keras {times['keras'][-1] * 1e3:.1f} ms, lean {times['lean'][-1] * 1e3:.1f} ms",
              flush=True)
    ratios = [lean / plain for lean, plain in zip(times["lean"], times["keras"])]
    return {
        "settings": {"model": "MobileNetV2 alpha 0.35, 32x32, batch 32", "steps": args.steps,
                     "repeats": args.repeats},
        "max_output_difference": max_difference,
        "ms_per_step": {name: statistics.median(t) * 1e3 for name, t in times.items()},
        "ratio_lean_to_keras": {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios)},
    }


def main(argv=None):
    return runner.main("torch_conv_layout", measure, parse_args, argv, backends=("torch",))


if __name__ == "__main__":
    main()
