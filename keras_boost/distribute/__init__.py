"""Model parallelism without hand-written layout regexes (`keras.distribution`).

- `auto_layout(model, mesh)`: a `keras.distribution.LayoutMap` that shards
  the large Dense / EinsumDense / attention / Embedding / Conv kernels of a
  model over the mesh's "model" axis (Megatron column/row pairs, vocabulary
  sharding, output channels).
- `plan(model, devices)`: the data x model mesh shape for a device count and
  a per-device memory budget, printable.

Training with `keras.distribution.ModelParallel` runs on the JAX backend
(Keras 3.15 shards variables only there); `auto_layout` and `plan` are pure
and run on every backend.

Example:

```python
p = boost.distribute.plan(model, devices=8)
print(p)
layout_map = boost.distribute.auto_layout(model, p.device_mesh())
keras.distribution.set_distribution(keras.distribution.ModelParallel(layout_map=layout_map))
```
"""

from keras_boost.distribute.layout import AutoLayoutMap
from keras_boost.distribute.layout import ShardDecision
from keras_boost.distribute.layout import auto_layout
from keras_boost.distribute.layout import check_layout
from keras_boost.distribute.layout import device_mesh
from keras_boost.distribute.plan import ParallelPlan
from keras_boost.distribute.plan import plan

__all__ = ["AutoLayoutMap", "ParallelPlan", "ShardDecision", "auto_layout", "check_layout", "device_mesh", "plan"]
