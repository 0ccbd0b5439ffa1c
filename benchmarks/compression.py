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

import time
import warnings

from benchmarks import runner


def parse_args(argv):
    parser = runner.parser("compression", __doc__, seed=0, output="benchmarks/results/compression_{backend}.json")
    parser.add_argument("--epochs", type=int, default=3, help="training epochs of every model (default 3)")
    parser.add_argument("--batch-size", type=int, default=64, help="batch size (default 64)")
    parser.add_argument("--learning-rate", type=float, default=2e-3, help="Adam's learning rate (default 0.002)")
    args = runner.parse(parser, argv, positive=("epochs", "batch_size"))
    if not args.learning_rate > 0:
        parser.error(f"--learning-rate must be > 0, got {args.learning_rate}")
    return args


def measure(args):
    import keras
    import numpy as np

    import keras_boost as boost
    from keras_boost.bench.workloads import mnist_data
    from keras_boost.bench.workloads import residual_cnn

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

    return {
        "settings": {"train_images": int(len(x)), "test_images": int(len(x_test)),
                     "pruning_schedule": "polynomial (cubic), begin 0, end 0.7dur, frequency 20 steps",
                     "qat_start": "0.7dur"},
        "results": results,
    }


def main(argv=None):
    return runner.main("compression", measure, parse_args, argv)


if __name__ == "__main__":
    main()
