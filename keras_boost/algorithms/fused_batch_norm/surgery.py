"""`fuse_batch_norm`: a copy of a model whose BatchNormalization layers train with one fused kernel."""

import warnings

import keras

from keras_boost import keras_private
from keras_boost.algorithms.fused_batch_norm.layer import FusedBatchNormalization
from keras_boost.errors import NoEffectWarning
from keras_boost.graph import rebuild
from keras_boost.validation import check_rebuildable

__all__ = ["count_batch_norms", "fuse_batch_norm"]

_SWITCH_OFF = '{"boost": {"mode": "manual", "fused_batch_norm": false}}'


def _is_fusable(layer):
    """Exactly Keras' class (a subclass may have a call() of its own), on
    4-D channels-last inputs, without the options the kernel lacks."""
    ndim = getattr(getattr(layer, "input_spec", None), "ndim", None)  # set by build
    return type(layer) is keras.layers.BatchNormalization and FusedBatchNormalization.kernel_fits(layer, ndim)


def count_batch_norms(model):
    """The number of `keras.layers.BatchNormalization` layers in `model`
    (nested sub-models included) that a fused kernel can train (4-D
    channels-last inputs, no `renorm`, not `synchronized`): what
    `fuse_batch_norm` swaps."""
    return sum(1 for layer in keras_private.flatten_layers(model, include_self=False) if _is_fusable(layer))


def fuse_batch_norm(model):
    """Returns a copy of `model` whose BatchNormalization layers are fused.

    Every `keras.layers.BatchNormalization` (exactly that class; nested
    sub-models included) on 4-D channels-last inputs, without `renorm` or
    `synchronized`, becomes a `keras_boost.layers.FusedBatchNormalization`
    with the same config and weights: the same math, trained with one fused
    kernel instead of Keras' separate ops (see that layer). Every other layer
    is copied with its weights (`keras_boost.graph.rebuild`): the input
    model is never changed.

    A model already fused is returned as is. Nothing to do (no such
    BatchNormalization, or the JAX backend, where XLA already fuses Keras'
    ops) gives a `keras_boost.NoEffectWarning` and returns `model` itself.

    Args:
        model: a built Functional or Sequential `keras.Model`.

    Returns:
        The new model (compiled from the original's compile config if the
        original was compiled), or `model` when nothing applies.

    Raises:
        ValueError: a subclassed or unbuilt model.
        TypeError: a layer that cannot be re-created from its config.

    Example:

    ```python
    import keras_boost as boost
    model = keras.applications.ResNet50(weights=None, input_shape=(64, 64, 3), classes=10)
    fast = boost.surgery.fuse_batch_norm(model)   # 53 BatchNormalization layers fused
    fast.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
    ```
    """
    check_rebuildable(model, "fuse_batch_norm", "Use boost.layers.FusedBatchNormalization in its layers instead.")
    found = count_batch_norms(model)
    layers = keras_private.flatten_layers(model, include_self=False)
    if not found and any(isinstance(layer, FusedBatchNormalization) for layer in layers):
        return model  # already fused: nothing left to do, and nothing missed
    reason = None
    if not found:
        reason = ("it has no keras.layers.BatchNormalization layer on 4-D channels-last inputs "
                  "(without renorm or synchronized) that a fused kernel could train")
    elif not FusedBatchNormalization.fused_kernel_available():
        reason = (f"the {keras.backend.backend()} backend has no fused kernel to swap in "
                  "(XLA already fuses Keras' batch-norm ops on JAX)")
    if reason:
        warnings.warn(
            f"fuse_batch_norm changed nothing in {model.name!r}: {reason}. The model is returned unchanged.",
            NoEffectWarning,
            stacklevel=2,
        )
        return model

    def convert(layer):
        if _is_fusable(layer):
            return FusedBatchNormalization.from_config(layer.get_config())
        return None

    return rebuild(model, "fuse_batch_norm", convert=convert, switch_off=_SWITCH_OFF)
