"""`LessBN`: remove the BatchNormalization layers MindSpore's LessBN pass removes.

One matcher (`find_less_bn`) walks a model's graph from every root layer call
and tries the patterns of `keras_boost.surgery.patterns` in order; the BNs
of the first full match go. `LessBN` then rebuilds the model without them
(Functional: `keras.models.clone_model` with a `call_function` that skips
the removed BNs; Sequential: the layer list without them). Every other layer
is a fresh copy (`from_config(get_config())`) carrying the original's
weights, so the input model is never mutated and training the new model
never touches it. A layer that cannot be copied that way raises a
`TypeError` naming it, before anything is returned. When nothing is removed
and no head is swapped, no copy is made: the model itself is returned.

Differences from MindSpore, on purpose:

- the BNs are removed from the model (MindSpore keeps their parameters,
  frozen at their initial values); the rest of the math is the same: BN(x)
  becomes x;
- a BN layer shared by several calls goes only if every one of its calls
  matched;
- nested Functional/Sequential sub-models are matched on their own graphs
  (a pattern does not cross a sub-model boundary);
- `fn_flag` swaps only a last Dense with no (linear) or a softmax
  activation, and starts the head's scale at `head_scale(dense)` instead of
  MindSpore's 1 (measured: docs/methods/less_bn.md).
"""

import dataclasses
import itertools
import warnings

import keras
from keras.src.models.functional import Functional

from keras_boost.errors import NoEffectWarning
from keras_boost.validation import check_model
from keras_boost.layers.normalized_dense import NormalizedDense
from keras_boost.layers.normalized_dense import matched_scale
from keras_boost.surgery import patterns as patterns_lib
from keras_boost.surgery.rebuild import rebuild

REPORT_ATTR = "less_bn_report"


# --- graph view ---------------------------------------------------------------


class _Graph:
    """Read-only view of one model's graph: layer calls and their producers."""

    def __init__(self, model):
        self.model = model
        self.is_sequential = isinstance(model, keras.Sequential)
        if self.is_sequential:
            self.calls = [(layer, (i - 1,) if i else ()) for i, layer in enumerate(model.layers)]
        else:
            self._input_ids = {id(t) for t in model.inputs}
            self.calls = []
            self._index = {}
            for tensor in model.outputs:
                self._visit(self._node_of(tensor))

    # Functional graphs are walked back from the outputs through
    # `KerasTensor._keras_history`, stopping at the model's inputs.
    def _node_of(self, tensor):
        if id(tensor) in self._input_ids:
            return None
        history = getattr(tensor, "_keras_history", None)
        if history is None or history.operation is None:
            return None
        node = history.operation._inbound_nodes[history.node_index]
        return None if node.is_input else node

    def _visit(self, node):
        stack = [node]
        while stack:
            node = stack.pop()
            if node is None or id(node) in self._index:
                continue
            self._index[id(node)] = None
            parents = [self._node_of(t) for t in node.arguments.keras_tensors]
            self.calls.append((node, parents))
            stack.extend(parents)
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

    def skip_transparent(self, call):
        while call is not None and isinstance(self.layer(call), patterns_lib.TRANSPARENT_CLASSES):
            inputs = self.inputs(call)
            call = inputs[0] if inputs else None
        return call


# --- matcher -------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class RemovedBN:
    """A BatchNormalization removed by LessBN, with the pattern that matched."""

    layer: str
    pattern: str
    root: str
    model: str


@dataclasses.dataclass(frozen=True)
class LessBNReport:
    """What LessBN removed from a model (print it, or read the fields).

    Attributes:
        model: name of the model.
        num_bn: BatchNormalization layers in the model (sub-models included).
        removed: tuple of `RemovedBN` (layer name, pattern, root layer).
        kept: names of the BatchNormalization layers that stay.
        head: `"old Dense -> NormalizedDense (..., initial scale s)"` when
            `fn_flag` replaced a head, else None.
        notes: tuple of notes (shared BNs kept, head not replaced, ...).

    Example:

    ```python
    new = boost.LessBN(model)
    print(new.less_bn_report)      # one line per removed BN
    new.less_bn_report.removed_names
    ```
    """

    model: str
    num_bn: int
    removed: tuple
    kept: tuple
    head: object = None
    notes: tuple = ()

    @property
    def removed_names(self):
        return [r.layer for r in self.removed]

    @property
    def num_removed(self):
        return len(self.removed)

    def __str__(self):
        lines = [
            f"LessBN on {self.model!r}: removed {self.num_removed} of {self.num_bn} "
            f"BatchNormalization layers."
        ]
        by_pattern = {}
        for r in self.removed:
            by_pattern.setdefault(r.pattern, []).append(r)
        for pattern, removed in by_pattern.items():
            lines.append(f"  {pattern} ({len(removed)}):")
            lines.extend(f"    {r.layer}  (root {r.root})" for r in removed)
        if self.head:
            lines.append(f"  head: {self.head}")
        lines.extend(f"  note: {n}" for n in self.notes)
        return "\n".join(lines)

    def summary(self, print_fn=print):
        """Prints `str(self)` with `print_fn`."""
        print_fn(str(self))


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


def _match_graph(graph, pattern_list):
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


def _sub_models(model):
    return [layer for layer in model.layers if isinstance(layer, (Functional, keras.Sequential))]


def _all_bns(model):
    bns = []
    for layer in model.layers:
        if isinstance(layer, keras.layers.BatchNormalization):
            bns.append(layer)
        elif isinstance(layer, (Functional, keras.Sequential)):
            bns.extend(_all_bns(layer))
    return bns


def _check_model(model):
    if isinstance(model, keras.Model) and not isinstance(model, (Functional, keras.Sequential)):
        raise TypeError(
            f"LessBN needs a Functional or Sequential model, got the subclassed model "
            f"{model.name!r} ({type(model).__name__}): its call() is Python code with no layer "
            "graph to match. Build the network with the functional API "
            "(keras.Input -> layers -> keras.Model(inputs, outputs)) and pass that, or drop "
            "the BatchNormalization layers in your own code."
        )
    check_model(model, where="LessBN's model")
    if isinstance(model, keras.Sequential) and not model.inputs:
        raise ValueError(
            f"Sequential model {model.name!r} has no input spec; start it with keras.Input(...)."
        )


def _find(model, pattern_list):
    """{id(bn layer): RemovedBN} over the model and its nested sub-models."""
    removed, notes = _match_graph(_Graph(model), pattern_list)
    for sub in _sub_models(model):
        sub_removed, sub_notes = _find(sub, pattern_list)
        removed.update(sub_removed)
        notes.extend(sub_notes)
    return removed, notes


# The head activations NormalizedDense can carry without changing what the
# output means: logits, or their softmax. Compared by identity, so a custom
# function that happens to be called "softmax" is not taken for Keras'.
_HEAD_ACTIVATIONS = (keras.activations.linear, keras.activations.softmax)


def _activation_name(layer):
    activation = keras.activations.serialize(layer.activation)
    return activation if isinstance(activation, str) else getattr(
        layer.activation, "__name__", repr(layer.activation))


def _find_head(model):
    """The Dense that `fn_flag` replaces, or (None, note).

    Only a plain `Dense` that produces a model output, is called once, and
    whose activation is linear or softmax: a cosine logit times a scale
    under sigmoid, ReLU, tanh, ... would change what the output means.
    """
    dense = [l for l in model.layers if isinstance(l, keras.layers.Dense)]
    if not dense:
        return None, "fn_flag: the model has no Dense layer; no head replaced."
    head = dense[-1]
    graph = _Graph(model)
    output_producers = set()
    if graph.is_sequential:
        output_producers.add(id(model.layers[-1]))
    else:
        for tensor in model.outputs:
            node = graph._node_of(tensor)
            if node is not None:
                output_producers.add(id(node.operation))
    if id(head) not in output_producers:
        return None, (
            f"fn_flag: the last Dense {head.name!r} does not produce a model output (other layers "
            "follow it); no head replaced. Put the Dense last (fold a following activation into "
            "it) to get a NormalizedDense head."
        )
    calls = [c for c, l in graph.items() if l is head]
    if len(calls) != 1:
        return None, f"fn_flag: the Dense {head.name!r} is called {len(calls)} times; no head replaced."
    if type(head) is not keras.layers.Dense:
        return None, f"fn_flag: {head.name!r} is a Dense subclass; no head replaced."
    if not any(head.activation is a for a in _HEAD_ACTIVATIONS):
        return None, (
            f"fn_flag: the head Dense {head.name!r} has the activation "
            f"{_activation_name(head)!r}; NormalizedDense replaces only a head with no "
            "(linear) or a softmax activation, because scaled cosine logits would change what a "
            f"{_activation_name(head)} output means. The Dense is kept."
        )
    return head, None


def head_scale(dense):
    """The initial scale LessBN gives the `NormalizedDense` replacing `dense`.

    `matched_scale(dense.kernel)` (`keras_boost.layers.normalized_dense`):
    the scale at which the new head's logits have the Dense's spread on
    isotropic inputs, `sqrt(d * mean_j ||w_j||**2)` (about 10.5 for a
    Glorot-initialized 64 -> 10 head). MindSpore starts at 1, which keeps
    every logit in [-1, 1] and stalls the first epochs; the measurement
    behind the rule is in docs/methods/less_bn.md.

    Example:

    ```python
    from keras_boost.surgery.less_bn import head_scale
    dense = keras.layers.Dense(10); dense.build((None, 64))
    head_scale(dense)   # about 10.5
    ```
    """
    return matched_scale(dense.kernel)


def _find_less_bn(model, patterns=None):
    _check_model(model)
    pattern_list = tuple(patterns_lib.PATTERNS if patterns is None else patterns)
    removed, notes = _find(model, pattern_list)
    all_bns = _all_bns(model)
    kept = tuple(b.name for b in all_bns if id(b) not in removed)
    order = {id(b): i for i, b in enumerate(all_bns)}
    removed_sorted = tuple(info for key, info in sorted(removed.items(), key=lambda kv: order.get(kv[0], 0)))
    return LessBNReport(model.name, len(all_bns), removed_sorted, kept, None, tuple(notes)), removed


def find_less_bn(model, patterns=None):
    """Dry run of LessBN: which BNs it would remove, without building anything.

    Args:
        model: a built Functional or Sequential `keras.Model`.
        patterns: the patterns to try, in order (default
            `keras_boost.surgery.patterns.PATTERNS`).

    Returns:
        A `LessBNReport` (its `head` is None: the head is not considered).

    Example:

    ```python
    report = boost.surgery.find_less_bn(keras.applications.ResNet50(
        weights=None, input_shape=(64, 64, 3), classes=10))
    report.num_removed, report.num_bn   # (36, 53)
    ```
    """
    return _find_less_bn(model, patterns)[0]


# --- rebuild ---------------------------------------------------------------------


_SWITCH_OFF = '{"boost": {"mode": "manual", "less_bn": false}}'


def _no_match(report):
    if not report.num_bn:
        return "it has no BatchNormalization layer"
    return (
        f"none of its {report.num_bn} BatchNormalization layers is in a ResNet, MobileNetV2 or "
        "DenseNet pattern (see keras_boost.surgery.patterns)"
    )


def LessBN(model, fn_flag=False):  # noqa: N802 (MindSpore's name)
    """Returns a copy of `model` without the BNs MindSpore's LessBN removes.

    The patterns (`keras_boost.surgery.patterns`) are MindSpore's: in ResNet
    bottlenecks bn1, bn2 and the projection-shortcut BN go (bn3 and the stem
    stay: 36 of the 53 BNs of ResNet-50); in ResNet-18/34 basic blocks bn1
    and the shortcut BN; in MobileNetV2 the expand-conv BNs and the BN of the
    last conv before global pooling; in DenseNet the first BN of each dense
    layer fed by a concatenation. A removed BN becomes the identity; every
    other layer is copied with its weights (the input model is not changed).

    With `fn_flag=True` the model's last `Dense` (it must produce a model
    output and have no (linear) or a softmax activation) is replaced by
    `keras_boost.layers.NormalizedDense`, initialized from its kernel (the
    bias is dropped) with the initial scale `head_scale(dense)` (the replaced
    Dense's logit spread; MindSpore's 1 stalls the first epochs). A head with
    another activation (sigmoid, ReLU, tanh, ...) is kept, with a note in the
    report and a `keras_boost.NoEffectWarning`.

    A model where no pattern matches (and no head is replaced) gets a
    `NoEffectWarning` and is returned as is. A head swap alone (no BN
    removed) is applied, with a `NoEffectWarning` saying so. What was
    removed is in the returned model's `less_bn_report` (a `LessBNReport`;
    print it).

    Args:
        model: a built Functional or Sequential `keras.Model` (subclassed
            models raise `TypeError`: they have no layer graph).
        fn_flag: also replace the last Dense by a `NormalizedDense` head.

    Returns:
        The new `keras.Model` (compiled from the original's compile config if
        the original was compiled).

    Raises:
        TypeError: a subclassed model; a bad `fn_flag`; a layer that cannot
            be re-created from its config (the error names it and says how
            to fix it; the input model is unchanged).

    Example:

    ```python
    import keras_boost as boost
    model = keras.applications.ResNet50(weights=None, input_shape=(64, 64, 3), classes=10)
    lean = boost.LessBN(model, fn_flag=True)
    print(lean.less_bn_report)   # removed 36 of 53 BatchNormalization layers ...
    lean.compile(optimizer=boost.GradientCentralization(keras.optimizers.SGD(0.1), model=lean),
                 loss="sparse_categorical_crossentropy")
    ```
    """
    if not isinstance(fn_flag, bool):
        raise TypeError(f"fn_flag must be True or False, got {fn_flag!r}.")
    report, removed = _find_less_bn(model)
    head, notes = None, list(report.notes)
    if fn_flag:
        head, note = _find_head(model)
        if note:
            notes.append(note)
            warnings.warn(f"LessBN on {model.name!r}: {note}", NoEffectWarning, stacklevel=2)
    if not removed and head is None:
        warnings.warn(
            f"LessBN found nothing to remove in {model.name!r}: {_no_match(report)}. The "
            "model is returned unchanged.",
            NoEffectWarning,
            stacklevel=2,
        )
        return model
    # Everything below works on copies: an error leaves `model` as it was.
    head_text = swap = None
    if head is not None:
        scale = head_scale(head)
        swap = (head, NormalizedDense.from_dense(head, initial_scale=scale))
        head_text = (
            f"Dense {head.name!r} -> NormalizedDense (kernel copied, bias dropped, initial "
            f"scale {scale:.3g} = matched_scale(kernel))"
        )
    replacements = {} if swap is None else {id(swap[0]): swap[1]}
    new = rebuild(model, "LessBN", removed, replacements, switch_off=_SWITCH_OFF)
    if not removed:
        notes.append("no BatchNormalization removed; only the head was replaced.")
        warnings.warn(
            f"LessBN on {model.name!r}: {_no_match(report)}, so none was removed; only the "
            f"head changed ({head_text}).",
            NoEffectWarning,
            stacklevel=2,
        )
    report = dataclasses.replace(report, head=head_text, notes=tuple(notes))
    setattr(new, REPORT_ATTR, report)
    return new
