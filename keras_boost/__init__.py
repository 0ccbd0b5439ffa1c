"""keras_boost: train Keras 3 models to the same accuracy in less time.

Every public name has one home: an algorithm's names live in its package
`keras_boost.algorithms.<name>` and are re-exported here and by the
public namespaces (`keras_boost.optimizers`, `.layers`, `.callbacks`,
`.surgery`, `.ops`, ...), each a package `__init__`. MindSpore's names are documented in
`keras_boost.compat`.

Example:

```python
import keras_boost as boost
model.compile(optimizer=boost.wrap(keras.optimizers.SGD(0.1), "O0"), loss=...)
```
"""

from keras_boost import algorithms
from keras_boost import callbacks
from keras_boost import compat
from keras_boost import config
from keras_boost import datasets
from keras_boost import distribute
from keras_boost import layers
from keras_boost import ops
from keras_boost import optimizers
from keras_boost import precision
from keras_boost import pruning
from keras_boost import quantization
from keras_boost import schedules
from keras_boost import surgery
from keras_boost import tune
from keras_boost.algorithms.accumulation import FlushGradientAccumulation
from keras_boost.algorithms.accumulation import GradientAccumulation
from keras_boost.algorithms.adaptive_optimizers import LARS
from keras_boost.algorithms.adaptive_optimizers import AdaBelief
from keras_boost.algorithms.adaptive_optimizers import AdaBound
from keras_boost.algorithms.adasum import AdaSum
from keras_boost.algorithms.cautious import CautiousOptimizer
from keras_boost.algorithms.centralization import GradientCentralization
from keras_boost.algorithms.dim_reduce import DimReduce
from keras_boost.algorithms.distillation import Distiller
from keras_boost.algorithms.freezing import FreezeOpt
from keras_boost.algorithms.freezing import FreezeOptimizer
from keras_boost.algorithms.freezing import GradientFreeze
from keras_boost.algorithms.less_bn import LessBN
from keras_boost.algorithms.loss_scaling import DynamicLossScale
from keras_boost.algorithms.loss_scaling import DynamicLossScaleOptimizer
from keras_boost.algorithms.optimizer_wrapper import OptimizerWrapper
from keras_boost.algorithms.prefix_cache import fit_with_cached_prefix
from keras_boost.auto_boost import AutoBoost
from keras_boost.auto_boost import wrap
from keras_boost.errors import NoEffectWarning
from keras_boost.model import BoostModel
from keras_boost.optimizers.boost_optimizer import BoostOptimizer
from keras_boost.version import __version__
from keras_boost import saving as _saving

__all__ = [
    "LARS",
    "AdaBelief",
    "AdaBound",
    "AdaSum",
    "AutoBoost",
    "BoostModel",
    "BoostOptimizer",
    "CautiousOptimizer",
    "DimReduce",
    "Distiller",
    "DynamicLossScale",
    "DynamicLossScaleOptimizer",
    "FlushGradientAccumulation",
    "FreezeOpt",
    "FreezeOptimizer",
    "GradientAccumulation",
    "GradientCentralization",
    "GradientFreeze",
    "LessBN",
    "NoEffectWarning",
    "OptimizerWrapper",
    "__version__",
    "algorithms",
    "callbacks",
    "compat",
    "config",
    "datasets",
    "distribute",
    "fit_with_cached_prefix",
    "layers",
    "ops",
    "optimizers",
    "precision",
    "pruning",
    "quantization",
    "schedules",
    "surgery",
    "tune",
    "wrap",
]

_saving.register_plain_names([
    AdaBelief, AdaBound, AdaSum, BoostModel, BoostOptimizer, CautiousOptimizer, LARS, DimReduce, DynamicLossScaleOptimizer, FreezeOptimizer,
    GradientAccumulation, GradientCentralization, layers.NormalizedDense, layers.FusedBatchNormalization, schedules.OneCycle,
    Distiller, layers.GroupLossScaleManager, layers.ProgressiveResize, pruning.PruneLowMagnitude,
    quantization.QuantizeAwareDense,
])
