"""Gradient centralization (LessBN's `gc_flag`) around any Keras optimizer.

`GradientCentralization(optimizer)` subtracts from each kernel gradient of
rank >= 2 its mean over every axis except the last, when the input-channel
axis is a multiple of 16 (`centralize`, `gc_applies`: the pure math);
biases, norm parameters, depthwise kernels, squeeze-excite gate kernels and
the `NormalizedDense` head are left alone (`should_centralize`,
`exclude_unsuited_kernels`).

Example:

```python
from keras_boost.algorithms.centralization import GradientCentralization

model.compile(optimizer=GradientCentralization(keras.optimizers.SGD(0.1)), loss="mse")
```

The method card: `docs/methods/centralization.md`.
"""

from keras_boost.algorithms.centralization.centralize import GC_CHANNEL_MULTIPLE
from keras_boost.algorithms.centralization.centralize import centralize
from keras_boost.algorithms.centralization.centralize import gc_applies
from keras_boost.algorithms.centralization.optimizer import GradientCentralization
from keras_boost.algorithms.centralization.optimizer import exclude_gate_kernels
from keras_boost.algorithms.centralization.optimizer import exclude_grouped_kernels
from keras_boost.algorithms.centralization.optimizer import exclude_unsuited_kernels
from keras_boost.algorithms.centralization.optimizer import has_batch_norm
from keras_boost.algorithms.centralization.optimizer import should_centralize

__all__ = [
    "GC_CHANNEL_MULTIPLE",
    "GradientCentralization",
    "centralize",
    "exclude_gate_kernels",
    "exclude_grouped_kernels",
    "exclude_unsuited_kernels",
    "gc_applies",
    "has_batch_norm",
    "should_centralize",
]
