"""The layer calls of a functional model's graph, walked back from its outputs.

LessBN's pattern matcher, prefix caching's split and gradient
centralization's gate finder all read a functional graph the same way: from
each output tensor back through the call (node) that produced it, stopping at
the model's inputs. This module is that walk, once.
"""

import keras

from keras_boost import keras_private

__all__ = ["layers_shared_with_nested_models", "producer", "topological_nodes"]


def producer(tensor, input_ids=frozenset()):
    """The layer call (node) that produced the symbolic `tensor`, or None
    where the walk stops: an `Input`, a tensor without history, or a tensor
    whose `id` is in `input_ids` (the model's inputs, which may be the
    outputs of layers outside the model)."""
    if id(tensor) in input_ids:
        return None
    node = keras_private.inbound_node(tensor)
    return None if node is None or node.is_input else node


def topological_nodes(model):
    """Every layer call of functional `model`'s own graph (nested models are
    one call each), each after the calls that produce its inputs.

    Example:

    ```python
    inputs = keras.Input((4,))
    h = keras.layers.Dense(4, name="a")(inputs)
    model = keras.Model(inputs, keras.layers.Dense(1, name="b")(h + inputs))
    [node.operation.name for node in topological_nodes(model)]   # ['a', 'add', 'b']
    ```
    """
    input_ids = {id(t) for t in model.inputs}
    order, seen = [], set()
    stack = [(producer(t, input_ids), False) for t in reversed(model.outputs)]
    while stack:
        node, expanded = stack.pop()
        if node is None:
            continue
        if expanded:
            order.append(node)
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.append((node, True))
        stack.extend((producer(t, input_ids), False) for t in reversed(node.arguments.keras_tensors))
    return order


def layers_shared_with_nested_models(model):
    """The layers `model`'s own graph calls that are also layers of a model
    nested in it. Keras' functional config saves such a layer twice and
    loads two independent layers, so a copy of `model`'s graph cannot be
    saved and loaded; keras-hub's causal LMs do this (the logits reuse the
    backbone's token embedding), and their own config rebuilds the sharing.

    Example:

    ```python
    embedding = keras.layers.Embedding(10, 4)
    inner_in = keras.Input((3,), dtype="int32")
    inner = keras.Model(inner_in, embedding(inner_in))
    inputs = keras.Input((3,), dtype="int32")
    model = keras.Model(inputs, inner(inputs) + embedding(inputs))
    layers_shared_with_nested_models(model)   # [embedding]
    ```
    """
    nested = [layer for layer in model.layers if isinstance(layer, keras.Model)]
    inside = {id(l) for m in nested for l in keras_private.flatten_layers(m, include_self=False)}
    # Inputs are shared by design: a task model calls its backbone on the backbone's own inputs.
    return [layer for layer in model.layers if id(layer) in inside and not isinstance(layer, keras.layers.InputLayer)]
