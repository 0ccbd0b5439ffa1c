"""`FusedBatchNormalization`: Keras' BatchNormalization, trained with one fused kernel."""

import keras
from keras import ops

from keras_boost import backend as kb_backend

__all__ = ["FusedBatchNormalization"]


@keras.saving.register_keras_serializable(package="keras_boost")
class FusedBatchNormalization(keras.layers.BatchNormalization):
    """`keras.layers.BatchNormalization` whose training step runs one fused kernel.

    Keras 3 normalizes a training batch with separate ops (the moments'
    reductions, then `(x - mean) * rsqrt(var + eps) * gamma + beta`), and
    their backward pass is as many ops again. On TensorFlow this layer runs
    `FusedBatchNormV3` instead (the kernel `tf.keras` 2 used), one op
    forward and one backward; on PyTorch `torch.nn.functional.batch_norm`.
    The math is Keras' own: the same batch mean and biased variance
    normalize the batch, the moving statistics get the same update (Keras'
    `momentum`, biased variance), and the weights, their order
    (`get_weights()`), the config and the inference path are those of
    `BatchNormalization`. On JAX, XLA already fuses Keras' ops: the layer is
    `BatchNormalization` there (`fused_kernel_available()` is False).

    The fused kernel takes the training step when the input is 4-D with the
    channels last (`axis=-1` or `3`): the convolution networks LessBN and the
    bench build. Any other case (a mask, `renorm`, `synchronized`, another
    rank or axis, inference) takes Keras' own path.

    Args:
        **kwargs: those of `keras.layers.BatchNormalization`.

    Example:

    ```python
    bn = boost.layers.FusedBatchNormalization(momentum=0.9, epsilon=1e-5)
    y = bn(keras.ops.ones((8, 28, 28, 16)), training=True)
    # Any model's BatchNormalization layers, swapped in a copy of the model:
    fast = boost.surgery.fuse_batch_norm(model)
    ```
    """

    @staticmethod
    def fused_kernel_available():
        """Whether this backend has a fused kernel (TensorFlow, PyTorch)."""
        return hasattr(kb_backend.current(), "training_batch_norm")

    @staticmethod
    def kernel_fits(layer, ndim):
        """Whether the fused kernel can train the BatchNormalization `layer`
        on `ndim`-D inputs: 4-D, channels last, without `renorm` or
        `synchronized` (the kernels have neither)."""
        return ndim == 4 and layer.axis in (-1, 3) and not layer.renorm and not layer.synchronized

    def _fused_applies(self, inputs, training, mask):
        return (
            training
            and self.trainable
            and mask is None
            and self.kernel_fits(self, len(inputs.shape))
            and self.fused_kernel_available()
        )

    def call(self, inputs, training=None, mask=None):
        if not self._fused_applies(inputs, training, mask):
            return super().call(inputs, training=training, mask=mask)
        # As Keras does: statistics in float32 whatever the compute dtype.
        x = ops.cast(inputs, "float32")
        channels = x.shape[-1]
        gamma = ops.cast(self.gamma, "float32") if self.scale else ops.ones((channels,), "float32")
        beta = ops.cast(self.beta, "float32") if self.center else ops.zeros((channels,), "float32")
        outputs, mean, variance = kb_backend.current().training_batch_norm(x, gamma, beta, self.epsilon)
        # Keras' update, term for term (moving = moving * m + batch * (1 - m)).
        self.moving_mean.assign(self.moving_mean * self.momentum + mean * (1.0 - self.momentum))
        self.moving_variance.assign(
            self.moving_variance * self.momentum + variance * (1.0 - self.momentum)
        )
        return ops.cast(outputs, self.compute_dtype)
