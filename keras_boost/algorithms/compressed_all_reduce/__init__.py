"""CompressedAllReduce: the replicas' gradients all-reduced in 16-bit floats.

The gradients cross the wire in bfloat16 or float16 (half the bytes) and are
summed in float32; a non-finite sum skips the step on every replica.

Example:

```python
with tf.distribute.MirroredStrategy().scope():
    optimizer = boost.optimizers.CompressedAllReduce(keras.optimizers.SGD(0.1), dtype="bfloat16")
    model.compile(optimizer=optimizer, loss="mse")
```

The method card: `docs/methods/compressed_all_reduce.md`.
"""

from keras_boost.algorithms.compressed_all_reduce.optimizer import WIRE_DTYPES
from keras_boost.algorithms.compressed_all_reduce.optimizer import CompressedAllReduce
from keras_boost.algorithms.compressed_all_reduce.optimizer import wire_bytes

__all__ = ["CompressedAllReduce", "WIRE_DTYPES", "wire_bytes"]
