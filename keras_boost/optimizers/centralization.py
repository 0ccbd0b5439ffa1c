"""`GradientCentralization`: LessBN's `gc_flag`, as an optimizer wrapper."""

import keras

from keras_boost.layers.normalized_dense import NO_GC_ATTR
from keras_boost.ops.centralize import GC_CHANNEL_MULTIPLE
from keras_boost.ops.centralize import centralize
from keras_boost.ops.centralize import gc_applies
from keras_boost.optimizers.base import OptimizerWrapper

# MindSpore skips parameters whose name contains one of these.
_SKIPPED_NAME_PARTS = ("beta", "gamma", "bias")


def _grouped_kernels(model):
    """Kernels of depthwise / grouped convolutions in `model` (recursively)."""
    found = []
    for layer in model._flatten_layers(include_self=False, recursive=True):
        if isinstance(layer, (keras.layers.DepthwiseConv1D, keras.layers.DepthwiseConv2D)):
            found.append(layer.kernel)
        elif isinstance(layer, (keras.layers.SeparableConv1D, keras.layers.SeparableConv2D)):
            found.append(layer.depthwise_kernel)
        elif getattr(layer, "groups", 1) not in (1, None) and hasattr(layer, "kernel"):
            found.append(layer.kernel)
    return found


def exclude_grouped_kernels(model):
    """Marks `model`'s depthwise and grouped-conv kernels: GC leaves them alone.

    `GradientCentralization` sees variables, not layers; it recognises
    depthwise kernels by name (a layer name containing "depthwise", the
    Keras default and Keras Applications' naming) and by this mark.
    `AutoBoost.network_auto_process_train` calls this for you.

    Returns the number of kernels marked.

    Example:

    ```python
    boost.optimizers.exclude_grouped_kernels(model)
    ```
    """
    kernels = _grouped_kernels(model)
    for kernel in kernels:
        setattr(kernel, NO_GC_ATTR, True)
    return len(kernels)


def should_centralize(variable, channel_multiple=GC_CHANNEL_MULTIPLE):
    """Whether GC applies to the gradient of `variable` (MindSpore's rules).

    Yes for trainable tensors of rank >= 2 whose input-channel axis (-2) is a
    multiple of 16, except: names containing "beta", "gamma" or "bias";
    depthwise / grouped kernels (marked by `exclude_grouped_kernels`, or a
    layer name containing "depthwise", or a `depthwise_kernel`); and the
    `NormalizedDense` head.

    Example:

    ```python
    dense = keras.layers.Dense(8); dense.build((None, 32))
    should_centralize(dense.kernel), should_centralize(dense.bias)  # True, False
    ```
    """
    if getattr(variable, NO_GC_ATTR, False):
        return False
    path = str(getattr(variable, "path", None) or getattr(variable, "name", ""))
    parts = path.lower().split("/")
    name = parts[-1]
    if any(p in name for p in _SKIPPED_NAME_PARTS):
        return False
    if "depthwise" in name or any("depthwise" in p for p in parts[:-1]):
        return False
    return gc_applies(variable.shape, channel_multiple)


def _is_sparse(gradient):
    return type(gradient).__name__ == "IndexedSlices"


@keras.saving.register_keras_serializable(package="keras_boost")
class GradientCentralization(OptimizerWrapper):
    """Gradient centralization (LessBN's `gc_flag`) around any Keras optimizer.

    Before the wrapped optimizer's update, each kernel gradient that
    `should_centralize` selects (rank >= 2, input-channel axis a multiple of
    16, not a bias / norm parameter / depthwise kernel / `NormalizedDense`
    head) becomes `g - mean(g over every axis but the last)`, the per-output
    -channel centering of MindSpore's `Centralization` in Keras layouts.
    Sparse (`IndexedSlices`) gradients are passed through unchanged.

    Difference from MindSpore: there, coupled weight decay is added to the
    gradient before centering; Keras applies weight decay to the variables
    inside the wrapped optimizer, so it is not centered.

    Args:
        optimizer: the `keras.optimizers.Optimizer` to wrap.
        name: optional name.

    Example:

    ```python
    opt = boost.GradientCentralization(keras.optimizers.SGD(0.1, momentum=0.9))
    model.compile(optimizer=opt, loss="sparse_categorical_crossentropy")
    ```
    """

    def __init__(self, optimizer, name=None, **kwargs):
        super().__init__(optimizer, name=name or "gradient_centralization", **kwargs)
        self._gc_mask = None

    def _build_own(self, var_list):
        # The JAX stateless path sees values, not variables: keep the rule's
        # result per position of the build-time variable list.
        self._gc_mask = [should_centralize(v) for v in var_list]

    def _centralize(self, grads, mask):
        return [
            g if (g is None or not m or _is_sparse(g)) else centralize(g)
            for g, m in zip(grads, mask)
        ]

    def _mask_for(self, grads, trainable_variables):
        if trainable_variables is not None and all(
            isinstance(v, keras.Variable) for v in trainable_variables
        ):
            return [should_centralize(v) for v in trainable_variables]
        if self._gc_mask is None or len(self._gc_mask) != len(grads):
            raise ValueError(
                f"{self.name}: got {len(grads)} gradients but was built for "
                f"{0 if self._gc_mask is None else len(self._gc_mask)} variables."
            )
        return self._gc_mask

    def _apply(self, grads, trainable_variables):
        mask = self._mask_for(grads, trainable_variables)
        self.inner_optimizer.apply(self._centralize(grads, mask), trainable_variables)

    def _stateless_apply(self, own_variables, inner_variables, grads, trainable):
        mask = self._mask_for(grads, None)
        new_trainable, new_inner = self.inner_optimizer.stateless_apply(
            inner_variables, self._centralize(grads, mask), trainable
        )
        return new_trainable, list(own_variables), list(new_inner)
