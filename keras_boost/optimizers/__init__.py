"""Optimizer wrappers (composition over a Keras optimizer)."""

from keras_boost.optimizers.accumulation import FlushGradientAccumulation
from keras_boost.optimizers.accumulation import GradientAccumulation
from keras_boost.optimizers.adaptive import LARS
from keras_boost.optimizers.adaptive import AdaBelief
from keras_boost.optimizers.adaptive import AdaBound
from keras_boost.optimizers.adasum import AdaSum
from keras_boost.optimizers.adasum import AlgorithmStatus
from keras_boost.optimizers.base import OptimizerWrapper
from keras_boost.optimizers.base import find_in_chain
from keras_boost.optimizers.base import optimizer_chain
from keras_boost.optimizers.boost_optimizer import BoostOptimizer
from keras_boost.optimizers.compressed import CompressedAllReduce
from keras_boost.optimizers.dim_reduce import DimReduce
from keras_boost.optimizers.dynamic_loss_scale import DynamicLossScaleOptimizer
from keras_boost.optimizers.freeze import FreezeOpt
from keras_boost.optimizers.freeze import FreezeOptimizer
from keras_boost.optimizers.centralization import GradientCentralization
from keras_boost.optimizers.centralization import exclude_grouped_kernels
from keras_boost.optimizers.centralization import should_centralize
