"""MindSpore compatibility layer: `mindspore.boost`'s names, and where they live.

keras_boost ports `mindspore.boost`; the names MindSpore users know are
kept, as the same objects the rest of the package uses (nothing here is a
second implementation). A MindSpore script changes its imports and its
training loop (Keras' `compile`/`fit` instead of a train cell), not its
boost configuration: `boost_config_dict` keeps MindSpore's layout.

| MindSpore (`mindspore.boost`) | keras_boost | what differs |
|---|---|---|
| `AutoBoost(level, boost_config_dict)` | `AutoBoost` | not a process-wide singleton: each instance keeps its own config; unknown levels, modes, sections and keys raise instead of falling back to O0 or being ignored |
| `AutoBoost.network_auto_process_train(network, optimizer)` | the same method | returns a Keras model and optimizer for `compile`/`fit` (LessBN, then freezing, then AdaSum; DimReduce exclusive, as in MindSpore) |
| `AutoBoost.network_auto_process_eval(network)` | the same method | returns the processed Keras model |
| `LessBN(network, fn_flag=False)` | `LessBN` | a new Keras model with the matched BatchNormalization layers removed (MindSpore's graph-compiler patterns as data); the input model is not mutated |
| `CommonHeadLastFN` (LessBN's `fn_flag` head) | `NormalizedDense` | a Keras layer; its scale may start at another value than 1; the config's `fn_flag` defaults to `False` (MindSpore: `True`; measured in the LessBN card) |
| `gc_flag` (an optimizer parameter-group flag) | `GradientCentralization(optimizer)` | a wrapper around any Keras optimizer, not a flag; the config's `gc_flag` defaults to `"auto"`: only a model with BatchNormalization (MindSpore: `True`, every model) |
| `GradientFreeze(param_groups, freeze_type, freeze_p, total_steps)` | `GradientFreeze` | `split_parameters_groups`, `generate_freeze_index_sequence`, `freeze_generate` kept; `seed=` added |
| `FreezeOpt(opt, train_parameter_groups, train_strategy)` | `FreezeOpt` (= `FreezeOptimizer`) | one shared inner-optimizer state instead of one optimizer per group |
| `freeze_cell` | none | `BoostModel`'s train step selects the trained variables per step |
| `GradientAccumulation(max_accumulation_step, ...)` (a cell) | `GradientAccumulation(optimizer, max_accumulation_step)` | an optimizer wrapper; schedules, `iterations`, weight decay and EMA count real updates only |
| `AdaSum(rank, device_number, group_number, parameter_tuple)` | `AdaSum(optimizer, reduce_on="grad")` | an optimizer wrapper under `tf.distribute` strategies; `reduce_on="delta"` is MindSpore's weight-delta form |
| `DimReduce(...)` (a cell) | `DimReduce(...)` | an optimizer wrapper with MindSpore's parameters; `WeightTrajectory` saves the stage-1 snapshots |
| `GroupLossScaleManager` | `GroupLossScaleManager` | a Keras layer that marks the groups in the model |
| `BoostTrainOneStepCell` | `BoostModel` | a `keras.Model` whose `train_step` does what the cell does, on TensorFlow, JAX and PyTorch |
| `BoostTrainOneStepWithLossScaleCell` | `BoostModel(..., loss_scale=...)` | dynamic loss scaling is a constructor argument |
| `BoostTrainOneStepCell.check_adasum_enable()` / `check_dim_reduce_enable()` | `BoostModel.check_adasum_enable()` / `check_dim_reduce_enable()` | return a status saying why not, instead of a bare bool |
| `OptimizerProcess`, `ParameterProcess` | none | Keras optimizers are wrapped (`keras_boost.optimizers`), not rebuilt from parameter groups |

Example:

```python
from keras_boost.compat import AutoBoost, BoostTrainOneStepCell

boost = AutoBoost("O1", {"boost": {"mode": "manual", "adasum": False}})
model, optimizer = boost.network_auto_process_train(model, keras.optimizers.SGD(0.1))
train_model = BoostTrainOneStepCell.from_model(model, boost_level="O1")   # a BoostModel
```
"""

from keras_boost.algorithms.accumulation import GradientAccumulation
from keras_boost.algorithms.adasum import AdaSum
from keras_boost.algorithms.centralization import GradientCentralization
from keras_boost.algorithms.dim_reduce import DimReduce
from keras_boost.algorithms.freezing import FreezeOpt
from keras_boost.algorithms.freezing import GradientFreeze
from keras_boost.algorithms.less_bn import LessBN
from keras_boost.algorithms.less_bn import NormalizedDense
from keras_boost.algorithms.loss_scaling import GroupLossScaleManager
from keras_boost.auto_boost import AutoBoost
from keras_boost.model import BoostModel

# MindSpore's names for the objects keras_boost calls otherwise.
BoostTrainOneStepCell = BoostModel
BoostTrainOneStepWithLossScaleCell = BoostModel
CommonHeadLastFN = NormalizedDense

__all__ = [
    "AdaSum",
    "AutoBoost",
    "BoostTrainOneStepCell",
    "BoostTrainOneStepWithLossScaleCell",
    "CommonHeadLastFN",
    "DimReduce",
    "FreezeOpt",
    "GradientAccumulation",
    "GradientCentralization",
    "GradientFreeze",
    "GroupLossScaleManager",
    "LessBN",
]
