"""AdaSum: the adaptive sum of the replicas' updates (level O2).

Instead of averaging the replicas' gradients (or updates), AdaSum combines
each pair so that orthogonal parts add and parallel parts average, in a
halving/doubling exchange (Horovod's algorithm). `ReplicaCombiner` is the
base it shares with `CompressedAllReduce`: it switches the wrapped
optimizer's own all-reduce off and combines the replicas itself.

Example:

```python
with tf.distribute.MirroredStrategy().scope():
    model = boost.BoostModel(inputs, outputs, boost_level="O2")
    model.compile(optimizer=keras.optimizers.SGD(0.02, momentum=0.9), loss="mse")
print(model.check_adasum_enable())
```

The method card: `docs/methods/adasum.md`.
"""

from keras_boost.algorithms.adasum.combiner import ReplicaCombiner
from keras_boost.algorithms.adasum.optimizer import AdaSum
from keras_boost.algorithms.adasum.optimizer import adasum_status
from keras_boost.algorithms.adasum.optimizer import bytes_sent_per_replica
from keras_boost.algorithms.adasum.optimizer import model_adasum_status
from keras_boost.algorithms.adasum.optimizer import replica_plan
from keras_boost.algorithms.adasum.reduce import adasum
from keras_boost.algorithms.adasum.reduce import adasum_reduce
from keras_boost.algorithms.adasum.reduce import adasum_tree
from keras_boost.algorithms.adasum.reduce import bit_reversed
from keras_boost.algorithms.adasum.reduce import group_mean
from keras_boost.algorithms.adasum.reduce import halving_doubling
from keras_boost.algorithms.adasum.reduce import halving_levels
from keras_boost.algorithms.adasum.reduce import run_collectives
from keras_boost.algorithms.adasum.reduce import simulate_halving_doubling
from keras_boost.algorithms.status import AlgorithmStatus

__all__ = [
    "AdaSum",
    "AlgorithmStatus",
    "ReplicaCombiner",
    "adasum",
    "adasum_reduce",
    "adasum_status",
    "adasum_tree",
    "bit_reversed",
    "bytes_sent_per_replica",
    "group_mean",
    "halving_doubling",
    "halving_levels",
    "model_adasum_status",
    "replica_plan",
    "run_collectives",
    "simulate_halving_doubling",
]
