"""Benchmark: accuracy of pruned and int8 models vs the dense float model.

One run of each on the quickstart-size residual CNN and the embedded MNIST
sample (`keras_boost.bench.workloads`), same seed and epochs:

- dense float; PTQ int8 (`model.quantize("int8")` on the dense model);
- pruned to 50% and 80% (`boost.pruning.prune_low_magnitude`, the cubic
  schedule ending at 0.7 of the run, `UpdatePruningMasks`);
- QAT int8 (`boost.quantization.quantize_aware`, fake quantization from
  0.7 of the run, then `model.quantize("int8")`).

Note: Keras 3.15's `quantize("int8")` converts Dense/EinsumDense/Embedding
only; in this CNN that is the `logits` head, the convolutions stay float.

```
python -m benchmarks.compression --epochs 3
```
writes `benchmarks/results/compression_<backend>.json`.
"""

import argparse
import json
import os
import sys
import time
import warnings


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.compression", description=__doc__.split("\n")[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--learning-rate", type=float, default=2e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", default=None, help="default benchmarks/results/compression_<backend>.json")
    args = parser.parse_args(argv)
    for name in ("epochs", "batch_size"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if not args.learning_rate > 0:
        parser.error(f"--learning-rate must be > 0, got {args.learning_rate}")
    return args


def run(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    import keras
    import numpy as np

    import keras_boost as boost
    from keras_boost.bench.machine import cpu_model
    from keras_boost.bench.workloads import mnist_data
    from keras_boost.bench.workloads import residual_cnn

    backend = keras.backend.backend()
    output = args.output or f"benchmarks/results/compression_{backend}.json"
    (x, y), (x_test, y_test) = mnist_data()
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def accuracy(model):
        logits = model.predict(x_test, batch_size=256, verbose=0)
        return float(np.mean(np.argmax(logits, -1) == y_test))

    def train(model, callbacks=()):
        model.compile(optimizer=keras.optimizers.Adam(args.learning_rate), loss=loss)
        start = time.perf_counter()
        model.fit(x, y, epochs=args.epochs, batch_size=args.batch_size, verbose=0, callbacks=list(callbacks))
        return time.perf_counter() - start

    results = {}

    def record(name, acc, seconds, **extra):
        results[name] = {"accuracy": acc, "train_seconds": seconds, **extra}
        print(f"{name}: accuracy {acc:.4f} ({seconds:.0f} s)", flush=True)

    dense = residual_cnn(seed=args.seed)
    seconds = train(dense)
    record("dense_float", accuracy(dense), seconds)
    ptq = keras.models.clone_model(dense)
    ptq.set_weights(dense.get_weights())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ptq.quantize("int8")
    record("ptq_int8", accuracy(ptq), 0.0)

    for target in (0.5, 0.8):
        schedule = boost.pruning.PolynomialDecay(end_step="0.7dur", frequency=20)
        pruned = boost.pruning.prune_low_magnitude(residual_cnn(seed=args.seed), target, schedule)
        seconds = train(pruned, [boost.pruning.UpdatePruningMasks()])
        report = boost.pruning.sparsity_report(pruned)
        record(f"pruned_{int(target * 100)}", accuracy(boost.pruning.strip(pruned)), seconds,
               sparsity_per_layer=report)

    qat = boost.quantization.quantize_aware(residual_cnn(seed=args.seed))
    seconds = train(qat, [boost.quantization.QuantizationAwareTraining(start="0.7dur")])
    qat_float = accuracy(qat)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        qat.quantize("int8")
    record("qat_int8", accuracy(qat), seconds, accuracy_before_quantize=qat_float)

    result = {
        "benchmark": "compression",
        "environment": {
            "backend": backend, "cpu_model": cpu_model(), "cpu_count": os.cpu_count(),
            "date": time.strftime("%Y-%m-%d"), "keras": keras.__version__, "keras_boost": boost.__version__,
        },
        "settings": {**vars(args), "output": output, "train_images": int(len(x)), "test_images": int(len(x_test)),
                     "pruning_schedule": "polynomial (cubic), begin 0, end 0.7dur, frequency 20 steps",
                     "qat_start": "0.7dur"},
        "results": results,
    }
    os.makedirs(os.path.dirname(output) or ".", exist_ok=True)
    with open(output, "w") as f:
        json.dump(result, f, indent=2)
    print(f"Wrote {output}")
    return result


if __name__ == "__main__":
    run()
