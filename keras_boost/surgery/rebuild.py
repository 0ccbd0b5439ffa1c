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
  original's weights;
- nested Functional/Sequential sub-models are rebuilt the same way.
"""

import keras
from keras.src.models.functional import Functional

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
            input model is unchanged).

    Example:

    ```python
    def to_gelu(layer):
        if isinstance(layer, keras.layers.ReLU):
            return keras.layers.Activation("gelu", name=layer.name)
        return None
    new = rebuild(model, "GELU swap", convert=to_gelu)
    ```
    """
    copies = []
    new = _rebuild(model, set(removed_ids), dict(replacements or {}), convert, copies, what, switch_off)
    for old, copy in copies:
        try:
            copy.set_weights(old.get_weights())
        except ValueError as error:  # the config did not reproduce the weights
            raise _not_copyable(old, error, what, switch_off) from error
    return new


def _rebuild(model, removed_ids, replacements, convert, copies, what, switch_off):
    def clone_function(layer):
        if id(layer) in removed_ids:
            return layer  # never called: call_function skips it
        if id(layer) in replacements:
            return replacements[id(layer)]
        if isinstance(layer, (Functional, keras.Sequential)):
            return _rebuild(layer, removed_ids, replacements, convert, copies, what, switch_off)
        try:
            new = convert(layer) if convert is not None else None
            if new is None:
                new = layer.__class__.from_config(layer.get_config())
        except Exception as error:  # user code: any error means "not copyable"
            raise _not_copyable(layer, error, what, switch_off) from error
        copies.append((layer, new))
        return new

    if isinstance(model, keras.Sequential):
        layers = [clone_function(l) for l in model.layers if id(l) not in removed_ids]
        spec = model.inputs[0]
        new = keras.Sequential(
            [keras.Input(batch_shape=spec.shape, dtype=spec.dtype)] + layers, name=model.name
        )
        if model.compiled:
            new.compile_from_config(model.get_compile_config())
        return new

    def call_function(layer, *args, **kwargs):
        if id(layer) in removed_ids:
            return args[0]
        return layer(*args, **kwargs)

    new = keras.models.clone_model(model, clone_function=clone_function, call_function=call_function)
    return _same_class(model, new)


def _same_class(model, new):
    """Re-creates a Functional subclass (e.g. `BoostModel`) with its own arguments.

    `clone_model` calls `cls(inputs, outputs, name=...)`, which would reset
    the subclass's extra constructor arguments (e.g. `boost_level`) to their
    defaults; they are read back from the original's `get_config`.
    """
    cls = type(model)
    if cls is Functional or cls.get_config is Functional.get_config:
        return new
    extra = {k: v for k, v in model.get_config().items() if k not in _FUNCTIONAL_KEYS}
    if not extra:
        return new
    rebuilt = cls(new.inputs, new.outputs, name=model.name, **extra)
    if model.compiled:
        rebuilt.compile_from_config(model.get_compile_config())
    return rebuilt


def _not_copyable(layer, error, what, switch_off):
    cls = type(layer)
    reason = " ".join(str(error).split())  # Keras' deserialization errors span lines
    off = f"; or switch {what} off with {switch_off}" if switch_off else ""
    return TypeError(
        f"{what} cannot copy the layer {layer.name!r} ({cls.__module__}.{cls.__qualname__}): "
        f"it cannot be re-created from its config ({type(error).__name__}: {reason}). {what} "
        "builds a new model from a copy of every layer, made with "
        "`layer.__class__.from_config(layer.get_config())`. Fix: implement get_config() "
        "returning the __init__ arguments, and accept **kwargs in __init__ (passed on to "
        "super().__init__), so that the base arguments (name, trainable, dtype) are "
        f"accepted{off}. The input model is unchanged."
    )
