"""Squeeze-excite gates in a layer graph: the kernels GC leaves alone.

A squeeze-excite block (EfficientNet, EfficientNetV2, MobileNetV3) pools a
feature map to one vector per channel, passes it through one or two small
convolutions or dense layers and multiplies the feature map by the result
(a sigmoid gate). Those kernels feed no normalization: centering their
gradients pins each gate's weight sum at its initial value, and on
EfficientNetB0 that cost O1 2.6 to 6.5 points of accuracy
(`docs/methods/centralization.md`).
"""

import keras

from keras_boost import keras_private
from keras_boost.graph import producer
from keras_boost.graph import topological_nodes

__all__ = ["squeeze_excite_kernels"]

_POOLING = (
    keras.layers.GlobalAveragePooling1D,
    keras.layers.GlobalAveragePooling2D,
    keras.layers.GlobalAveragePooling3D,
    keras.layers.GlobalMaxPooling1D,
    keras.layers.GlobalMaxPooling2D,
    keras.layers.GlobalMaxPooling3D,
)
# A gate branch is short: pooling, reshape, two kernels, activations.
_MAX_BRANCH_LENGTH = 8


def _gate_branch(tensor):
    """The layers from a global pooling to `tensor` through single-input
    calls, or None when `tensor` is not such a branch's output."""
    layers = []
    node = producer(tensor)
    while node is not None and len(layers) < _MAX_BRANCH_LENGTH:
        layers.append(node.operation)
        if isinstance(node.operation, _POOLING):
            return layers
        inputs = node.arguments.keras_tensors
        if len(inputs) != 1:
            return None
        node = producer(inputs[0])
    return None


def squeeze_excite_kernels(model):
    """The kernels of the squeeze-excite gates in `model` (sub-models too).

    A gate is a branch of single-input layer calls from a global pooling
    layer into a `Multiply`; the `kernel` of every layer on it is returned.
    Sequential and subclassed models have no such branch to read: none.

    Example:

    ```python
    model = keras.applications.EfficientNetB0(weights=None)
    len(squeeze_excite_kernels(model))   # 32: 16 blocks, reduce and expand
    ```
    """
    kernels = {}
    for layer in keras_private.flatten_layers(model, include_self=True, recursive=True):
        if not keras_private.is_functional(layer):
            continue
        for node in topological_nodes(layer):
            if not isinstance(node.operation, keras.layers.Multiply):
                continue
            for tensor in node.arguments.keras_tensors:
                for gate_layer in _gate_branch(tensor) or ():
                    kernel = keras_private.layer_raw_variable(gate_layer, "kernel")
                    if kernel is not None:
                        kernels[id(kernel)] = kernel
    return list(kernels.values())
