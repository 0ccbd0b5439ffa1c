"""keras_boost: train Keras 3 models to the same accuracy in less time.

```python
import keras_boost as boost
model.compile(optimizer=boost.wrap(keras.optimizers.SGD(0.1), "O0"), loss=...)
```
"""

from keras_boost import callbacks
from keras_boost import config
from keras_boost import datasets
from keras_boost import distribute
from keras_boost import layers
from keras_boost import ops
from keras_boost import precision
from keras_boost import pruning
from keras_boost import quantization
from keras_boost import schedules
from keras_boost import surgery
from keras_boost import tune
from keras_boost.auto_boost import AutoBoost
from keras_boost.auto_boost import wrap
from keras_boost.distill import Distiller
from keras_boost.errors import NoEffectWarning
from keras_boost.grad_freeze import GradientFreeze
from keras_boost.loss_scale import DynamicLossScale
from keras_boost.surgery import LessBN
from keras_boost.model import BoostModel
from keras_boost.optimizers import LARS
from keras_boost.optimizers import AdaBelief
from keras_boost.optimizers import AdaBound
from keras_boost.optimizers import AdaSum
from keras_boost.optimizers import BoostOptimizer
from keras_boost.optimizers import DimReduce
from keras_boost.optimizers import DynamicLossScaleOptimizer
from keras_boost.optimizers import GradientCentralization
from keras_boost.optimizers import FlushGradientAccumulation
from keras_boost.optimizers import FreezeOpt
from keras_boost.optimizers import FreezeOptimizer
from keras_boost.optimizers import GradientAccumulation
from keras_boost.optimizers import OptimizerWrapper
from keras_boost.version import __version__
from keras_boost import saving as _saving

_saving.register_plain_names([
    AdaBelief, AdaBound, AdaSum, BoostModel, BoostOptimizer, LARS, DimReduce, DynamicLossScaleOptimizer, FreezeOptimizer,
    GradientAccumulation, GradientCentralization, layers.NormalizedDense, layers.FusedBatchNormalization, schedules.OneCycle,
    Distiller, layers.GroupLossScaleManager, layers.ProgressiveResize, pruning.PruneLowMagnitude,
    quantization.QuantizeAwareDense,
])
