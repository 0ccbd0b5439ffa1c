"""DimReduce: MindSpore's two-stage subspace training.

Stage 1 records the weights along a normal run (`WeightTrajectory`); their
PCA gives a small basis. Stage 2 (`DimReduce`, which `BoostModel` runs as the
whole update) takes quasi-Newton (BFGS) steps in that subspace with an
Armijo line search on each batch, plus momentum on the residual gradient.

Example:

```python
model.fit(x, y, epochs=10, callbacks=[boost.callbacks.WeightTrajectory("trajectory/")])
stage2 = boost.BoostModel.from_model(model, boost_config_dict={
    "boost": {"mode": "manual", "dim_reduce": True},
    "dim_reduce": {"weight_load_dir": "trajectory/", "n_components": 16}})
stage2.compile(optimizer="sgd", loss="mse")  # fit logs line_search_accepted
```

The method card: `docs/methods/dim_reduce.md`.
"""

from keras_boost.algorithms.dim_reduce.optimizer import DimReduce
from keras_boost.algorithms.dim_reduce.optimizer import load_basis
from keras_boost.algorithms.dim_reduce.optimizer import read_basis
from keras_boost.algorithms.dim_reduce.optimizer import wait_for_basis
from keras_boost.algorithms.dim_reduce.pca import trajectory_pca
from keras_boost.algorithms.dim_reduce.step import DimReduceStep
from keras_boost.algorithms.dim_reduce.step import dim_reduce_status
from keras_boost.algorithms.dim_reduce.subspace import armijo_accepts
from keras_boost.algorithms.dim_reduce.subspace import back_project
from keras_boost.algorithms.dim_reduce.subspace import bfgs_inverse_update
from keras_boost.algorithms.dim_reduce.subspace import flatten
from keras_boost.algorithms.dim_reduce.subspace import project
from keras_boost.algorithms.dim_reduce.subspace import subspace_step
from keras_boost.algorithms.dim_reduce.subspace import unflatten
from keras_boost.algorithms.dim_reduce.trajectory import WeightTrajectory
from keras_boost.algorithms.dim_reduce.trajectory import load_trajectory
from keras_boost.algorithms.dim_reduce.trajectory import variables_spec

__all__ = [
    "DimReduce",
    "DimReduceStep",
    "WeightTrajectory",
    "armijo_accepts",
    "back_project",
    "bfgs_inverse_update",
    "dim_reduce_status",
    "flatten",
    "load_basis",
    "load_trajectory",
    "project",
    "read_basis",
    "subspace_step",
    "trajectory_pca",
    "unflatten",
    "variables_spec",
    "wait_for_basis",
]
