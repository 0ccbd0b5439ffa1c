"""LessBN's matcher: which BatchNormalization calls a pattern removes in a graph.

From every root layer call (an Add or Concatenate) each pattern's branches
are walked back through the producers, transparent layers skipped; the BNs
of the first full match go. A BN layer shared by several calls goes only if
all of them matched.
"""

import itertools

import keras

from keras_boost.algorithms.less_bn import patterns as patterns_lib
from keras_boost.algorithms.less_bn.graph_view import LayerGraph
from keras_boost.algorithms.less_bn.graph_view import sub_models
from keras_boost.algorithms.less_bn.report import RemovedBN

__all__ = ["match_graph", "match_model"]


def _match_branch(graph, start, branch):
    """Walks `branch` back from `start`; returns the matched calls or None."""
    matched = []
    call = graph.skip_transparent(start)
    for k, kind in enumerate(branch):
        if call is None or not patterns_lib.KINDS[kind](graph.layer(call)):
            return None
        matched.append((call, kind))
        if k + 1 < len(branch):
            inputs = graph.inputs(call)
            call = graph.skip_transparent(inputs[0]) if inputs else None
    return matched


def _match_pattern(graph, root_inputs, pattern):
    """The BN calls `pattern` removes at a root with these inputs, or None."""
    if len(root_inputs) < len(pattern.branches):
        return None
    for assignment in itertools.permutations(range(len(root_inputs)), len(pattern.branches)):
        removed = []
        for branch, i in zip(pattern.branches, assignment):
            matched = _match_branch(graph, root_inputs[i], branch)
            if matched is None:
                break
            removed.extend(c for c, kind in matched if kind == patterns_lib.REMOVED_BN)
        else:
            return removed
    return None


def match_graph(graph, pattern_list):
    """{id(bn layer): RemovedBN} for one graph, plus notes."""
    root_kinds = [patterns_lib.KINDS[k] for k in patterns_lib.ROOT_KINDS]
    hits = {}  # id(call) -> (call, RemovedBN)
    for call, layer in graph.items():
        if not any(pred(layer) for pred in root_kinds):
            continue
        root_inputs = graph.inputs(call)
        # MindSpore: the root's inputs must all be computed nodes.
        if not root_inputs or any(c is None for c in root_inputs):
            continue
        for pattern in pattern_list:
            removed = _match_pattern(graph, root_inputs, pattern)
            if removed is not None:
                for bn_call in removed:
                    hits.setdefault(
                        id(bn_call),
                        (bn_call, RemovedBN(graph.layer(bn_call).name, pattern.name, layer.name,
                                            graph.model.name)),
                    )
                break
    # A BN layer goes only if all of its calls in this graph matched.
    calls_per_layer = {}
    for call, layer in graph.items():
        if isinstance(layer, keras.layers.BatchNormalization):
            calls_per_layer.setdefault(id(layer), []).append(call)
    removed, notes = {}, []
    for call_id, (bn_call, info) in hits.items():
        layer = graph.layer(bn_call)
        calls = calls_per_layer[id(layer)]
        if all(id(c) in hits for c in calls):
            removed[id(layer)] = info
        elif id(layer) not in removed:
            notes.append(
                f"{layer.name!r} kept: it is shared by {len(calls)} calls and only some matched."
            )
    return removed, sorted(set(notes))


def match_model(model, pattern_list):
    """{id(bn layer): RemovedBN} over the model and its nested sub-models."""
    removed, notes = match_graph(LayerGraph(model), pattern_list)
    for sub in sub_models(model):
        sub_removed, sub_notes = match_model(sub, pattern_list)
        removed.update(sub_removed)
        notes.extend(sub_notes)
    return removed, notes
