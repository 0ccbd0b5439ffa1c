"""Splitting a model into its frozen prefix and the trainable rest.

`split_frozen_prefix(model)` walks the model's functional graph, opening the
nested Functional and Sequential models it calls (keras-io's transfer
learning calls a whole `keras.applications` base as one layer), so that the
split may cut inside a partly unfrozen base. Walking from the inputs, an
operation belongs to the prefix when all its inputs come from the prefix and
it may be cached (`keras_boost.algorithms.prefix_cache.rules`: no trainable
weight, no randomness, the same in training and inference). The tensors that
cross from the prefix to the rest (or are outputs) are the cut.

Both halves are new functional models over the original layer objects: the
prefix maps the model's inputs to the cut, the suffix maps the cut to the
model's outputs (same structure and `output_names`). No layer is copied:
training the suffix trains the model's own variables. Calling the layers
anew gives them new call nodes, as a layer shared by two models has; the
model's own graph, config and weights are unchanged.

Not opened (the nested model is then one operation, cached whole when it is
entirely frozen and deterministic, else trained whole): a sub-model whose
class overrides `call`, one called with a dict, a mask or other keyword
arguments, or on tensors whose dtype or rank its inputs would convert.
"""

import dataclasses

import keras

from keras_boost import keras_private
from keras_boost.algorithms.prefix_cache.rules import uncacheable_reason
from keras_boost.graph import topological_nodes
from keras_boost.validation import check_model

__all__ = ["CachedSuffix", "PrefixReport", "PrefixSplit", "frozen_prefix_report", "split_frozen_prefix"]

_MASK_REASON = "its output carries a Keras mask, which cached features would not keep"


@dataclasses.dataclass(frozen=True)
class PrefixReport:
    """What `split_frozen_prefix` found.

    Attributes:
        model: the model's name.
        cut: the names of the cut tensors (the suffix's inputs), in order.
        cached_layers: the layers (and operations) of the prefix, computed
            once per example; a nested model's layers are named
            `"<model>/<layer>"`.
        stops: `(layer, reason)` for each operation that all of whose inputs
            were cached but which could not be: where the prefix ends.
        unopened: `(model, reason)` for each nested model kept as one
            operation.
        features_per_example: how many numbers the cached features of one
            example hold (their memory: this times the dtype's bytes).
        frozen_layers: the prefix's frozen layers (`trainable=False`,
            holding weights), the compute that caching saves; a prefix of
            weightless or preprocessing layers alone (padding, rescaling)
            has none.
    """

    model: str
    cut: tuple = ()
    cached_layers: tuple = ()
    stops: tuple = ()
    unopened: tuple = ()
    features_per_example: int = 0
    frozen_layers: tuple = ()

    @property
    def empty(self):
        """True when nothing can be cached (the cut is the raw inputs)."""
        return not self.cached_layers

    def __str__(self):
        if self.empty:
            lines = [f"prefix cache on {self.model!r}: nothing to cache"]
        else:
            lines = [
                f"prefix cache on {self.model!r}: {len(self.cached_layers)} operations cached, "
                f"cut at {list(self.cut)} ({self.features_per_example} numbers per example)"
            ]
        lines += [f"  stops at {name!r}: {reason}" for name, reason in self.stops]
        lines += [f"  not opened: {name!r}: {reason}" for name, reason in self.unopened]
        return "\n".join(lines)


@dataclasses.dataclass(frozen=True)
class PrefixSplit:
    """A model split by `split_frozen_prefix`.

    `suffix(prefix(x))` equals `model(x)` in training and in inference.

    Attributes:
        prefix: `keras.Model` from the model's inputs to the cut tensors
            that it computes (None when nothing is cached).
        suffix: `CachedSuffix` from the cut tensors to the model's outputs.
        cut_names: the suffix's input names, in order.
        report: a `PrefixReport`.
        raw_inputs: for each cut tensor, the index of the model input it is
            (a raw input passed through, not computed by the prefix), or
            None (the prefix's next output).
    """

    prefix: object
    suffix: object
    cut_names: tuple
    report: PrefixReport
    raw_inputs: tuple = ()

    def features(self, x, batch_size=None, verbose=0):
        """The suffix's inputs for the model inputs `x` (arrays), computed
        with `prefix.predict`: one array per cut tensor (the array itself
        when the cut is one tensor, else a list in `cut_names` order).

        Example:

        ```python
        split = split_frozen_prefix(model)
        features = split.features(x_train, batch_size=256)
        split.suffix.predict(features)  # == model.predict(x_train)
        ```
        """
        flat = _flat_inputs(x, self.suffix.owner_input_names)
        computed = []
        if self.prefix is not None:
            out = self.prefix.predict(_single(flat), batch_size=batch_size, verbose=verbose)
            computed = list(out) if isinstance(out, (list, tuple)) else [out]
        computed = iter(computed)
        return _single([flat[i] if i is not None else next(computed) for i in self.raw_inputs])


class CachedSuffix(keras_private.Functional):
    """The trainable rest of a model, from its cut tensors to its outputs.

    A functional model over the original model's layers, with two changes
    that let it train in the original model's place:

    - `trainable_variables` and `trainable_weights` are the original
      model's, in its order (JAX's optimizer maps its built variables to the
      trained ones by position: an optimizer built for the model then works
      for the suffix, and stays right for the model);
    - `save`, `save_weights` and `load_weights` act on the original model,
      so that `ModelCheckpoint` and `BackupAndRestore` save (and restore)
      the model the user holds, not the suffix.

    Example:

    ```python
    split = split_frozen_prefix(model)
    split.suffix.owner is model  # True
    ```
    """

    def __init__(self, inputs, outputs, owner=None, name=None, **kwargs):
        super().__init__(inputs, outputs, name=name, **kwargs)
        self._set_owner(owner)
        self.owner_input_names = _input_names(owner) if owner is not None else []

    @keras_private.no_automatic_dependency_tracking
    def _set_owner(self, owner):
        # Untracked: Keras would make the model a sublayer of the suffix and
        # count all its weights (the prefix's too) as the suffix's.
        self._owner_box = [owner] if owner is not None else []

    @property
    def owner(self):
        """The model this suffix trains, or None."""
        box = getattr(self, "_owner_box", None)
        return box[0] if box else None

    @property
    def trainable_variables(self):
        owner = self.owner
        return super().trainable_variables if owner is None else owner.trainable_variables

    @property
    def trainable_weights(self):
        owner = self.owner
        return super().trainable_weights if owner is None else owner.trainable_weights

    def save(self, *args, **kwargs):
        owner = self.owner
        return super().save(*args, **kwargs) if owner is None else owner.save(*args, **kwargs)

    def save_weights(self, *args, **kwargs):
        owner = self.owner
        return super().save_weights(*args, **kwargs) if owner is None else owner.save_weights(*args, **kwargs)

    def load_weights(self, *args, **kwargs):
        owner = self.owner
        return super().load_weights(*args, **kwargs) if owner is None else owner.load_weights(*args, **kwargs)


def split_frozen_prefix(model, deterministic=()):
    """Splits `model` into its frozen prefix and the trainable rest.

    Args:
        model: a built functional or Sequential `keras.Model`.
        deterministic: layer names or classes to treat as acting the same in
            training and inference although keras_boost cannot tell (a
            custom layer whose `call` takes `training`).

    Returns:
        A `PrefixSplit`. When nothing can be cached, its `report.empty` is
        True, its `prefix` is None and its suffix is the whole model over
        its raw inputs.

    Raises:
        TypeError: `model` is not a keras.Model, or a subclassed one (no
            graph to split), or a functional model whose class overrides
            `call`.

    Example:

    ```python
    base = keras.applications.MobileNetV2(include_top=False, pooling="avg")
    base.trainable = False
    inputs = keras.Input((224, 224, 3))
    outputs = keras.layers.Dense(10)(base(inputs, training=False))
    model = keras.Model(inputs, outputs)
    split = split_frozen_prefix(model)
    print(split.report)  # cut at ['mobilenetv2_1.00_224'] ...
    ```
    """
    graph, prefix_ids, stops = _analysed(model, deterministic)
    return _build(model, graph, prefix_ids, stops)


def frozen_prefix_report(model, deterministic=()):
    """What `split_frozen_prefix(model).report` says, without building the
    two halves (no layer is called; cheap enough to ask before every `fit`).

    Args and raises: as `split_frozen_prefix`.

    Returns:
        A `PrefixReport`.

    Example:

    ```python
    report = frozen_prefix_report(model)
    report.empty, report.features_per_example
    ```
    """
    graph, prefix_ids, stops = _analysed(model, deterministic)
    cut, names, _ = _cut(model, graph, prefix_ids)
    return _report(model, graph, prefix_ids, stops, cut, names)


def _analysed(model, deterministic):
    check_model(model)
    reason = _opening_reason(model)
    if reason is not None:
        raise TypeError(
            f"split_frozen_prefix needs a functional or Sequential model (a graph of layers to "
            f"split); {type(model).__name__} {model.name!r} cannot be split: "
            f"{reason or 'it is a subclassed model, with no graph of layers'}."
        )
    graph = _FlatGraph(model)
    prefix_ids, stops = _analyse(graph, deterministic)
    return graph, prefix_ids, stops


# --- the flattened graph -------------------------------------------------------


class _FlatNode:
    """One call of one operation in the flattened graph."""

    __slots__ = ("operation", "node", "names", "inputs", "outputs", "context")

    def __init__(self, operation, node, names, inputs, outputs, context):
        self.operation = operation
        self.node = node  # the Keras node: its arguments are the call's
        self.names = names  # enclosing models' names, outermost first
        self.inputs = inputs  # keys of its input tensors, in `node.arguments.keras_tensors` order
        self.outputs = outputs  # keys of its outputs, in `node.outputs` order
        self.context = context  # call-context arguments set by enclosing model calls

    @property
    def name(self):
        return "/".join([*self.names, self.operation.name])


class _FlatGraph:
    """The model's graph with every openable nested model inlined.

    A tensor is keyed by `(path, id(tensor))`, where `path` is the tuple of
    ids of the nested-model call nodes around it (a sub-model called twice
    has two copies of its tensors). A sub-model's input and output tensors
    are aliases of the tensors of the calling graph.
    """

    def __init__(self, model):
        self.nodes = []
        self.unopened = []
        self.tensors = {}  # key -> the original KerasTensor (shape, dtype, mask)
        self._alias = {}
        self.input_keys = [self._own((), t) for t in model.inputs]
        self.output_keys = self._graph(model, (), (), self.input_keys, {})

    def key(self, path, tensor):
        key = (path, id(tensor))
        while key in self._alias:
            key = self._alias[key]
        return key

    def _own(self, path, tensor):
        key = (path, id(tensor))
        self.tensors[key] = tensor
        return key

    def _graph(self, model, path, names, input_keys, context):
        for tensor, key in zip(model.inputs, input_keys):
            if (path, id(tensor)) != key:
                self._alias[(path, id(tensor))] = key
        for node in topological_nodes(model):
            operation = node.operation
            reason = _opening_reason(operation, node)
            if reason is None:
                self._open(node, path, names, context)
                continue
            if _is_graph(operation):
                self.unopened.append(("/".join([*names, operation.name]), reason))
            self.nodes.append(_FlatNode(
                operation, node, names,
                [self.key(path, t) for t in node.arguments.keras_tensors],
                [self._own(path, t) for t in node.outputs],
                context,
            ))
        return [self.key(path, t) for t in model.outputs]

    def _open(self, node, path, names, context):
        sub = node.operation
        training = node.arguments.kwargs.get("training")
        if "training" not in context and training is not None:
            # What the sub-model's call passes down to its layers (an
            # enclosing call's value wins, as Keras' `operation_fn` does).
            context = {**context, "training": training}
        input_keys = [self.key(path, t) for t in node.arguments.keras_tensors]
        output_keys = self._graph(sub, path + (id(node),), names + (sub.name,), input_keys, context)
        for tensor, key in zip(node.outputs, output_keys):
            self._alias[(path, id(tensor))] = key


def _is_graph(model):
    return keras_private.is_functional(model) or isinstance(model, keras.Sequential)


def _is_graph_root(model):
    """The top-level model: functional or Sequential with Keras' own call."""
    if keras_private.is_functional(model):
        return type(model).call is keras_private.Functional.call
    return isinstance(model, keras.Sequential) and type(model).call is keras.Sequential.call


def _opening_reason(operation, node=None):
    """None when the nested model `operation`, called at `node`, can be
    inlined; else why not ("" for an operation that is not a model)."""
    if not _is_graph(operation):
        return ""
    if not _is_graph_root(operation):
        return "its class overrides `call`"
    try:
        inputs = operation.inputs
    except AttributeError:
        return "it has no defined inputs (a Sequential model without an Input)"
    if node is None:
        return None
    arguments = node.arguments
    if len(arguments.args) != 1 or set(arguments.kwargs) - {"training", "mask"}:
        return "it is called with arguments other than its inputs and `training`"
    if any(m is not None for m in keras.tree.flatten(arguments.kwargs.get("mask"))):
        return "it is called with an explicit `mask`"
    given = arguments.args[0]
    if isinstance(given, dict):
        return "it is called with a dict of inputs"
    tensors = arguments.keras_tensors
    if len(tensors) != len(inputs) or not (
        isinstance(given, keras.KerasTensor)
        or isinstance(given, (list, tuple)) and all(isinstance(t, keras.KerasTensor) for t in given)
    ):
        return "it is called on a structure other than its inputs"
    for outer, inner in zip(tensors, inputs):
        if outer.dtype != inner.dtype or len(outer.shape) != len(inner.shape):
            return "its inputs convert the dtype or rank of the tensors it is called on"
    return None


# --- which part is cached ------------------------------------------------------


def _analyse(graph, deterministic):
    """`(ids of the flat nodes of the prefix, stops)`: the prefix is grown
    from the inputs; a cut tensor carrying a mask sends its producer back to
    the suffix (and what depends on it), until no cut carries one."""
    reasons = {}
    for flat in graph.nodes:
        reason = uncacheable_reason(flat.operation, deterministic)
        if reason is not None:
            reasons[id(flat)] = reason
    while True:
        cached, prefix, stops = set(graph.input_keys), set(), []
        for flat in graph.nodes:
            if not all(k in cached for k in flat.inputs):
                continue
            if id(flat) in reasons:
                stops.append((flat.name, reasons[id(flat)]))
                continue
            prefix.add(id(flat))
            cached.update(flat.outputs)
        producers = {k: flat for flat in graph.nodes if id(flat) in prefix for k in flat.outputs}
        masked = [producers[k] for k in _cut_keys(graph, prefix, cached)
                  if k in producers and keras_private.keras_mask(graph.tensors[k]) is not None]
        if not masked:
            return prefix, stops
        for flat in masked:
            reasons[id(flat)] = _MASK_REASON


def _cut_keys(graph, prefix, cached):
    """The cached tensors the rest reads (or that are outputs), in the order
    the rest first reads them."""
    cut = {}
    for flat in graph.nodes:
        if id(flat) not in prefix:
            cut.update((k, None) for k in flat.inputs if k in cached)
    cut.update((k, None) for k in graph.output_keys if k in cached)
    return list(cut)


# --- building the two halves ---------------------------------------------------


def _cut(model, graph, prefix_ids):
    """`(cut keys, their names, the prefix's flat nodes)`."""
    cached = set(graph.input_keys)
    for flat in graph.nodes:
        if id(flat) in prefix_ids:
            cached.update(flat.outputs)
    cut = _cut_keys(graph, prefix_ids, cached)
    suffix_nodes = [f for f in graph.nodes if id(f) not in prefix_ids]
    prefix_nodes = [f for f in graph.nodes if id(f) in prefix_ids]
    return cut, _cut_names(graph, cut, prefix_nodes, suffix_nodes, model), prefix_nodes


def _report(model, graph, prefix_ids, stops, cut, names):
    computed = any(k not in graph.input_keys for k in cut)
    return PrefixReport(
        model=model.name,
        cut=tuple(names) if computed else (),
        cached_layers=tuple(f.name for f in graph.nodes if id(f) in prefix_ids),
        stops=tuple(stops),
        unopened=tuple(graph.unopened),
        features_per_example=sum(_size(graph.tensors[k]) for k in cut) if computed else 0,
        frozen_layers=tuple(f.name for f in graph.nodes if id(f) in prefix_ids and _is_frozen(f.operation)),
    )


def _is_frozen(operation):
    return isinstance(operation, keras.layers.Layer) and bool(operation.weights) and not operation.trainable


def _build(model, graph, prefix_ids, stops):
    cut, names, prefix_nodes = _cut(model, graph, prefix_ids)
    input_index = {k: i for i, k in enumerate(graph.input_keys)}
    suffix_nodes = [f for f in graph.nodes if id(f) not in prefix_ids]

    # The prefix: the model's inputs -> the cut tensors it computes.
    computed = [k for k in cut if k not in input_index]
    prefix = None
    if computed:
        values = {k: _new_input(graph.tensors[k]) for k in graph.input_keys}
        _trace(prefix_nodes, values)
        prefix = keras.Model(
            _single([values[k] for k in graph.input_keys]), _single([values[k] for k in computed]),
            name=f"{model.name}_prefix",
        )

    # The suffix: the cut -> the model's outputs, in their structure.
    values = {k: _new_input(graph.tensors[k], name) for k, name in zip(cut, names)}
    suffix_inputs = [values[k] for k in cut]
    _trace(suffix_nodes, values)
    flat_outputs = [values[k] for k in graph.output_keys]
    structure = model.output if keras_private.is_functional(model) else model.outputs[0]
    outputs = keras.tree.pack_sequence_as(structure, flat_outputs)
    suffix = CachedSuffix(_single(suffix_inputs), outputs, owner=model, name=f"{model.name}_suffix")
    if hasattr(model, "output_names"):  # Sequential has none
        suffix.output_names = list(model.output_names)

    return PrefixSplit(
        prefix=prefix,
        suffix=suffix,
        cut_names=tuple(names),
        report=_report(model, graph, prefix_ids, stops, cut, names),
        raw_inputs=tuple(input_index.get(k) for k in cut),
    )


def _trace(nodes, values):
    """Calls each flat node's operation on the new tensors of `values`
    (keys -> KerasTensors), in order, recording its outputs."""
    for flat in nodes:
        tensors = flat.node.arguments.keras_tensors
        args, kwargs = flat.node.arguments.fill_in({id(t): values[k] for t, k in zip(tensors, flat.inputs)})
        if "training" in flat.context and keras_private.call_has_training_arg(flat.operation):
            kwargs = {**kwargs, "training": flat.context["training"]}
        outputs = keras.tree.flatten(flat.operation(*args, **kwargs))
        values.update(zip(flat.outputs, outputs))


def _new_input(tensor, name=None):
    return keras.Input(batch_shape=tensor.shape, dtype=tensor.dtype, sparse=tensor.sparse, name=name)


def _cut_names(graph, cut, prefix_nodes, suffix_nodes, model):
    """Unique input names for the cut: the producing layer's name (or the
    model input's), distinct from the suffix's layer names."""
    producer = {}
    for flat in prefix_nodes:
        for i, key in enumerate(flat.outputs):
            suffix = f"_{i}" if len(flat.outputs) > 1 else ""
            producer[key] = flat.operation.name + suffix
    for key, name in zip(graph.input_keys, _input_names(model)):
        producer[key] = name
    taken = {f.operation.name for f in suffix_nodes}
    names = []
    for key in cut:
        base = producer[key]
        name, i = base, 1
        while name in taken:
            name, i = f"{base}_{i}", i + 1
        taken.add(name)
        names.append(name)
    return names


def _single(items):
    """One item as itself, several as a list (what a one-input model takes)."""
    return items[0] if len(items) == 1 else list(items)


def _input_names(model):
    """The names of `model`'s input layers (the keys of a dict `x`)."""
    return [keras_private.keras_history_operation(t).name for t in model.inputs]


def _size(tensor):
    size = 1
    for dim in tensor.shape[1:]:
        size *= dim if dim is not None else 1
    return size


def _flat_inputs(x, input_names):
    """`x` (an array, a list/tuple, or a dict keyed by input name) as a list
    in the model's input order."""
    if isinstance(x, dict):
        missing = [n for n in input_names if n not in x]
        if missing:
            raise ValueError(f"x is missing the model inputs {missing}; it has {sorted(x)}.")
        return [x[n] for n in input_names]
    if isinstance(x, (list, tuple)):
        if len(x) != len(input_names):
            raise ValueError(f"x has {len(x)} arrays; the model has {len(input_names)} inputs {input_names}.")
        return list(x)
    if len(input_names) != 1:
        raise ValueError(f"x is one array; the model has {len(input_names)} inputs {input_names}.")
    return [x]
