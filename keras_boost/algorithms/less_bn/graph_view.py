"""A read-only view of one model's layer graph, for LessBN's matcher and head finder.

`LayerGraph` gives the same walk over a Functional model's layer calls and
a Sequential model's layers; `all_bns` lists the BatchNormalization layers
of a model and its nested sub-models.
"""

import keras

from keras_boost import keras_private
from keras_boost.algorithms.less_bn import patterns as patterns_lib
from keras_boost.graph import producer
from keras_boost.graph import topological_nodes

__all__ = ["LayerGraph", "all_bns", "has_graph", "sub_models"]


class LayerGraph:
    """Read-only view of one model's graph: layer calls and their producers."""

    def __init__(self, model):
        self.model = model
        self.is_sequential = isinstance(model, keras.Sequential)
        if self.is_sequential:
            self.calls = [(layer, (i - 1,) if i else ()) for i, layer in enumerate(model.layers)]
        else:
            self._input_ids = {id(t) for t in model.inputs}
            self.calls = [
                (node, [producer(t, self._input_ids) for t in node.arguments.keras_tensors])
                for node in topological_nodes(model)
            ]
            self._by_id = {id(node): (node, parents) for node, parents in self.calls}

    def layer(self, call):
        return self.calls[call][0] if self.is_sequential else call.operation

    def items(self):
        """(call, layer) for every layer call of the graph."""
        if self.is_sequential:
            return [(i, layer) for i, (layer, _) in enumerate(self.calls)]
        return [(node, node.operation) for node, _ in self.calls]

    def inputs(self, call):
        """Producers of the call's inputs, in order (None: a model input)."""
        if self.is_sequential:
            parents = self.calls[call][1]
            return list(parents) if parents else [None]
        return self._by_id[id(call)][1]

    def output_operations(self):
        """The operation producing each model output, in order (None: an input)."""
        if self.is_sequential:
            return [self.model.layers[-1]]
        return [getattr(producer(t, self._input_ids), "operation", None) for t in self.model.outputs]

    def skip_transparent(self, call):
        while call is not None and isinstance(self.layer(call), patterns_lib.TRANSPARENT_CLASSES):
            inputs = self.inputs(call)
            call = inputs[0] if inputs else None
        return call


def has_graph(layer):
    """Whether `layer` is a Functional or Sequential model (a graph to match)."""
    return keras_private.is_functional(layer) or isinstance(layer, keras.Sequential)


def sub_models(model):
    """The nested Functional or Sequential models among `model`'s layers."""
    return [layer for layer in model.layers if has_graph(layer)]


def all_bns(model, frozen=False, seen=None):
    """`(bn, frozen)` for every BatchNormalization of the model and its
    sub-models, once each; `frozen`: a model enclosing it has
    `trainable=False`."""
    frozen = frozen or not model.trainable
    seen = set() if seen is None else seen
    bns = []
    for layer in model.layers:
        if id(layer) in seen:
            continue
        seen.add(id(layer))
        if isinstance(layer, keras.layers.BatchNormalization):
            bns.append((layer, frozen))
        elif has_graph(layer):
            bns.extend(all_bns(layer, frozen, seen))
    return bns
