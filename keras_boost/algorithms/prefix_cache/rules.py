"""Which operations a cached prefix may hold.

An operation may be computed once, before training, and its outputs reused
at every epoch when it gives the same numbers in training and in inference
and no gradient flows into it:

- an operation of the graph that is not a layer (`h + x`, `x / 127.5`,
  `keras.ops.reshape`) holds no state: it may;
- a layer may not hold a trainable weight (training would change it);
- nor draw random numbers: a layer holding a seed generator (Dropout,
  GaussianNoise, the random augmentation layers, RNN cells) draws new ones
  at each training step;
- nor behave differently in training: a `BatchNormalization` that is still
  trainable normalizes with the batch's statistics in training (a frozen one
  runs in inference mode in Keras 3); a layer whose `call` takes `training`
  and that is not one of Keras' own layers (whose `training` only switches
  dropout, noise and batch statistics, checked above) may do anything with
  it;
- nor add an activity-regularization loss (it would leave the loss
  reported by `fit`).

Each rule applies to the layer and to every layer inside it (a sub-model that
is not opened, or a layer made of layers). Layers the user vouches for
(`deterministic=`, by name or class) skip every rule but the first.
"""

import keras

from keras_boost import keras_private

__all__ = ["uncacheable_reason"]

_KERAS_LAYERS_MODULE = "keras.src.layers."


def uncacheable_reason(operation, deterministic=()):
    """Why `operation` cannot be part of a cached prefix, or None when it can.

    Args:
        operation: a layer or operation of a functional graph.
        deterministic: layer names or layer classes the user vouches for:
            they act the same in training and inference.

    Returns:
        None, or a short reason ("holds 2 trainable weights", ...).

    Example:

    ```python
    uncacheable_reason(keras.layers.Dropout(0.5))
    # 'draws random numbers (it holds a seed generator): ...'
    ```
    """
    if not isinstance(operation, keras.layers.Layer):
        return None  # a keras.ops operation of the graph: no state
    trainable = operation.trainable_weights
    if trainable:
        return f"holds {len(trainable)} trainable weight{'s' if len(trainable) > 1 else ''}"
    if _vouched(operation, deterministic):
        return None
    weight_ids = {id(w) for w in operation.weights}
    if any(id(v) not in weight_ids for v in operation.variables):
        return ("draws random numbers (it holds a seed generator: dropout, noise or random "
                "augmentation), new ones at each training step")
    for layer in keras_private.flatten_layers(operation, include_self=True):
        reason = _own_reason(layer, deterministic)
        if reason:
            return reason if layer is operation else f"holds the layer {layer.name!r}, which {reason}"
    return None


def _own_reason(layer, deterministic):
    if _vouched(layer, deterministic) or _is_plain_graph(layer):
        return None
    if isinstance(layer, keras.layers.BatchNormalization):
        if layer.trainable:
            return ("is a trainable BatchNormalization (no trainable weight, but it normalizes "
                    "with the batch's statistics in training)")
        return None
    if getattr(layer, "activity_regularizer", None) is not None:
        return "adds an activity-regularization loss"
    if keras_private.call_has_training_arg(layer) and not type(layer).__module__.startswith(_KERAS_LAYERS_MODULE):
        return ("takes a `training` argument and is not a Keras layer known to act the same in "
                "training and inference (pass it in `deterministic=` if it does)")
    return None


def _is_plain_graph(layer):
    """A Functional or Sequential model with Keras' own `call`: a container
    whose behaviour is its layers'."""
    if keras_private.is_functional(layer):
        return type(layer).call is keras_private.Functional.call
    if isinstance(layer, keras.Sequential):
        return type(layer).call is keras.Sequential.call
    return False


def _vouched(layer, deterministic):
    for item in deterministic:
        if isinstance(item, str) and layer.name == item:
            return True
        if isinstance(item, type) and isinstance(layer, item):
            return True
    return False
