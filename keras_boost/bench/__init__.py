"""The product's benchmark: `keras-boost bench`, and the workloads it shares.

- `keras_boost.bench.workloads`: the models and data the examples, tests and
  benchmarks share (`residual_cnn`, `mnist_data`).
- `keras-boost bench` (or `python -m keras_boost.bench`): time to accuracy
  of every algorithm and level against a tuned and a rescaled-shorter
  baseline, runs interleaved over seeds; reports medians with min-max
  spreads, the time to the baseline's accuracy minus half a point, and a
  Pareto plot. One module per concept:
  - `catalog`: the named workloads (`quick`, `quickstart`, `resnet`,
    `realistic`: ResNet-20, 2,000 steps with augmentation, `tiny` for
    tests, and the `zoo`'s: `applications`, `transformer`, `finetune`,
    `lm`, a language model measured by its validation loss); `recipe`:
    `Workload`, `FineTune`;
  - `variants`: what each variant name trains;
  - `training`: one timed run (`run_once`), with `schedule` (its length and
    learning rate), `pipeline` (its input) and `clock` (what it measures);
  - `harness`: the interleaved run of every (variant, precision, seed);
  - `results`: the result's JSON layout; `report`: its tables, verdict and plot;
  - `cli`: the command (parsed by the console script `keras_boost_cli`).

The per-algorithm measurement scripts (step time per freeze depth, the
overhead of `BoostModel`, AdaSum on N replicas, ...) live outside the package,
in the repository's `benchmarks/` folder (`python -m benchmarks.<name>`).

The names below are imported on first use: the command line parses its
arguments without importing Keras.

Example:

```python
from keras_boost import bench
model = bench.residual_cnn(seed=0)
(x, y), (x_test, y_test) = bench.mnist_data()
```
"""

import importlib

# name -> the module that defines it.
_EXPORTS = {
    "copy_weights": "keras_boost.bench.workloads",
    "mnist_data": "keras_boost.bench.workloads",
    "residual_cnn": "keras_boost.bench.workloads",
    "FineTune": "keras_boost.bench.recipe",
    "Workload": "keras_boost.bench.recipe",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'keras_boost.bench' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value  # the next lookup skips __getattr__
    return value


def __dir__():
    return sorted([*globals(), *_EXPORTS])
