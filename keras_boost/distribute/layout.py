"""`auto_layout`: a `keras.distribution.LayoutMap` for any Keras model.

Keras' `ModelParallel` shards the variables named by a `LayoutMap`, whose keys
are regexes over variable paths that one usually writes by hand. `auto_layout`
writes them: it walks the model's layers and shards the large kernels over the
mesh's model axis,

- Dense / EinsumDense layers in Megatron pairs (Shoeybi et al. 2019): in two
  consecutive layers where the first one's output width is the second one's
  input width (an MLP block), the first kernel is split on its output axis
  ("column parallel", its bias too) and the second on its input axis ("row
  parallel", bias replicated), so the hidden activation stays sharded between
  them; a Dense without a partner is split on its output axis;
- MultiHeadAttention: query / key / value on the heads axis (column), the
  output projection on its heads axis (row): one head group per device (on
  the head-size axis when the heads do not divide);
- Embedding: on the vocabulary axis (on the feature axis when the vocabulary
  does not divide);
- Conv1D/2D/3D (and transposed convolutions): on the output-channel axis.

These transformer patterns (embedding, attention, Megatron pairs) are split
whatever their size: their layouts pay off together, and a model axis asks for
them. Other kernels (convolutions, a Dense without a partner) smaller than
`min_size` elements stay replicated, as does any kernel whose dimensions do not
divide by the model-axis size; every decision (sharded or not, and why) is in
the returned map's `decisions` / `report()`, and a map that shards nothing
says so with a `NoEffectWarning`. Each key is the
variable's exact path (`re.escape`d, anchored), so no key matches another
variable. Any sharding gives the same math under XLA's SPMD partitioner; the
pairing only decides how much communication there is.

The decision logic (`decide`, `check_layout`) is pure Python over shapes: it
runs on every backend. Training with `ModelParallel` runs on JAX only (the
TensorFlow and torch backends of Keras 3.15 implement no variable sharding:
`keras.src.backend.torch` has no `distribution_lib`, TensorFlow's is a stub).

Example:

```python
import keras
import keras_boost as boost

model = build_model()                      # any built Keras model (a template)
mesh = keras.distribution.DeviceMesh((2, 4), ("batch", "model"))
layout_map = boost.distribute.auto_layout(model, mesh)
print(layout_map.report())                 # what is sharded, what is not, why
keras.distribution.set_distribution(
    keras.distribution.ModelParallel(layout_map=layout_map))
model = build_model()                      # same layer names: same paths
model.compile(...); model.fit(...)
```
"""

import dataclasses
import math
import re
import warnings

import keras

from keras_boost import keras_private
from keras_boost.errors import NoEffectWarning

__all__ = [
    "auto_layout",
    "AutoLayoutMap",
    "Candidate",
    "candidates",
    "check_layout",
    "decide",
    "DEFAULT_MIN_SIZE",
    "device_mesh",
    "mesh_sizes",
    "MODEL_AXIS",
    "path_key",
    "ShardDecision",
]

MODEL_AXIS = "model"
DEFAULT_MIN_SIZE = 1 << 16  # elements: 256 KiB of float32


@dataclasses.dataclass
class Candidate:
    """A variable that may be sharded on one axis (pure data: path and shape).

    `axis` is the axis the rule wants to split, `fallback` the axes to try
    next when it does not divide; `kind` names the rule ("column", "row",
    "embedding", "conv", "bias"); `pattern` marks a kernel of a transformer
    pattern (embedding, attention, Megatron pair), split whatever its size;
    `follows` is the path of the kernel a bias follows (the bias is split
    only when its kernel is).
    """

    path: str
    shape: tuple
    axis: int
    kind: str
    layer: str = ""
    follows: str = None
    fallback: tuple = ()
    pattern: bool = False


@dataclasses.dataclass
class ShardDecision:
    """What `auto_layout` did with one variable.

    `axes` is the layout (a tuple of mesh-axis names / None, one per
    dimension) or None when the variable stays replicated; `reason` says why.
    """

    path: str
    shape: tuple
    axes: tuple
    kind: str
    reason: str

    @property
    def sharded(self):
        return self.axes is not None and any(a is not None for a in self.axes)


def _axis_size(axis_name, mesh_sizes):
    names = axis_name if isinstance(axis_name, (tuple, list)) else (axis_name,)
    return math.prod(mesh_sizes[n] for n in names)


def check_layout(path, shape, axes, mesh_sizes):
    """Raises a ValueError unless `axes` is a valid layout of `shape`.

    Args:
        path: the variable's path (for the message).
        shape: its shape.
        axes: one entry per dimension: None, a mesh-axis name or a tuple of
            names.
        mesh_sizes: dict mesh-axis name -> size.

    Example:

    ```python
    check_layout("ffn/kernel", (16, 30), (None, "model"), {"batch": 2, "model": 4})
    # ValueError: cannot shard 'ffn/kernel' (shape (16, 30)) dimension 1 of
    # size 30 over mesh axis 'model' of size 4 (30 % 4 = 2) ...
    ```
    """
    shape = tuple(int(d) for d in shape)
    axes = tuple(axes)
    if len(axes) != len(shape):
        raise ValueError(
            f"The layout {axes} for {path!r} has {len(axes)} entries but the variable has "
            f"shape {shape} ({len(shape)} dimensions): give one mesh-axis name or None per dimension."
        )
    used = []
    for dim, (size, name) in enumerate(zip(shape, axes)):
        if name is None:
            continue
        names = tuple(name) if isinstance(name, (tuple, list)) else (name,)
        for n in names:
            if n not in mesh_sizes:
                raise ValueError(
                    f"The layout {axes} for {path!r} names the mesh axis {n!r}, but the mesh has "
                    f"axes {tuple(mesh_sizes)}."
                )
            if n in used:
                raise ValueError(f"The layout {axes} for {path!r} uses the mesh axis {n!r} twice.")
            used.append(n)
        parts = _axis_size(names, mesh_sizes)
        if size % parts:
            raise ValueError(
                f"Cannot shard {path!r} (shape {shape}) dimension {dim} of size {size} over mesh axis "
                f"{name!r} of size {parts} ({size} % {parts} = {size % parts}): the dimension must "
                "divide by the mesh size. Replicate it (None) or use a mesh whose model axis divides it."
            )
    return axes


def decide(candidates, model_size, *, model_axis=MODEL_AXIS, min_size=DEFAULT_MIN_SIZE, strict=False):
    """The sharding decision for each candidate, as `ShardDecision`s (pure).

    A kernel is split on the first of `candidate.axis` and its `fallback`
    axes whose dimension divides by `model_size`, when it is part of a
    transformer pattern (`candidate.pattern`) or has at least `min_size`
    elements; a bias is split exactly when the kernel it follows is. With
    `strict=True` a kernel that the rule would split but whose dimensions do
    not divide raises the ValueError of `check_layout` instead of staying
    replicated.

    Example:

    ```python
    c = Candidate("ffn_in/kernel", (16, 64), axis=1, kind="column")
    decide([c], model_size=4, min_size=0)[0].axes  # (None, "model")
    ```
    """
    if isinstance(model_size, bool) or not isinstance(model_size, int) or model_size < 1:
        raise ValueError(f"model_size must be an int >= 1 (the model-axis size of the mesh), got {model_size!r}.")
    decisions, split = [], set()
    for c in candidates:
        shape = tuple(int(d) for d in c.shape)
        if c.follows is not None:
            if c.follows in split and shape[c.axis] % model_size == 0:
                axes = tuple(model_axis if i == c.axis else None for i in range(len(shape)))
                decisions.append(ShardDecision(c.path, shape, axes, c.kind, f"follows {c.follows}"))
            else:
                decisions.append(ShardDecision(c.path, shape, None, c.kind, f"replicated like {c.follows}"))
            continue
        size = math.prod(shape)
        if model_size == 1:
            decisions.append(ShardDecision(c.path, shape, None, c.kind, "model axis of size 1"))
            continue
        if size < min_size and not c.pattern:
            decisions.append(ShardDecision(
                c.path, shape, None, c.kind, f"small: {size} elements < min_size={min_size}"))
            continue
        axis = next((a for a in (c.axis, *c.fallback) if shape[a] % model_size == 0), None)
        if axis is None:
            if strict:
                axes = tuple(model_axis if i == c.axis else None for i in range(len(shape)))
                check_layout(c.path, shape, axes, {model_axis: model_size})
            decisions.append(ShardDecision(
                c.path, shape, None, c.kind,
                f"dimension {c.axis % len(shape)} of size {shape[c.axis]} does not divide by the "
                f"model-axis size {model_size}"))
            continue
        split.add(c.path)
        axes = tuple(model_axis if i == axis else None for i in range(len(shape)))
        reason = f"{c.kind} parallel on dimension {axis % len(shape)}"
        if axis != c.axis:
            reason += f" (dimension {c.axis % len(shape)} of size {shape[c.axis]} does not divide)"
        decisions.append(ShardDecision(c.path, shape, axes, c.kind, reason))
    return decisions


# --- walking a model ---------------------------------------------------------


def _own_weight(layer, name):
    for v in keras_private.layer_own_variables(layer):
        if v.name == name:
            return v
    return None


def _shape(v):
    return tuple(int(d) for d in v.shape)


def _einsum_parts(equation):
    text = equation.replace("...", "").replace(" ", "")
    lhs, out = text.split("->")
    inp, ker = lhs.split(",")
    return inp, ker, out


def _linear(layer):
    """(kernel, bias, in_width, out_width, column_axes, row_axes, bias_axis) of a
    Dense/EinsumDense; the axes in the order they are tried."""
    kernel = _own_weight(layer, "kernel")
    if kernel is None or len(kernel.shape) < 2:
        return None
    bias = _own_weight(layer, "bias")
    shape = _shape(kernel)
    if isinstance(layer, keras.layers.EinsumDense):
        inp, ker, out = _einsum_parts(layer.equation)
        outputs = [i for i, ch in enumerate(ker) if ch in out and ch not in inp]
        inputs = [i for i, ch in enumerate(ker) if ch in inp and ch not in out]
        if not outputs or not inputs:
            return None
        col = outputs[0]
        bias_axis = None
        if bias is not None and layer.bias_axes and ker[col] in layer.bias_axes:
            first = min(out.find(ch) for ch in layer.bias_axes)
            bias_axis = out[first:].find(ker[col])
        in_width = math.prod(shape[i] for i in inputs)
        out_width = math.prod(shape[i] for i in outputs)
        return kernel, bias, in_width, out_width, tuple(outputs), tuple(inputs), bias_axis
    return kernel, bias, shape[0], shape[-1], (len(shape) - 1,), (0,), 0


def _layers_in_order(model):
    seen, order = set(), []

    def walk(layer):
        # Models: `layers` (a functional model's is in graph order); other
        # layers: their tracked sublayers, in attribute-assignment order.
        subs = layer.layers if isinstance(layer, keras.Model) else keras_private.flatten_layers(
            layer, include_self=False, recursive=False)
        for sub in subs:
            if id(sub) in seen:
                continue
            seen.add(id(sub))
            order.append(sub)
            if not isinstance(sub, keras.layers.MultiHeadAttention):
                walk(sub)

    walk(model)
    return order


def _attention_candidates(layer):
    out = []
    projections = keras_private.attention_projections(layer)
    for role in ("query", "key", "value"):
        sub = projections[role]
        info = _linear(sub) if sub is not None else None
        if info is None:
            continue
        kernel, bias, _, _, cols, _, bias_axis = info
        out.append(Candidate(kernel.path, _shape(kernel), cols[0], "column", sub.name,
                             fallback=cols[1:], pattern=True))
        if bias is not None and bias_axis is not None:
            out.append(Candidate(bias.path, _shape(bias), bias_axis, "bias", sub.name, follows=kernel.path))
    sub = projections["output"]
    info = _linear(sub) if sub is not None else None
    if info is not None:
        kernel, _, _, _, _, rows, _ = info
        out.append(Candidate(kernel.path, _shape(kernel), rows[0], "row", sub.name,
                             fallback=rows[1:], pattern=True))
    return out


def candidates(model):
    """The shardable variables of a built model, in layer order, as `Candidate`s.

    Megatron pairing: consecutive Dense/EinsumDense layers (in the order of
    `model.layers`, which is the functional graph's order) where the
    first one's output width equals the second one's input width become a
    (column, row) pair; an unpaired one is column parallel. Pairs,
    attention projections and embeddings are marked `pattern`.
    """
    if not getattr(model, "built", False) or not model.variables:
        raise ValueError(
            f"auto_layout needs a built model with variables; {getattr(model, 'name', model)!r} has none yet. "
            "Build it first (call it on data, or create it with keras.Input)."
        )
    # pending: (out width, kernel candidate) of an unpaired column-parallel linear layer
    found, pending = [], None

    def add_linear(layer, info, role, pattern=False):
        kernel, bias, _, _, cols, rows, bias_axis = info
        axes = cols if role == "column" else rows
        candidate = Candidate(kernel.path, _shape(kernel), axes[0], role, layer.name, fallback=axes[1:],
                              pattern=pattern)
        found.append(candidate)
        if bias is not None and role == "column" and bias_axis is not None:
            found.append(Candidate(bias.path, _shape(bias), bias_axis, "bias", layer.name, follows=kernel.path))
        return candidate

    for layer in _layers_in_order(model):
        if getattr(layer, "quantization_mode", None):
            continue
        if isinstance(layer, keras.layers.MultiHeadAttention):
            found.extend(_attention_candidates(layer))
            pending = None
        elif isinstance(layer, (keras.layers.Dense, keras.layers.EinsumDense)):
            info = _linear(layer)
            if info is None:
                continue
            in_width, out_width = info[2], info[3]
            if pending is not None and pending[0] == in_width:
                pending[1].pattern = True  # the column half of the pair
                add_linear(layer, info, "row", pattern=True)
                pending = None
            else:
                pending = (out_width, add_linear(layer, info, "column"))
        elif isinstance(layer, keras.layers.Embedding):
            table = _own_weight(layer, "embeddings")
            if table is not None:
                found.append(Candidate(table.path, _shape(table), 0, "embedding", layer.name, fallback=(1,),
                                       pattern=True))
        elif isinstance(layer, (keras.layers.Conv1D, keras.layers.Conv2D, keras.layers.Conv3D,
                                keras.layers.Conv1DTranspose, keras.layers.Conv2DTranspose,
                                keras.layers.Conv3DTranspose)):
            kernel = _own_weight(layer, "kernel")
            if kernel is None:
                continue
            transposed = isinstance(layer, (keras.layers.Conv1DTranspose, keras.layers.Conv2DTranspose,
                                            keras.layers.Conv3DTranspose))
            axis = len(kernel.shape) - (2 if transposed else 1)
            found.append(Candidate(kernel.path, _shape(kernel), axis, "conv", layer.name))
            bias = _own_weight(layer, "bias")
            if bias is not None:
                found.append(Candidate(bias.path, _shape(bias), 0, "bias", layer.name, follows=kernel.path))
    return found


def mesh_sizes(mesh):
    """dict axis name -> size of a `keras.distribution.DeviceMesh`."""
    if not isinstance(mesh, keras.distribution.DeviceMesh):
        raise TypeError(
            f"mesh must be a keras.distribution.DeviceMesh (e.g. boost.distribute.device_mesh((2, 4))), "
            f"got {type(mesh).__name__}: {mesh!r}."
        )
    return dict(zip(mesh.axis_names, (int(s) for s in mesh.shape)))


def device_mesh(shape, axis_names=("batch", MODEL_AXIS), devices=None):
    """A `keras.distribution.DeviceMesh`, with a clear error on a size mismatch.

    Args:
        shape: the mesh shape, e.g. `(2, 4)` (2-way data x 4-way model).
        axis_names: one name per mesh axis.
        devices: a list of devices (or device strings such as "cpu:0");
            defaults to `keras.distribution.list_devices()`.

    Example:

    ```python
    mesh = boost.distribute.device_mesh((2, 4))   # needs 8 devices
    ```
    """
    shape = tuple(int(s) for s in shape)
    axis_names = tuple(axis_names)
    if len(shape) != len(axis_names) or any(s < 1 for s in shape):
        raise ValueError(
            f"The mesh shape {shape} and axis names {axis_names} must have the same length, with sizes >= 1."
        )
    if devices is None:
        devices = _list_devices()
    devices = list(devices)
    if math.prod(shape) != len(devices):
        raise ValueError(
            f"The mesh shape {shape} has {math.prod(shape)} devices but {len(devices)} devices were given "
            f"({devices[:4]}{'...' if len(devices) > 4 else ''}): the mesh size must equal the device count."
        )
    return keras.distribution.DeviceMesh(shape, list(axis_names), devices)


def _list_devices():
    try:
        return keras.distribution.list_devices()
    except AttributeError as error:  # torch backend: no distribution_lib
        raise ValueError(
            f"keras.distribution cannot list devices on the {keras.backend.backend()!r} backend; pass "
            "devices explicitly (e.g. [f'cpu:{i}' for i in range(8)])."
        ) from error


class AutoLayoutMap(keras.distribution.LayoutMap):
    """A `keras.distribution.LayoutMap` that also records why.

    `decisions` lists a `ShardDecision` per considered variable; `report()`
    prints them; `missing(model)` lists keys that match no variable of a
    model (e.g. a rebuilt model whose auto-generated layer names changed).

    Example:

    ```python
    layout_map = boost.distribute.auto_layout(model, mesh)
    print(layout_map.report())
    assert layout_map.missing(rebuilt_model) == []
    ```
    """

    def __init__(self, device_mesh, decisions=()):
        super().__init__(device_mesh)
        self.decisions = list(decisions)

    @property
    def sharded(self):
        return [d for d in self.decisions if d.sharded]

    @property
    def replicated(self):
        return [d for d in self.decisions if not d.sharded]

    def report(self):
        lines = [f"auto_layout on {self.device_mesh}: {len(self.sharded)} sharded, "
                 f"{len(self.replicated)} replicated"]
        for d in self.decisions:
            layout = d.axes if d.sharded else "replicated"
            lines.append(f"  {d.path:40s} {str(d.shape):18s} {str(layout):24s} {d.reason}")
        return "\n".join(lines)

    def missing(self, model):
        paths = [v.path for v in model.variables]
        return [key for key in self if not any(re.fullmatch(key, p) for p in paths)]


def path_key(path):
    """The LayoutMap key that matches exactly the variable path `path`."""
    return "^" + re.escape(path) + "$"


def auto_layout(model, mesh, *, model_axis=MODEL_AXIS, min_size=DEFAULT_MIN_SIZE, overrides=None,
                strict=False, verbose=False):
    """A `keras.distribution.LayoutMap` that shards `model`'s large kernels.

    Args:
        model: a built Keras model (only its layer structure and variable
            paths and shapes are read; it can be a template built without
            any distribution).
        mesh: a `keras.distribution.DeviceMesh` with an axis named
            `model_axis` (e.g. shape `(2, 4)`, axes `("batch", "model")`).
        model_axis: the mesh axis the kernels are split over.
        min_size: kernels outside the transformer patterns (convolutions,
            a Dense without a partner) with fewer elements stay replicated
            (default 65536: below that, the communication costs more than
            the memory saved). Embeddings, attention projections and
            Megatron pairs are split whatever their size.
        overrides: optional dict variable path -> layout (a tuple of
            mesh-axis names / None, one per dimension) that replaces the
            automatic decision for that variable; a layout that does not
            divide the variable's dimension raises a ValueError naming the
            variable, the dimension and the mesh size.
        strict: raise (instead of replicating) when a kernel the rules
            would split has a dimension that does not divide.
        verbose: print `report()`.

    Returns:
        An `AutoLayoutMap` (a `keras.distribution.LayoutMap`) with one
        anchored key per sharded variable; pass it to
        `keras.distribution.ModelParallel(layout_map=...)`.

    Example:

    ```python
    mesh = keras.distribution.DeviceMesh((1, 8), ("batch", "model"))
    layout_map = boost.distribute.auto_layout(model, mesh, min_size=0)
    layout_map.report()
    ```
    """
    sizes = mesh_sizes(mesh)
    if model_axis not in sizes:
        raise ValueError(
            f"The mesh has axes {tuple(sizes)} but model_axis={model_axis!r}: name a mesh axis to shard over."
        )
    if isinstance(min_size, bool) or not isinstance(min_size, int) or min_size < 0:
        raise ValueError(f"min_size must be an int >= 0 (elements), got {min_size!r}.")
    decisions = decide(candidates(model), sizes[model_axis], model_axis=model_axis, min_size=min_size,
                       strict=strict)
    if overrides:
        shapes = {v.path: _shape(v) for v in model.variables}
        by_path = {d.path: i for i, d in enumerate(decisions)}
        for path, axes in dict(overrides).items():
            if path not in shapes:
                near = [p for p in shapes if path.split("/")[-1] in p][:5]
                raise ValueError(
                    f"overrides names the variable path {path!r}, which is not a variable of the model "
                    f"(similar paths: {near or list(shapes)[:5]})."
                )
            axes = None if axes is None else check_layout(path, shapes[path], axes, sizes)
            decision = ShardDecision(path, shapes[path], axes, "override", "override")
            if path in by_path:
                decisions[by_path[path]] = decision
            else:
                by_path[path] = len(decisions)
                decisions.append(decision)
    layout_map = AutoLayoutMap(mesh, decisions)
    for d in decisions:
        if d.sharded:
            layout_map[path_key(d.path)] = tuple(d.axes)
    if verbose:
        print(layout_map.report())
    if sizes[model_axis] > 1 and not layout_map.sharded:
        warnings.warn(
            f"auto_layout shards no variable of {model.name!r} over the model axis of size "
            f"{sizes[model_axis]}, so ModelParallel with this map is data parallel; why, per "
            "variable: layout_map.report() (lower min_size, or a model axis that divides the "
            "layer widths).",
            NoEffectWarning,
            stacklevel=2,
        )
    return layout_map
