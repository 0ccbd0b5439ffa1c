"""The boost algorithms, one package each.

Each package holds its pure math, its Keras glue (optimizer wrapper, layer,
callback) and, for the algorithms that act inside `BoostModel`'s train step,
its step part (`keras_boost.algorithms.step_part.StepPart`). Other code
reaches an algorithm only through its package's `__init__`.

Train-step algorithms (this package's owners: the train step):

- `freezing`: gradient freezing (`GradientFreeze`, `FreezeOptimizer`).
- `loss_scaling`: dynamic loss scaling, single and per group.
- `dim_reduce`: DimReduce, the subspace second-order stage 2.
- `adasum`: AdaSum, the adaptive combination of the replicas' updates.
- `accumulation`: gradient accumulation.
- `compressed_all_reduce`: the all-reduce in 16-bit floats.

Shared pieces: `optimizer_wrapper` (the composition base every optimizer
wrapper extends), `step_part` (the step-part interface), `status`
(`AlgorithmStatus`).

The packages are not imported here, so that importing one does not import
them all (and no import cycle runs through this module).
"""
