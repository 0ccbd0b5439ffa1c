"""`LessBN`: remove the BatchNormalization layers MindSpore's LessBN pass removes.

One matcher (`find_less_bn`) walks a model's graph from every root layer call
and tries the patterns of `keras_boost.algorithms.less_bn.patterns` in order; the BNs
of the first full match go. `LessBN` then rebuilds the model without them
(`keras_boost.graph.rebuild`: Functional graphs with their operations,
masks, shared layers and nested models, or Sequential ones). Every other
layer is a fresh copy carrying the original's weights and trainable flags,
so the input model is never mutated and training the new model never
touches it. A layer that cannot be copied raises a `TypeError` naming it,
before anything is returned. When nothing is removed and no head is
swapped, no copy is made: the model itself is returned.

Differences from MindSpore, on purpose:

- the BNs are removed from the model (MindSpore keeps their parameters,
  frozen at their initial values); the rest of the math is the same: BN(x)
  becomes x;
- a BN layer shared by several calls goes only if every one of its calls
  matched;
- a BN that is frozen (`trainable=False`, on itself or on a model enclosing
  it) or was trained (its moving statistics left Keras' initial 0 and 1) is
  kept unless `remove_pretrained_bn=True`: it belongs to a pretrained part
  the user did not ask to rewrite;
- nested Functional/Sequential sub-models are matched on their own graphs
  (a pattern does not cross a sub-model boundary);
- `fn_flag` swaps only classification heads (a Dense producing a model
  output with softmax, or linear logits trained with a crossentropy loss),
  and starts the head's scale at `head_scale(dense)` instead of
  MindSpore's 1 (measured: docs/methods/less_bn.md).
"""

import dataclasses
import itertools
import warnings

import keras
import numpy as np

from keras_boost import keras_private
from keras_boost.algorithms.less_bn import patterns as patterns_lib
from keras_boost.algorithms.less_bn.normalized_dense import matched_scale
from keras_boost.algorithms.less_bn.normalized_dense import NormalizedDense
from keras_boost.errors import NoEffectWarning
from keras_boost.graph import producer
from keras_boost.graph import rebuild
from keras_boost.graph import topological_nodes
from keras_boost.validation import check_model

__all__ = [
    "find_less_bn",
    "head_scale",
    "less_bn_for_config",
    "LessBN",
    "LessBNReport",
    "patterns_without",
    "RemovedBN",
    "REPORT_ATTR",
]

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
        head: one `"old Dense -> NormalizedDense (...)"` line per head that
            `fn_flag` replaced (joined by "; "), else None.
        notes: tuple of notes (shared BNs kept, frozen or trained BNs kept,
            heads not replaced, ...).
        protected: names of the BNs a pattern matched that stay because they
            are frozen or trained (see `LessBN`'s `remove_pretrained_bn`).

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
    protected: tuple = ()

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


def _has_graph(layer):
    return keras_private.is_functional(layer) or isinstance(layer, keras.Sequential)


def _sub_models(model):
    return [layer for layer in model.layers if _has_graph(layer)]


def _all_bns(model, frozen=False, seen=None):
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
        elif _has_graph(layer):
            bns.extend(_all_bns(layer, frozen, seen))
    return bns


def _check_model(model):
    if isinstance(model, keras.Model) and not _has_graph(model):
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


# --- frozen and pretrained BNs -------------------------------------------------------

_OPT_IN = '{"less_bn": {"remove_pretrained_bn": true}}'

_KEPT_BECAUSE = {
    "frozen": "frozen (trainable=False on the layer or on a model enclosing it)",
    "trained": "trained (their moving statistics are no longer Keras' initial mean 0 and "
               "variance 1: pretrained or fitted weights)",
}


def _why_kept(bn, in_frozen_model):
    """`"frozen"`, `"trained"`, or None when LessBN may remove `bn`."""
    if in_frozen_model or not bn.trainable:
        return "frozen"
    mean = keras.ops.convert_to_numpy(bn.moving_mean)
    variance = keras.ops.convert_to_numpy(bn.moving_variance)
    if np.any(mean != 0) or np.any(variance != 1):
        return "trained"
    return None


def _kept_note(reason, names, shown=6):
    listed = ", ".join(repr(n) for n in names[:shown])
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return (
        f"{len(names)} BatchNormalization layer(s) in a pattern kept because they are "
        f"{_KEPT_BECAUSE[reason]}: {listed}{more}. LessBN does not rewrite frozen or pretrained "
        f"parts; pass remove_pretrained_bn=True (AutoBoost: {_OPT_IN}) to remove them too."
    )


# --- the head (fn_flag) ----------------------------------------------------------

_CLASSIFICATION_LOSSES = (
    keras.losses.CategoricalCrossentropy,
    keras.losses.SparseCategoricalCrossentropy,
    keras.losses.BinaryCrossentropy,
    keras.losses.CategoricalFocalCrossentropy,
    keras.losses.BinaryFocalCrossentropy,
)
_CLASSIFICATION_LOSS_FUNCTIONS = (
    keras.losses.categorical_crossentropy,
    keras.losses.sparse_categorical_crossentropy,
    keras.losses.binary_crossentropy,
    keras.losses.categorical_focal_crossentropy,
    keras.losses.binary_focal_crossentropy,
)


def _is_classification_loss(loss):
    """Whether `loss` (as given to `compile`) is of Keras' crossentropy family."""
    if isinstance(loss, str):
        try:
            loss = keras.losses.get(loss)
        except ValueError:
            return False
    return isinstance(loss, _CLASSIFICATION_LOSSES) or any(loss is f for f in _CLASSIFICATION_LOSS_FUNCTIONS)


def _output_loss(model, index):
    """The loss `model` was compiled with for its output `index`, or None."""
    loss = getattr(model, "loss", None) if model.compiled else None
    if isinstance(loss, dict):
        names = getattr(model, "output_names", None) or []
        return loss.get(names[index]) if index < len(names) else None
    if isinstance(loss, (list, tuple)):
        return loss[index] if index < len(loss) else None
    return loss


def _activation_name(layer):
    activation = keras.activations.serialize(layer.activation)
    return activation if isinstance(activation, str) else getattr(
        layer.activation, "__name__", repr(layer.activation))


def _loss_name(loss):
    return loss if isinstance(loss, str) else getattr(loss, "name", None) or getattr(
        loss, "__name__", type(loss).__name__)


def _judge_head(model, graph, index, dense):
    """`(swap, note)` for the Dense producing output `index`: whether it is a
    classification head `fn_flag` replaces, and a note for the report."""
    name = repr(dense.name)
    if type(dense) is not keras.layers.Dense:
        return False, f"fn_flag: {name} is a Dense subclass; no head replaced."
    calls = sum(1 for _, layer in graph.items() if layer is dense)
    if calls != 1:
        return False, f"fn_flag: the Dense {name} is called {calls} times; no head replaced."
    if not dense.trainable:
        return False, f"fn_flag: the head Dense {name} is frozen (trainable=False); it is kept."
    if not any(dense.activation is a for a in (keras.activations.softmax, keras.activations.linear)):
        return False, (
            f"fn_flag: the head Dense {name} has the activation {_activation_name(dense)!r}; "
            "NormalizedDense replaces only a head with no (linear) or a softmax activation, "
            f"because scaled cosine logits would change what a {_activation_name(dense)} output "
            "means. The Dense is kept."
        )
    if dense.units < 2:
        return False, (f"fn_flag: the head Dense {name} has 1 unit, not the >= 2 classes of a "
                       "classification head; it is kept.")
    if dense.activation is keras.activations.softmax:
        return True, None
    loss = _output_loss(model, index)
    if loss is not None:
        if _is_classification_loss(loss):
            return True, None
        return False, (
            f"fn_flag: the linear head Dense {name} is trained with {_loss_name(loss)!r}, not a "
            "classification (crossentropy) loss: it is taken for a regression output and kept."
        )
    if len(model.outputs) == 1:
        return True, (
            f"fn_flag: the linear head Dense {name} was taken for classification logits (the "
            "model is not compiled, so no loss says otherwise). If it is a regression output, "
            "compile the model with its loss before the surgery, or set fn_flag to false."
        )
    return False, (
        f"fn_flag: the linear head Dense {name} of this multi-output model has no "
        "classification loss (compile the model with a crossentropy loss for it to swap it); "
        "it is taken for a regression output and kept."
    )


def _find_heads(model):
    """The Dense heads `fn_flag` replaces, and the notes on the others."""
    graph = _Graph(model)
    heads, notes = [], []
    for index, operation in enumerate(graph.output_operations()):
        if isinstance(operation, keras.layers.Dense):
            swap, note = _judge_head(model, graph, index, operation)
            if swap and operation not in heads:
                heads.append(operation)
            if note:
                notes.append(note)
    if heads or notes:
        return heads, notes
    dense = [l for l in model.layers if isinstance(l, keras.layers.Dense)]
    if not dense:
        return [], ["fn_flag: the model has no Dense layer; no head replaced."]
    return [], [
        f"fn_flag: the last Dense {dense[-1].name!r} does not produce a model output (other "
        "layers follow it); no head replaced. Put the Dense last (fold a following activation "
        "into it) to get a NormalizedDense head."
    ]


def head_scale(dense):
    """The initial scale LessBN gives the `NormalizedDense` replacing `dense`.

    `matched_scale(dense.kernel)` (`keras_boost.algorithms.less_bn.normalized_dense`):
    the scale at which the new head's logits have the Dense's spread on
    isotropic inputs, `sqrt(d * mean_j ||w_j||**2)` (about 10.5 for a
    Glorot-initialized 64 -> 10 head). MindSpore starts at 1, which keeps
    every logit in [-1, 1] and stalls the first epochs; the measurement
    behind the rule is in docs/methods/less_bn.md.

    Example:

    ```python
    from keras_boost.algorithms.less_bn import head_scale
    dense = keras.layers.Dense(10); dense.build((None, 64))
    head_scale(dense)   # about 10.5
    ```
    """
    return matched_scale(dense.kernel)


def _swap_text(dense, scale):
    """The report's line for one head swap: what was kept, what dropped."""
    kept = ["kernel"] + [
        n for n in ("kernel_regularizer", "kernel_constraint", "activity_regularizer")
        if getattr(dense, n) is not None
    ]
    dropped = ["bias"] + [n for n in ("bias_regularizer", "bias_constraint") if getattr(dense, n) is not None]
    dropped = ", ".join(dropped) + " dropped" if dense.use_bias else "no bias to drop"
    return (
        f"Dense {dense.name!r} -> NormalizedDense ({', '.join(kept)} and dtype policy "
        f"{dense.dtype_policy.name!r} kept; {dropped}; initial scale {scale:.3g} = "
        "matched_scale(kernel))"
    )


# --- the dry run ---------------------------------------------------------------------


def _find_less_bn(model, patterns=None, remove_pretrained_bn=False):
    _check_model(model)
    pattern_list = tuple(patterns_lib.PATTERNS if patterns is None else patterns)
    matched, notes = _find(model, pattern_list)
    bns = _all_bns(model)
    removed, protected = {}, {}
    for bn, in_frozen_model in bns:
        if id(bn) in matched:
            reason = None if remove_pretrained_bn else _why_kept(bn, in_frozen_model)
            if reason:
                protected.setdefault(reason, []).append(bn.name)
            else:
                removed[id(bn)] = matched[id(bn)]
    notes.extend(_kept_note(reason, names) for reason, names in protected.items())
    report = LessBNReport(
        model.name, len(bns), tuple(removed.values()),
        kept=tuple(bn.name for bn, _ in bns if id(bn) not in removed),
        notes=tuple(notes),
        protected=tuple(itertools.chain.from_iterable(protected.values())),
    )
    return report, removed


def find_less_bn(model, patterns=None, remove_pretrained_bn=False):
    """Dry run of LessBN: which BNs it would remove, without building anything.

    Args:
        model: a built Functional or Sequential `keras.Model`.
        patterns: the patterns to try, in order (default
            `keras_boost.algorithms.less_bn.patterns.PATTERNS`).
        remove_pretrained_bn: as for `LessBN`.

    Returns:
        A `LessBNReport` (its `head` is None: the head is not considered).

    Example:

    ```python
    report = boost.surgery.find_less_bn(keras.applications.ResNet50(
        weights=None, input_shape=(64, 64, 3), classes=10))
    report.num_removed, report.num_bn   # (36, 53)
    ```
    """
    return _find_less_bn(model, patterns, remove_pretrained_bn)[0]


# --- rebuild ---------------------------------------------------------------------


_SWITCH_OFF = '{"boost": {"mode": "manual", "less_bn": false}}'
_HEAD_NEEDS_REMOVAL = (
    "fn_flag: no head replaced, because no BatchNormalization is removed: the NormalizedDense "
    "head compensates for removed BNs, and alone it slowed early training (ResNet50V2: 1.3-4.7x "
    "plain's loss; docs/methods/less_bn.md). boost.LessBN(model, fn_flag=True) swaps it anyway."
)


def _no_match(report):
    if not report.num_bn:
        return "it has no BatchNormalization layer"
    if report.protected:
        return (f"the {len(report.protected)} BatchNormalization layers in its patterns are frozen "
                "or trained, and LessBN keeps those")
    return (
        f"none of its {report.num_bn} BatchNormalization layers is in a ResNet, MobileNetV2 or "
        "DenseNet pattern (see keras_boost.algorithms.less_bn.patterns)"
    )


def LessBN(model, fn_flag=False, remove_pretrained_bn=False, exclude_patterns=()):  # noqa: N802 (MindSpore's name)
    """Returns a copy of `model` without the BNs MindSpore's LessBN removes.

    The patterns (`keras_boost.algorithms.less_bn.patterns`) are MindSpore's: in ResNet
    bottlenecks bn1, bn2 and the projection-shortcut BN go (bn3 and the stem
    stay: 36 of the 53 BNs of ResNet-50); in ResNet-18/34 basic blocks bn1
    and the shortcut BN; in MobileNetV2 the expand-conv BNs and the BN of the
    last conv before global pooling; in DenseNet the first BN of each dense
    layer fed by a concatenation. A removed BN becomes the identity; every
    other layer and operation of the graph is copied with its weights and
    trainable flags (the input model is not changed).

    A BN that is frozen (`trainable=False`, on itself or on a model enclosing
    it, as in a transfer-learning base) or was trained (its moving statistics
    are no longer Keras' initial mean 0 and variance 1) stays, with a note in
    the report, unless `remove_pretrained_bn=True`.

    With `fn_flag=True` every classification head is replaced by
    `keras_boost.layers.NormalizedDense`: a trainable `Dense` that produces a
    model output, is called once, has >= 2 units and a softmax activation, or
    no (linear) activation with a crossentropy loss for that output in the
    model's compile config (a single-output model that is not compiled counts
    as logits, with a note). It is initialized from the Dense's kernel,
    `kernel_regularizer`, `kernel_constraint`, `activity_regularizer` and
    dtype policy (the bias and its regularizer are dropped) with the initial
    scale `head_scale(dense)` (the replaced Dense's logit spread; MindSpore's
    1 stalls the first epochs). Any other Dense output (a regression output,
    a sigmoid, ReLU, tanh... head) is kept, with a note in the report; a
    `keras_boost.NoEffectWarning` when no head at all is replaced.

    A model where nothing is removed (and no head is replaced) gets a
    `NoEffectWarning` and is returned as is. A head swap alone (no BN
    removed) is applied, with a `NoEffectWarning` saying so (AutoBoost does
    not swap a head alone). What was removed and kept is in the returned
    model's `less_bn_report` (a `LessBNReport`; print it).

    Args:
        model: a built Functional or Sequential `keras.Model` (subclassed
            models raise `TypeError`: they have no layer graph).
        fn_flag: also replace the classification heads by `NormalizedDense`.
        remove_pretrained_bn: also remove the frozen and trained BNs that a
            pattern matches.
        exclude_patterns: names of patterns not to apply (see
            `keras_boost.algorithms.less_bn.patterns.PATTERNS`), e.g.
            `["InvertedResidual2"]` keeps MobileNetV2's last BN (`Conv_1_bn`).

    Returns:
        The new `keras.Model` (compiled from the original's compile config if
        the original was compiled).

    Raises:
        TypeError: a subclassed model; a bad `fn_flag`,
            `remove_pretrained_bn` or `exclude_patterns`; a layer that
            cannot be re-created from its config (the error names it and
            says how to fix it; the input model is unchanged).
        ValueError: an unknown pattern name in `exclude_patterns`.

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
    return _less_bn(model, fn_flag, remove_pretrained_bn, exclude_patterns, swap_head_alone=True)


def less_bn_for_config(model, section):
    """`LessBN` as `AutoBoost` applies it, from a resolved `less_bn` config section.

    The same surgery, except that the head is swapped only where LessBN
    removes BNs: the normalized head compensates for the removed BNs, and
    alone it slows early training (measured in docs/methods/less_bn.md).

    Example:

    ```python
    from keras_boost.algorithms.less_bn import less_bn_for_config
    new = less_bn_for_config(model, boost.AutoBoost("O1").config["less_bn"])
    ```
    """
    return _less_bn(model, section["fn_flag"], section["remove_pretrained_bn"], section["exclude_patterns"],
                    swap_head_alone=False)


def patterns_without(exclude_patterns):
    """`PATTERNS` without the named ones; unknown names raise `ValueError`.

    Example:

    ```python
    [p.name for p in patterns_without(["InvertedResidual2"])]   # 15 of the 16
    ```
    """
    if isinstance(exclude_patterns, str):
        exclude_patterns = [exclude_patterns]
    if not isinstance(exclude_patterns, (list, tuple, set, frozenset)):
        raise TypeError(f"exclude_patterns must be a list of pattern names, got {exclude_patterns!r}.")
    valid = [p.name for p in patterns_lib.PATTERNS]
    unknown = sorted(str(n) for n in exclude_patterns if n not in valid)
    if unknown:
        raise ValueError(f"Unknown LessBN pattern(s) {unknown} in exclude_patterns. Valid patterns: {valid}.")
    return tuple(p for p in patterns_lib.PATTERNS if p.name not in exclude_patterns)


def _less_bn(model, fn_flag, remove_pretrained_bn, exclude_patterns, swap_head_alone):
    for name, value in (("fn_flag", fn_flag), ("remove_pretrained_bn", remove_pretrained_bn)):
        if not isinstance(value, bool):
            raise TypeError(f"{name} must be True or False, got {value!r}.")
    report, removed = _find_less_bn(model, patterns_without(exclude_patterns),
                                    remove_pretrained_bn=remove_pretrained_bn)
    heads, head_notes = [], []
    if fn_flag and (removed or swap_head_alone):
        heads, head_notes = _find_heads(model)
    elif fn_flag:
        head_notes = [_HEAD_NEEDS_REMOVAL]
    notes = list(report.notes) + head_notes
    if not removed and not heads:
        warnings.warn(
            f"LessBN found nothing to remove in {model.name!r}: {_no_match(report)}. The "
            "model is returned unchanged." + "".join(f" Note: {n}" for n in notes),
            NoEffectWarning,
            stacklevel=3,
        )
        return model
    if fn_flag and not heads:
        warnings.warn(f"LessBN on {model.name!r}: no head replaced. " + " ".join(head_notes),
                      NoEffectWarning, stacklevel=3)
    # Everything below works on copies: an error leaves `model` as it was.
    scales = {id(dense): head_scale(dense) for dense in heads}
    replacements = {
        id(dense): NormalizedDense.from_dense(dense, initial_scale=scales[id(dense)]) for dense in heads
    }
    new = rebuild(model, "LessBN", removed, replacements, switch_off=_SWITCH_OFF)
    head_text = "; ".join(_swap_text(dense, scales[id(dense)]) for dense in heads) or None
    if not removed:
        notes.append("no BatchNormalization removed; only the head was replaced.")
        warnings.warn(
            f"LessBN on {model.name!r}: {_no_match(report)}, so none was removed; only the "
            f"head changed ({head_text}).",
            NoEffectWarning,
            stacklevel=3,
        )
    setattr(new, REPORT_ATTR, dataclasses.replace(report, head=head_text, notes=tuple(notes)))
    return new
