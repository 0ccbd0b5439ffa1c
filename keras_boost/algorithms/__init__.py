"""The boost algorithms, one package each.

Each package holds its pure math, its Keras glue (optimizer wrapper, layer,
callback or model surgery) and, for the algorithms that act inside
`BoostModel`'s train step, its step part. Other code reaches an algorithm
only through its package's `__init__`; each package's docstring names its
method card (`docs/methods/<name>.md`).

In the train step (each has a `StepPart`, or acts in the optimizer chain):
`freezing`, `loss_scaling` (one scale, or one per group), `dim_reduce`,
`adasum`, `accumulation`, `compressed_all_reduce`, `seq_length_warmup`,
`selective_backprop`.

On the model, the data or the optimizer: `less_bn`, `fused_batch_norm`,
`precision`, `centralization`, `adaptive_optimizers`, `progressive_resizing`,
`curriculum`, `batch_size`, `pruning`, `quantization`, `distillation`.

Shared modules: `optimizer_wrapper` (the composition base every optimizer
wrapper extends), `step_part` (the step-part interface), `scheduled_step`
(a step part that follows training progress, rebuilt when it changes), `compose` (what
`BoostModel` asks of the algorithms: its parts, compile checks, summary),
`queries` (`BoostModel`'s MindSpore-named checks), `status`
(`AlgorithmStatus`).

Example:

```python
from keras_boost.algorithms.freezing import GradientFreeze

model, optimizer = GradientFreeze(param_groups=4, total_steps=None).freeze_generate(
    model, keras.optimizers.SGD(0.1))
```

The packages are not imported here, so that importing one does not import
them all (and no import cycle runs through this module).
"""
