"""`NormalizedDense`: MindSpore's "full normalization" head (`CommonHeadLastFN`)."""

import math
import numbers

import keras
import numpy as np
from keras import ops

__all__ = ["adacos_scale", "matched_scale", "NO_GC_ATTR", "NormalizedDense"]

# Attribute set on variables that gradient centralization must leave alone
# (read by `keras_boost.algorithms.centralization`).
NO_GC_ATTR = "_keras_boost_no_gc"


@keras.saving.register_keras_serializable(package="keras_boost")
class NormalizedDense(keras.layers.Layer):
    """A cosine classifier with a learnable scalar scale.

    `y = s * (x / ||x||) @ (W / ||W||_col)`: the input rows and each output
    unit's weight column are L2-normalized (norms clamped below at
    `sqrt(epsilon)`, MindSpore's `sqrt(max(sum(v**2), 1e-4))`), the result is
    multiplied by the trainable scalar `s` (initialized to `initial_scale`,
    1 by default as in MindSpore), and there is no bias.
    `LessBN(model, fn_flag=True)` puts it in place of a model's
    classification heads (`from_dense`: kernel, its regularizer and
    constraint kept, bias dropped), with the
    initial scale `matched_scale(kernel)`, the Dense's logit spread: cosine
    logits in [-1, 1] (scale 1) stall the first epochs (measured in
    docs/methods/less_bn.md).

    The normalization and the matrix product run in float32 whatever the
    dtype policy (the kernel and scale are never autocast), so the head is
    exact under `mixed_float16`/`mixed_bfloat16`; the output is cast to the
    layer's compute dtype.

    Gradient centralization (`boost.GradientCentralization`) never touches
    this layer's kernel.

    Args:
        units: number of outputs.
        activation: optional activation applied to `y` (e.g. the replaced
            Dense's `"softmax"`); default none (logits).
        kernel_initializer: initializer of the `(in, units)` kernel.
        kernel_regularizer: optional regularizer of the kernel (its loss
            is in `layer.losses`, as a Dense's).
        kernel_constraint: optional constraint applied to the kernel after
            each optimizer update.
        epsilon: the squared-norm floor (default `1e-4`).
        initial_scale: the initial value of the trainable scale `s`, a finite
            number > 0 (default `1.0`, MindSpore's). The logits are cosines
            times `s`, so `|y| <= s` at every step.
        **kwargs: base `keras.layers.Layer` arguments (`name`, `dtype`, ...).

    Input shape: `(..., in)`. Output shape: `(..., units)`.

    Example:

    ```python
    head = boost.layers.NormalizedDense(10)
    logits = head(keras.ops.ones((2, 64)))   # cosine similarities times s=1
    wide = boost.layers.NormalizedDense(10, initial_scale=8.0)   # |logits| <= 8
    ```
    """

    def __init__(self, units, activation=None, kernel_initializer="glorot_uniform",
                 epsilon=1e-4, initial_scale=1.0, kernel_regularizer=None,
                 kernel_constraint=None, **kwargs):
        super().__init__(**kwargs)
        if isinstance(units, bool) or not isinstance(units, int) or units < 1:
            raise ValueError(f"units must be a positive int, got {units!r}.")
        if not (isinstance(epsilon, (int, float)) and epsilon > 0):
            raise ValueError(f"epsilon must be a positive number, got {epsilon!r}.")
        self.units = units
        self.activation = keras.activations.get(activation)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.kernel_regularizer = keras.regularizers.get(kernel_regularizer)
        self.kernel_constraint = keras.constraints.get(kernel_constraint)
        self.epsilon = float(epsilon)
        self.initial_scale = _check_scale(initial_scale)
        self.input_spec = keras.layers.InputSpec(min_ndim=2)

    def build(self, input_shape):
        in_features = input_shape[-1]
        if in_features is None:
            raise ValueError(
                f"NormalizedDense {self.name!r} needs a known last input dimension, "
                f"got input shape {input_shape}."
            )
        # autocast=False: the math runs in float32 from the float32 variables
        # even under a mixed policy.
        self.kernel = self.add_weight(
            name="kernel", shape=(in_features, self.units),
            initializer=self.kernel_initializer, regularizer=self.kernel_regularizer,
            constraint=self.kernel_constraint, autocast=False,
        )
        self.scale = self.add_weight(
            name="scale", shape=(),
            initializer=keras.initializers.Constant(self.initial_scale), autocast=False,
        )
        setattr(self.kernel, NO_GC_ATTR, True)
        setattr(self.scale, NO_GC_ATTR, True)
        self.input_spec = keras.layers.InputSpec(min_ndim=2, axes={-1: in_features})

    def call(self, inputs):
        floor = ops.cast(self.epsilon, "float32")
        x = ops.cast(inputs, "float32")
        w = ops.cast(self.kernel, "float32")
        x = x / ops.sqrt(ops.maximum(ops.sum(ops.square(x), axis=-1, keepdims=True), floor))
        w = w / ops.sqrt(ops.maximum(ops.sum(ops.square(w), axis=0, keepdims=True), floor))
        y = ops.cast(self.scale, "float32") * ops.matmul(x, w)
        if self.activation is not None:
            y = self.activation(y)
        return ops.cast(y, self.compute_dtype)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self.units,)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "units": self.units,
                "activation": keras.activations.serialize(self.activation),
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "epsilon": self.epsilon,
                "initial_scale": self.initial_scale,
                "kernel_regularizer": keras.regularizers.serialize(self.kernel_regularizer),
                "kernel_constraint": keras.constraints.serialize(self.kernel_constraint),
            }
        )
        return config

    @classmethod
    def from_dense(cls, dense, initial_scale=1.0):
        """A `NormalizedDense` initialized from a built `keras.layers.Dense`.

        Same name, units, activation, dtype policy, trainable flag, kernel
        regularizer and constraint, and activity regularizer; kernel copied,
        bias (with its regularizer and constraint) dropped, scale
        `initial_scale` (default 1, MindSpore's; LessBN passes
        `matched_scale(dense.kernel)`). The new layer is built for the
        Dense's input size.

        Example:

        ```python
        from keras_boost.algorithms.less_bn import matched_scale
        dense = keras.layers.Dense(10)
        dense.build((None, 64))
        head = boost.layers.NormalizedDense.from_dense(dense)        # scale 1
        wide = boost.layers.NormalizedDense.from_dense(
            dense, initial_scale=matched_scale(dense.kernel))         # about 10.5
        ```
        """
        if not isinstance(dense, keras.layers.Dense):
            raise TypeError(
                f"from_dense expects a keras.layers.Dense, got {type(dense).__name__}."
            )
        if not dense.built:
            raise ValueError(f"Dense {dense.name!r} is not built; it has no kernel to copy.")
        layer = cls(
            dense.units,
            activation=keras.activations.serialize(dense.activation),
            initial_scale=initial_scale,
            kernel_regularizer=dense.kernel_regularizer,
            kernel_constraint=dense.kernel_constraint,
            activity_regularizer=dense.activity_regularizer,
            name=dense.name,
            dtype=dense.dtype_policy,
            trainable=dense.trainable,
        )
        kernel = ops.convert_to_numpy(dense.kernel)
        layer.build((None, kernel.shape[0]))
        layer.kernel.assign(kernel)
        return layer


def _check_scale(value, name="initial_scale"):
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not (
        math.isfinite(value) and value > 0
    ):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}.")
    return float(value)


def adacos_scale(num_classes):
    """AdaCos' fixed scale for `num_classes` classes: `sqrt(2) * log(C - 1)`.

    Zhang et al., "AdaCos" (CVPR 2019): the scale at which a sample whose
    cosine to its class is `cos(pi/4)` (others 0) gets probability 1/2. It
    is 0 for C = 2 and below 1 for C = 3, so it is floored at 1 (MindSpore's
    scale).

    Example:

    ```python
    adacos_scale(10)     # 3.107
    adacos_scale(1000)   # 9.768
    ```
    """
    if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 2:
        raise ValueError(f"num_classes must be an int >= 2, got {num_classes!r}.")
    return max(1.0, math.sqrt(2.0) * math.log(num_classes - 1))


def matched_scale(kernel, fallback=1.0):
    """The scale that gives a `NormalizedDense` the logit spread of a `Dense`.

    For inputs `x ~ N(0, I)` of size `d`, `x / ||x||` is uniform on the
    sphere, so each cosine `x_hat . w_hat` has variance `1/d` and the
    normalized logits have variance `s**2 / d`; the Dense logits `x . w_j`
    (bias aside) have variance `||w_j||**2`. Equal mean variance over the
    units gives

    `s = sqrt(d * mean_j ||w_j||**2) = ||W||_F * sqrt(d / units)`.

    For a Glorot-uniform kernel that is `d * sqrt(2 / (d + units))` (10.5
    for 64 features and 10 classes). `fallback` is returned when the kernel
    is all zeros (or not finite), where there is no spread to match.

    Args:
        kernel: the Dense's `(d, units)` kernel (variable or array).
        fallback: the scale for an all-zero kernel (default 1, MindSpore's).

    Example:

    ```python
    from keras_boost.algorithms.less_bn import matched_scale
    dense = keras.layers.Dense(10); dense.build((None, 64))
    matched_scale(dense.kernel)   # about 10.5
    ```
    """
    fallback = _check_scale(fallback, "fallback")
    w = np.asarray(ops.convert_to_numpy(kernel), np.float64)
    if w.ndim != 2:
        raise ValueError(f"kernel must have shape (in, units), got shape {w.shape}.")
    scale = float(np.sqrt(w.shape[0] * np.mean(np.sum(w**2, axis=0))))
    return scale if math.isfinite(scale) and scale > 0 else fallback
