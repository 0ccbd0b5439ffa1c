"""`ReplicaCombiner`: the base of the wrappers that replace the all-reduce.

`AdaSum` and `CompressedAllReduce` take over the wrapped optimizer's SUM
all-reduce under `tf.distribute` and combine the replicas' gradients their
own way. This base holds what they share, so that both behave alike:

- `skipped_steps`: a step whose combined update is not finite on some
  replica is skipped on every replica and counted here;
- on one replica (no strategy, or the JAX and torch backends, where Keras'
  `fit` steps one program and there are no per-replica gradients) there is
  nothing to combine: the gradients pass through unchanged, with one
  `NoEffectWarning` that says so.

Subclasses implement `_apply` (calling `_replicas()` and
`_warn_single_replica()`) and set `single_replica_effect`, the end of that
warning.
"""

import warnings

import keras

from keras_boost import backend as kb_backend
from keras_boost.errors import NoEffectWarning
from keras_boost.algorithms.optimizer_wrapper import OptimizerWrapper
from keras_boost.algorithms.optimizer_wrapper import optimizer_chain

__all__ = ["ReplicaCombiner"]


class ReplicaCombiner(OptimizerWrapper):
    """An optimizer wrapper that combines the replicas' gradients itself.

    Not used directly: see `boost.AdaSum` and
    `boost.optimizers.CompressedAllReduce`.
    """

    # What one replica means for the subclass (the end of the warning).
    single_replica_effect = "the gradients are applied unchanged."

    def __init__(self, optimizer, name=None, **kwargs):
        super().__init__(optimizer, name=name, **kwargs)
        self._warned_single_replica = False

    def _build_own(self, var_list):
        self.skipped_steps = self.add_variable(
            shape=(), dtype="int32", initializer="zeros", name="skipped_steps"
        )

    @staticmethod
    def _replicas():
        """Replicas in sync under the current strategy (1 without one)."""
        replicas, _ = kb_backend.current().replica_layout()
        return replicas

    def _innermost(self):
        return optimizer_chain(self.inner_optimizer)[-1]

    def _warn_single_replica(self):
        if not self._warned_single_replica:
            self._warned_single_replica = True
            warnings.warn(
                f"{type(self).__name__} runs on a single replica here (no tf.distribute strategy "
                f"with several replicas; backend {keras.backend.backend()!r}): "
                + self.single_replica_effect,
                NoEffectWarning,
                stacklevel=5,
            )

    def _stateless_apply(self, own_variables, inner_variables, grads, trainable):
        # JAX: Keras' fit steps one program (GSPMD under DataParallel decides
        # the collectives), so there are no per-replica gradients to combine.
        self._warn_single_replica()
        return super()._stateless_apply(own_variables, inner_variables, grads, trainable)
