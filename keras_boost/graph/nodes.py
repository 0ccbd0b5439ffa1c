"""The layer calls of a functional model's graph, walked back from its outputs.

LessBN's pattern matcher, prefix caching's split and gradient
centralization's gate finder all read a functional graph the same way: from
each output tensor back through the call (node) that produced it, stopping at
the model's inputs. This module is that walk, once.
"""

from keras_boost import keras_private

__all__ = ["producer", "topological_nodes"]


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
