"""`CompressedAllReduce`: the gradient all-reduce in 16 bits.

Data-parallel training moves every gradient across the replicas once per
step. Under `tf.distribute` (MirroredStrategy, MultiWorkerMirroredStrategy,
TPUStrategy) this wrapper takes over the wrapped optimizer's SUM
all-reduce: each replica casts its gradients to `bfloat16` (or `float16`),
the sum runs in that dtype (half the bytes of float32 on the wire), and the
result is cast back before the wrapped optimizer applies it.

With `error_feedback=True` (Seide et al. 2014; Karimireddy et al. 2019,
"EF-SGD") each replica keeps what the cast dropped, `e = p - cast(p)` with
`p = g + e_previous`, and adds it to its next gradient, so the rounding
error does not accumulate in the weights. The residuals are replica-local
variables (`synchronization="on_read"`; a checkpoint holds their replica
mean).

A step whose reduced gradient is not finite (a float16 overflow) is skipped
on every replica and counted in `skipped_steps`; the reduced values are the
same on every replica, so they agree without another collective.

On one replica there is nothing to send: the wrapper passes the gradients
through and warns once.
"""

import keras
from keras import ops

from keras_boost import keras_private
from keras_boost import backend as kb_backend
from keras_boost.algorithms.loss_scaling import all_finite
from keras_boost.algorithms.adasum import ReplicaCombiner

__all__ = ["CompressedAllReduce", "wire_bytes", "WIRE_DTYPES"]

WIRE_DTYPES = ("bfloat16", "float16")


def wire_bytes(variables, dtype):
    """Bytes one replica sends into the all-reduce per step (its gradients in `dtype`).

    Example:

    ```python
    wire_bytes(model.trainable_variables, "bfloat16")   # half of the "float32" count
    ```
    """
    width = {"bfloat16": 2, "float16": 2, "float32": 4}[dtype]
    return sum(int(ops.size(v)) for v in variables) * width


@keras.saving.register_keras_serializable(package="keras_boost")
class CompressedAllReduce(ReplicaCombiner):
    """Sums the replicas' gradients in a 16-bit float type.

    Args:
        optimizer: the Keras optimizer (or keras_boost chain) to wrap; its
            innermost optimizer must be a Keras TensorFlow optimizer under a
            strategy (its all-reduce is replaced).
        dtype: `"bfloat16"` (float32's range, 8 bits of mantissa: the safe
            default) or `"float16"` (more mantissa, overflows above 65504).
        error_feedback: carry each replica's rounding error into its next
            step.
        name: optional name.

    Example:

    ```python
    strategy = tf.distribute.MirroredStrategy()
    with strategy.scope():
        model = make_model()
        model.compile(optimizer=boost.optimizers.CompressedAllReduce(
            keras.optimizers.SGD(0.1), dtype="bfloat16", error_feedback=True),
            loss="sparse_categorical_crossentropy")
    ```
    """

    single_replica_effect = "there is no all-reduce to compress, and the gradients are applied unchanged."

    def __init__(self, optimizer, dtype="bfloat16", error_feedback=False, name=None, **kwargs):
        super().__init__(optimizer, name=name or "compressed_all_reduce", **kwargs)
        if dtype not in WIRE_DTYPES:
            raise ValueError(
                f"CompressedAllReduce dtype must be a 16-bit float type, one of {list(WIRE_DTYPES)}, "
                f"got {dtype!r}."
            )
        if not isinstance(error_feedback, bool):
            raise TypeError(f"error_feedback must be True or False, got {error_feedback!r}.")
        self.wire_dtype = dtype
        self.error_feedback = error_feedback
        self.residuals = []

    def _build_own(self, var_list):
        super()._build_own(var_list)
        if self.error_feedback:
            for variable in var_list:
                residual = keras.Variable(
                    initializer="zeros", shape=variable.shape, dtype="float32", trainable=False,
                    synchronization="on_read", aggregation="mean",
                    name=f"residual_{variable.name}",
                )
                keras_private.track_optimizer_variable(self, residual)
                self.residuals.append(residual)

    def compress(self, grads, variables):
        """The 16-bit gradients each replica sends, and the new residuals
        (assigned by the caller once the step is known to be finite)."""
        sent, residuals = [], []
        for g, variable in zip(grads, variables):
            if g is None:
                sent.append(None)
                residuals.append(None)
                continue
            p = ops.cast(g, "float32")
            if self.error_feedback:
                p = p + self._residual(variable).value
            c = ops.cast(p, self.wire_dtype)
            sent.append(c)
            residuals.append(p - ops.cast(c, "float32") if self.error_feedback else None)
        return sent, residuals

    def _residual(self, variable):
        # By variable, not position: BoostModel's freezing applies a subset.
        return self.residuals[keras_private.optimizer_variable_index(self, variable)]

    def _apply(self, grads, trainable_variables):
        if trainable_variables is None:
            trainable_variables = keras_private.optimizer_trained_variables(self)
        trainable_variables = list(trainable_variables)
        seam = kb_backend.current()
        if self._replicas() == 1:
            self._warn_single_replica()
            self.inner_optimizer.apply(grads, trainable_variables)
            return
        if not seam.in_replica_context():
            raise RuntimeError(
                "CompressedAllReduce under a strategy with several replicas must be applied in "
                "replica context (inside strategy.run, as Keras' fit does), where each replica "
                "still holds its own gradients."
            )
        sent, residuals = self.compress(list(grads), trainable_variables)
        present = [i for i, c in enumerate(sent) if c is not None]
        summed = seam.all_reduce_sum([sent[i] for i in present])
        reduced = [None] * len(sent)
        for i, total in zip(present, summed):
            reduced[i] = ops.cast(total, grads[i].dtype)
        # The same on every replica: they agree without another collective.
        finite = all_finite(reduced)

        def step(reduced, variables):
            with seam.local_gradients(self._innermost()):
                self.inner_optimizer.apply(reduced, variables)

        seam.apply_if(finite, step, (reduced, trainable_variables))
        self.skipped_steps.assign_add(1 - ops.cast(finite, "int32"))
        for variable, residual in zip(trainable_variables, residuals):
            if residual is not None:
                # A skipped step keeps the old residual (an inf would poison every later step).
                old = self._residual(variable)
                old.assign(ops.where(finite, residual, old.value))

    def get_config(self):
        config = super().get_config()
        config.update(dtype=self.wire_dtype, error_feedback=self.error_feedback)
        return config
