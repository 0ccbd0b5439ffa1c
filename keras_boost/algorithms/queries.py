"""`BoostModel`'s algorithm-named queries, kept out of `model.py`.

MindSpore's `check_adasum_enable` / `check_dim_reduce_enable` and gradient
freezing's `freeze_planner` / `freeze_decision` are public names of
`BoostModel`; they ask the algorithms' packages, so `BoostModel` inherits
them from `AlgorithmQueries`.
"""

from keras_boost.algorithms.adasum import model_adasum_status
from keras_boost.algorithms.dim_reduce import dim_reduce_status
from keras_boost.algorithms.freezing import FreezingStep

__all__ = ["AlgorithmQueries"]


class AlgorithmQueries:
    """Mixin of `BoostModel` (which provides `_boost_step_parts()`).

    Example:

    ```python
    model.fit(x, y, epochs=3)
    print(model.freeze_decision, model.check_adasum_enable().reason)
    ```
    """

    @property
    def freeze_planner(self):
        """The `DepthPlanner` of the last train function, with freezing (else None)."""
        part = next((p for p in self._boost_step_parts() if isinstance(p, FreezingStep)), None)
        return None if part is None else part.planner

    @property
    def freeze_decision(self):
        """What gradient freezing runs, as a `FreezeDecision`: the depths that
        run and why (measured, pinned by `grad_freeze.depths`, or MindSpore's
        schedule). None without freezing, before `fit`, and while the full
        step is still being timed."""
        planner = self.freeze_planner
        return None if planner is None else planner.decision()

    def check_adasum_enable(self):
        """Whether AdaSum combines the replicas' updates in this setting.

        MindSpore's name. Returns an `AlgorithmStatus`: truthy when AdaSum acts,
        with a `reason` that says why not otherwise (AdaSum off in the
        config, one replica, a `device_number` that does not fit the
        strategy, a hierarchical layout with one node).

        Example:

        ```python
        with tf.distribute.MirroredStrategy().scope():
            model = boost.BoostModel(inputs, outputs, boost_level="O2")
        status = model.check_adasum_enable()
        print(bool(status), status.reason)
        ```
        """
        return model_adasum_status(self)

    def check_dim_reduce_enable(self):
        """Whether DimReduce (stage 2) acts here (MindSpore's name): an
        `AlgorithmStatus`, truthy when it does, with the reason.

        Any number of tf.distribute replicas is fine (each step uses the
        global batch's gradient and losses); several workers need
        `pca_mat_path`, through which the chief shares the basis.

        Example:

        ```python
        status = stage2.check_dim_reduce_enable()
        print(bool(status), status.reason)
        ```
        """
        return dim_reduce_status(self)
