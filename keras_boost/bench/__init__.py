"""Benchmark workloads and measurements for keras_boost.

- `keras_boost.bench.workloads`: the models and data the examples, tests and
  benchmarks share (`residual_cnn`, `mnist_data`).
- `keras_boost.bench.harness` / `report` / `cli`: `keras-boost bench` (or
  `python -m keras_boost.bench`), time to accuracy of every algorithm and
  level against a tuned and a rescaled-shorter baseline, runs interleaved
  over seeds; reports medians with min-max spreads, the time to the
  baseline's accuracy minus half a point, and a Pareto plot. Workloads:
  `quickstart`, `resnet`, `realistic` (ResNet-20, 2,000 steps with
  augmentation; `harness.realistic_workload`) and `tiny` (for tests).
- `keras_boost.bench.overhead`: `python -m keras_boost.bench.overhead`
  measures the per-step cost of `BoostModel` against plain `keras.Model.fit`.
- `keras_boost.bench.freeze`: step time per freeze depth.

Example:

```python
from keras_boost import bench
model = bench.residual_cnn(seed=0)
(x, y), (x_test, y_test) = bench.mnist_data()
```
"""

from keras_boost.bench.workloads import copy_weights
from keras_boost.bench.workloads import mnist_data
from keras_boost.bench.workloads import residual_cnn
from keras_boost.bench.harness import Workload
