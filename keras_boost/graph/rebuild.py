"""Copying a Functional or Sequential model with some layers removed or swapped.

The shared mechanism of the surgeries (`LessBN`, `fuse_batch_norm`): every
layer of the copy is a new object carrying the original's weights, so the
input model is never mutated and training the copy never touches it.

- a removed layer becomes the identity (its first argument passes through);
- `replacements[id(layer)]` takes the place of `layer` as it is (its
  weights are its own business);
- any other layer is `convert(layer)` when that returns a layer (an unbuilt
  layer whose weights have the original's layout), else
  `layer.__class__.from_config(layer.get_config())`; either gets the
  original's weights and seed-generator states, and every variable keeps
  its trainable flag;
- operations of the graph that are not layers (`keras.ops` calls such as
  `h + inputs`, `x / 127.5`, the `NotEqual` of a masked `Embedding`) hold
  no weights: they are re-created from their config, as
  `keras.models.clone_model` does;
- nested Functional/Sequential sub-models are rebuilt the same way, with
  their own `trainable` flag; a layer shared by several graphs (or called
  several times) is copied once and stays shared.
"""

import keras

from keras_boost import keras_private
from keras_boost.errors import reraise_with_context

__all__ = ["rebuild"]

_FUNCTIONAL_KEYS = {"name", "trainable", "layers", "input_layers", "output_layers"}


def rebuild(model, what, removed_ids=frozenset(), replacements=None, convert=None, switch_off=""):
    """The copy of `model` described in this module's docstring.

    Args:
        model: a built Functional or Sequential `keras.Model`.
        what: the surgery's name, for error messages.
        removed_ids: `id()`s of the layers to drop (each must take the
            tensor to pass on as its first argument).
        replacements: `{id(layer): new_layer}`.
        convert: `convert(layer) -> new layer or None`.
        switch_off: how to switch the surgery off, for error messages.

    Returns:
        The new model, compiled from the original's compile config if the
        original was compiled.

    Raises:
        TypeError: a layer that cannot be re-created from its config, or
            whose copy does not take its weights (nothing is returned; the
            input model is unchanged). Any other error of the copy keeps
            its type, and its message names the surgery, the model and the
            switch that turns the surgery off.

    Example:

    ```python
    def to_gelu(layer):
        if isinstance(layer, keras.layers.ReLU):
            return keras.layers.Activation("gelu", name=layer.name)
        return None
    new = rebuild(model, "GELU swap", convert=to_gelu)
    ```
    """
    copier = _Copier(set(removed_ids), dict(replacements or {}), convert, what, switch_off)
    cls = type(model)
    off = f" (switch it off with {switch_off})" if switch_off else ""
    with reraise_with_context(f"{what} copied the model {model.name!r} ({cls.__module__}.{cls.__qualname__}){off}"):
        new = copier.model(model)
    for old, copy in copier.copies:
        try:
            copy.set_weights(old.get_weights())
        except ValueError as error:  # the config did not reproduce the weights
            raise _not_copyable(old, error, what, switch_off) from error
        _carry_state(old, copy)
    return new


def _carry_state(old, copy):
    """Gives `copy` (same variable layout as `old`) the trainable flag of each
    variable and the state of its seed generators (not in `weights`), so that
    a Dropout or augmentation copy draws what the original would."""
    weight_ids = {id(w) for w in old.weights}
    for old_variable, variable in zip(old.variables, copy.variables):
        if id(old_variable) in weight_ids:
            variable.trainable = old_variable.trainable
        else:
            variable.assign(old_variable)


class _Copier:
    """The `clone_function` / `call_function` pair of one `rebuild`, over
    every nested graph."""

    def __init__(self, removed_ids, replacements, convert, what, switch_off):
        self.removed_ids = removed_ids
        self.replacements = replacements
        self.convert = convert
        self.what, self.switch_off = what, switch_off
        self.copies = []  # (original layer, copy): the weights to carry over
        self._done = {}  # id(original) -> copy, shared across nested graphs

    def model(self, model):
        """The copy of a Functional or Sequential (sub-)model, with its own
        `trainable` flag."""
        if isinstance(model, keras.Sequential):
            new = self._sequential(model)
        else:
            new = keras.models.clone_model(model, clone_function=self.copy, call_function=self._call)
            new = _same_class(model, new, self.what, self.switch_off)
        # `_trainable`, not the setter: the setter would push the flag down
        # onto every sublayer, which keeps its own (from its config). A copy
        # that lost a frozen base's False could never be unfrozen on
        # TensorFlow, which skips `base.trainable = True` when it is True.
        keras_private.set_layer_trainable_flag(new, model.trainable)
        return new

    def copy(self, operation):
        """`clone_function`: the copy of one operation of the graph."""
        if id(operation) in self.removed_ids:
            return operation  # never called: `_call` skips it
        if id(operation) not in self._done:
            self._done[id(operation)] = self._new(operation)
        return self._done[id(operation)]

    def _new(self, operation):
        if id(operation) in self.replacements:
            return self.replacements[id(operation)]
        if keras_private.is_functional(operation) or isinstance(operation, keras.Sequential):
            return self.model(operation)
        is_layer = isinstance(operation, keras.layers.Layer)
        try:
            new = self.convert(operation) if is_layer and self.convert is not None else None
            if new is None:
                new = operation.__class__.from_config(operation.get_config())
        except Exception as error:  # user code: any error means "not copyable"
            raise _not_copyable(operation, error, self.what, self.switch_off) from error
        if is_layer:
            self.copies.append((operation, new))
        return new

    def _call(self, operation, *args, **kwargs):
        """`call_function`: a removed layer passes its first argument on."""
        if id(operation) in self.removed_ids:
            return args[0]
        return operation(*args, **kwargs)

    def _sequential(self, model):
        layers = [self.copy(l) for l in model.layers if id(l) not in self.removed_ids]
        spec = model.inputs[0]
        new = keras.Sequential(
            [keras.Input(batch_shape=spec.shape, dtype=spec.dtype)] + layers, name=model.name
        )
        if model.compiled:
            new.compile_from_config(model.get_compile_config())
        return new


def _same_class(model, new, what, switch_off):
    """Re-creates a Functional subclass (e.g. `BoostModel`) with its own arguments.

    `clone_model` calls `cls(inputs, outputs, name=...)`, which would reset
    the subclass's extra constructor arguments (e.g. `boost_level`) to their
    defaults; they are read back from the original's `get_config`. A class
    whose constructor recognises a clone itself (`handles_clone_model`, as
    `BoostModel` does, which also records a copy's own precision) is kept
    as `clone_model` made it.

    A class built from its config instead (keras-hub's backbones and tasks:
    `ResNetBackbone(stackwise_num_filters=..., ...)` makes its own layers)
    cannot hold a graph with layers removed or swapped, and its config would
    rebuild the original layers on loading. Its copy is the plain functional
    model `clone_model` makes of such a class: the same layers, weights,
    name and compile config, saved and loaded as a graph.
    """
    cls = type(model)
    if cls is keras_private.Functional or cls.get_config is keras_private.Functional.get_config:
        return new
    extra = {k: v for k, v in model.get_config().items() if k not in _FUNCTIONAL_KEYS}
    if getattr(cls, "handles_clone_model", False) and type(new) is cls:
        rebuilt = new
    elif not extra or not keras_private.functional_like_constructor(cls):
        return new
    else:
        try:
            rebuilt = cls(new.inputs, new.outputs, name=model.name, **extra)
        except Exception as error:  # user code: any error means "not copyable"
            raise _not_copyable(model, error, what, switch_off, rebuilt_with="cls(inputs, outputs, **config)") from error
    if model.compiled:
        rebuilt.compile_from_config(model.get_compile_config())
    return rebuilt


def _not_copyable(operation, error, what, switch_off, rebuilt_with="layer.__class__.from_config(layer.get_config())"):
    cls = type(operation)
    kind = ("model" if isinstance(operation, keras.Model) else "layer" if isinstance(operation, keras.layers.Layer)
            else "operation")
    reason = " ".join(str(error).split())  # Keras' deserialization errors span lines
    off = f"; or switch {what} off with {switch_off}" if switch_off else ""
    return TypeError(
        f"{what} cannot copy the {kind} {operation.name!r} ({cls.__module__}.{cls.__qualname__}): "
        f"it cannot be re-created from its config ({type(error).__name__}: {reason}). {what} "
        f"builds a new model from a copy of every layer, made with `{rebuilt_with}`. Fix: "
        "implement get_config() returning the __init__ arguments, and accept **kwargs in __init__ "
        "(passed on to super().__init__), so that the base arguments (name, trainable, dtype) are "
        f"accepted{off}. The input model is unchanged."
    )
