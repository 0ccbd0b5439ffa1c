"""Which variables get orthogonalized updates, and as which matrix.

A route is the split index of a kernel's (fan-in x fan-out) view
(`newton_schulz.matrix_shape`), or 0 for a variable the wrapped optimizer
updates itself. Keras 3 variables do not know their layer, so the layer
types are read from the model when there is one (`routes_for_model`), and
from the variable paths otherwise (`route_by_name`).
"""

import re

import keras

from keras_boost import keras_private

__all__ = ["einsum_split", "route_by_name", "routes_for_model", "NOT_ROUTED"]

NOT_ROUTED = 0

# Keras' MultiHeadAttention names its EinsumDense projections so.
_ATTENTION_IN = ("query", "key", "value")
_ATTENTION_OUT = ("attention_output",)
_CONVOLUTIONS = (keras.layers.Conv1D, keras.layers.Conv2D, keras.layers.Conv3D)
_TRANSPOSED = (keras.layers.Conv1DTranspose, keras.layers.Conv2DTranspose, keras.layers.Conv3DTranspose)


def einsum_split(equation):
    """The split of an `EinsumDense` kernel from its equation: the number of
    leading kernel axes that are contracted with the input (the fan-in);
    0 when the kernel's axes are not fan-in axes followed by fan-out axes.

    Example:

    ```python
    einsum_split("abc,cde->abde")   # 1: a query projection (hidden, heads, head_dim)
    einsum_split("abcd,cde->abe")   # 2: the output projection (heads, head_dim, hidden)
    ```
    """
    try:
        lhs, _ = equation.replace(" ", "").split("->")
        inputs, kernel = lhs.split(",")
    except ValueError:
        return NOT_ROUTED
    if "." in kernel:
        return NOT_ROUTED
    fan_in = [c in inputs for c in kernel]
    split = fan_in.index(False) if False in fan_in else len(kernel)
    if split == 0 or split == len(kernel) or any(fan_in[split:]):
        return NOT_ROUTED
    return split


def _path(variable):
    return str(getattr(variable, "path", None) or getattr(variable, "name", ""))


def route_by_name(variable):
    """The route of a variable known by its path and shape only: 1 for a
    2-D variable whose name contains "kernel", Keras' MultiHeadAttention names for 3-D kernels (`query`,
    `key`, `value`: 1; `attention_output`: 2), else 0. Embeddings (a path
    containing "embedding") are left to `routes_for_model`'s callers.

    Example:

    ```python
    route_by_name(model.get_layer("mha").variables[0])   # 1 (query/kernel)
    ```
    """
    shape = tuple(variable.shape)
    parts = _path(variable).lower().split("/")
    if "kernel" not in parts[-1]:
        return NOT_ROUTED  # biases (2-D in attention), norm scales, raw weights
    if len(shape) == 2:
        return 1
    if len(shape) == 3 and len(parts) >= 2:
        if parts[-2] in _ATTENTION_IN:
            return 1
        if parts[-2] in _ATTENTION_OUT:
            return 2
    return NOT_ROUTED


def _layer_routes(model, conv_kernels):
    """`({id(kernel): split}, embedding ids, head kernel or None)` from the
    layer types of `model` (nested layers included)."""
    routes, embeddings, head = {}, set(), None
    for layer in keras_private.flatten_layers(model, include_self=True, recursive=True):
        if isinstance(layer, keras.layers.Embedding):
            embeddings.update(id(v) for v in keras_private.layer_own_variables(layer))
            continue
        kernel = keras_private.layer_raw_variable(layer, "kernel")
        known = isinstance(layer, (keras.layers.Dense, keras.layers.EinsumDense, *_CONVOLUTIONS))
        if known:  # its bias (2-D in attention) and LoRA factors stay with the optimizer
            routes.update((id(v), NOT_ROUTED) for v in keras_private.layer_own_variables(layer))
        if kernel is None:
            continue
        if isinstance(layer, keras.layers.Dense):
            routes[id(kernel)] = 1 if len(kernel.shape) == 2 else NOT_ROUTED
            head = kernel
        elif isinstance(layer, keras.layers.EinsumDense):
            routes[id(kernel)] = einsum_split(layer.equation)
            head = kernel
        elif isinstance(layer, _CONVOLUTIONS) and not isinstance(layer, _TRANSPOSED):
            grouped = getattr(layer, "groups", 1) != 1
            routes[id(kernel)] = len(kernel.shape) - 1 if conv_kernels and not grouped else NOT_ROUTED
        else:
            routes[id(kernel)] = NOT_ROUTED  # depthwise, separable, other kernels
    return routes, embeddings, head


def routes_for_model(var_list, model=None, exclude=(), exclude_embeddings=True, exclude_output=True,
                     conv_kernels=False):
    """The route of each variable of `var_list` (a list of split indices, 0
    for the wrapped optimizer).

    With `model`: Dense kernels (2-D) route as `(in, out)`; EinsumDense
    kernels by their equation (`einsum_split`: MultiHeadAttention's q/k/v
    and output kernels); convolution kernels (not depthwise, separable,
    grouped or transposed) as `(k*k*in, out)` when `conv_kernels`;
    `Embedding` variables and the last Dense/EinsumDense layer of the model
    (its output layer, when `exclude_output`) stay with the optimizer; a
    variable of another layer follows `route_by_name`. Without `model`:
    `route_by_name`, and the output layer is the last routed kernel of
    `var_list` (Keras lists a model's variables layer by layer).

    Always left to the optimizer: non-trainable variables and those Keras
    overwrites with their gradient, rank < 2, a path containing "embedding"
    (when `exclude_embeddings`) or matching a regex of `exclude`
    (`re.search` on `variable.path`).
    """
    exclude = [re.compile(p) for p in exclude]
    if model is not None:
        by_layer, embeddings, head = _layer_routes(model, conv_kernels)
    else:
        by_layer, embeddings, head = {}, set(), None
    routes = []
    for variable in var_list:
        path = _path(variable)
        if (
            len(variable.shape) < 2
            or not getattr(variable, "trainable", True)
            or getattr(variable, "overwrite_with_gradient", False)
            or (exclude_embeddings and (id(variable) in embeddings or "embedding" in path.lower()))
            or any(p.search(path) for p in exclude)
        ):
            routes.append(NOT_ROUTED)
        elif id(variable) in by_layer:
            routes.append(by_layer[id(variable)])
        else:
            routes.append(route_by_name(variable))
    if exclude_output:
        positions = [i for i, v in enumerate(var_list) if routes[i]]
        if model is not None:
            positions = [i for i in positions if var_list[i] is head]
        elif positions:
            positions = positions[-1:]
        for i in positions:
            routes[i] = NOT_ROUTED
    return routes
