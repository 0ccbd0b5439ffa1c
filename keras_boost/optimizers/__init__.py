"""Optimizer wrappers (composition over a Keras optimizer) and new optimizers.

Each wrapper lives with its algorithm (`keras_boost.algorithms.<name>`); the
composition base is `keras_boost.algorithms.optimizer_wrapper` and the
config-driven chain is `BoostOptimizer` (`keras_boost.optimizers.boost_optimizer`).
This package re-exports them under the path users know.

Example:

```python
opt = boost.optimizers.GradientAccumulation(keras.optimizers.SGD(0.1), max_accumulation_step=4)
boost.optimizers.optimizer_chain(opt)   # [GradientAccumulation, SGD]
```
"""

from keras_boost.algorithms.accumulation import FlushGradientAccumulation
from keras_boost.algorithms.accumulation import GradientAccumulation
from keras_boost.algorithms.adaptive_optimizers import LARS
from keras_boost.algorithms.adaptive_optimizers import AdaBelief
from keras_boost.algorithms.adaptive_optimizers import AdaBound
from keras_boost.algorithms.adasum import AdaSum
from keras_boost.algorithms.cautious import CautiousOptimizer
from keras_boost.algorithms.centralization import GradientCentralization
from keras_boost.algorithms.centralization import exclude_gate_kernels
from keras_boost.algorithms.centralization import exclude_grouped_kernels
from keras_boost.algorithms.centralization import exclude_unsuited_kernels
from keras_boost.algorithms.centralization import should_centralize
from keras_boost.algorithms.compressed_all_reduce import CompressedAllReduce
from keras_boost.algorithms.dim_reduce import DimReduce
from keras_boost.algorithms.freezing import FreezeOpt
from keras_boost.algorithms.freezing import FreezeOptimizer
from keras_boost.algorithms.loss_scaling import DynamicLossScaleOptimizer
from keras_boost.algorithms.optimizer_wrapper import OptimizerWrapper
from keras_boost.algorithms.optimizer_wrapper import find_in_chain
from keras_boost.algorithms.optimizer_wrapper import optimizer_chain
from keras_boost.algorithms.orthogonal_updates import OrthogonalUpdates
from keras_boost.algorithms.status import AlgorithmStatus
from keras_boost.optimizers.boost_optimizer import BoostOptimizer

__all__ = [
    "LARS",
    "AdaBelief",
    "AdaBound",
    "AdaSum",
    "AlgorithmStatus",
    "BoostOptimizer",
    "CautiousOptimizer",
    "CompressedAllReduce",
    "DimReduce",
    "DynamicLossScaleOptimizer",
    "FlushGradientAccumulation",
    "FreezeOpt",
    "FreezeOptimizer",
    "GradientAccumulation",
    "GradientCentralization",
    "OptimizerWrapper",
    "OrthogonalUpdates",
    "exclude_gate_kernels",
    "exclude_grouped_kernels",
    "exclude_unsuited_kernels",
    "find_in_chain",
    "optimizer_chain",
    "should_centralize",
]
