"""`NormalizedDense`: MindSpore's "full normalization" head (`CommonHeadLastFN`)."""

import keras
from keras import ops

# Attribute set on variables that gradient centralization must leave alone
# (read by `keras_boost.optimizers.centralization`).
NO_GC_ATTR = "_keras_boost_no_gc"


@keras.saving.register_keras_serializable(package="keras_boost")
class NormalizedDense(keras.layers.Layer):
    """A cosine classifier with a learnable scalar scale.

    `y = s * (x / ||x||) @ (W / ||W||_col)`: the input rows and each output
    unit's weight column are L2-normalized (norms clamped below at
    `sqrt(epsilon)`, MindSpore's `sqrt(max(sum(v**2), 1e-4))`), the result is
    multiplied by the trainable scalar `s` (initialized to 1), and there is no
    bias. `LessBN(model, fn_flag=True)` puts it in place of a model's last
    `Dense`, initialized from that Dense's kernel (its bias is dropped).

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
        epsilon: the squared-norm floor (default `1e-4`).
        **kwargs: base `keras.layers.Layer` arguments (`name`, `dtype`, ...).

    Input shape: `(..., in)`. Output shape: `(..., units)`.

    Example:

    ```python
    head = boost.layers.NormalizedDense(10)
    logits = head(keras.ops.ones((2, 64)))   # cosine similarities times s=1
    ```
    """

    def __init__(self, units, activation=None, kernel_initializer="glorot_uniform",
                 epsilon=1e-4, **kwargs):
        super().__init__(**kwargs)
        if isinstance(units, bool) or not isinstance(units, int) or units < 1:
            raise ValueError(f"units must be a positive int, got {units!r}.")
        if not (isinstance(epsilon, (int, float)) and epsilon > 0):
            raise ValueError(f"epsilon must be a positive number, got {epsilon!r}.")
        self.units = units
        self.activation = keras.activations.get(activation)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.epsilon = float(epsilon)
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
            initializer=self.kernel_initializer, autocast=False,
        )
        self.scale = self.add_weight(name="scale", shape=(), initializer="ones", autocast=False)
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
            }
        )
        return config

    @classmethod
    def from_dense(cls, dense):
        """A `NormalizedDense` initialized from a built `keras.layers.Dense`.

        Same name, units, activation and dtype policy; kernel copied, bias
        dropped, scale 1. The new layer is built for the Dense's input size.

        Example:

        ```python
        dense = keras.layers.Dense(10)
        dense.build((None, 64))
        head = boost.layers.NormalizedDense.from_dense(dense)
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
            name=dense.name,
            dtype=dense.dtype_policy,
        )
        kernel = ops.convert_to_numpy(dense.kernel)
        layer.build((None, kernel.shape[0]))
        layer.kernel.assign(kernel)
        return layer
