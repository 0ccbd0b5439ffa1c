"""Argument checks shared by every keras_boost entry point.

They run before anything is built, so a bad argument never leaves a model or
an optimizer half-transformed.
"""

import keras

from keras_boost import keras_private

__all__ = [
    "check_model",
    "check_no_own_train_step",
    "check_optimizer",
    "check_rebuildable",
    "has_custom_train_step",
    "has_layer_graph",
]


def check_model(model, where="model"):
    """Raises unless `model` is a built Keras 3 model; returns it."""
    if not isinstance(model, keras.Model):
        raise TypeError(
            f"{where} must be a keras.Model (Keras 3), got "
            f"{type(model).__module__}.{type(model).__name__}."
        )
    if not model.built:
        raise ValueError(
            f"{where} {model.name!r} is not built: call it on data or use "
            "keras.Input so that its variables exist."
        )
    return model


def check_optimizer(optimizer, where="optimizer"):
    """Raises `TypeError` unless `optimizer` is a Keras 3 optimizer instance."""
    if isinstance(optimizer, str):
        raise TypeError(
            f"{where} must be a keras.optimizers.Optimizer instance, got the string "
            f"{optimizer!r}; pass keras.optimizers.get({optimizer!r}) instead."
        )
    if not isinstance(optimizer, keras.optimizers.Optimizer):
        raise TypeError(
            f"{where} must be a keras.optimizers.Optimizer instance (Keras 3), got "
            f"{type(optimizer).__module__}.{type(optimizer).__name__}. "
            "tf.keras / Keras 2 optimizers are not supported."
        )
    return optimizer


def has_custom_train_step(model):
    """Whether `model`'s class defines its own `train_step` (a VAE, a GAN...)
    or `compute_loss` (a distiller), which BoostModel's step would bypass."""
    cls = type(model)
    return cls.train_step is not keras.Model.train_step or cls.compute_loss is not keras.Model.compute_loss


def check_no_own_train_step(model, boost_level):
    """Errors when `model`'s class defines its own step (`has_custom_train_step`),
    which `BoostModel.from_model` would replace."""
    if has_custom_train_step(model):
        raise TypeError(
            f"{type(model).__name__} {model.name!r} defines its own train_step or "
            "compute_loss, which BoostModel's train step would replace. Keep the model and compile it "
            f"with optimizer=boost.wrap(optimizer, {boost_level!r}): gradient "
            "centralization, freezing and accumulation act through the optimizer "
            "(call self.optimizer.scale_loss(loss) in your train_step for loss "
            "scaling); the pruned backward pass of freezing and the all-replica "
            "overflow check need BoostModel's train_step."
        )


def has_layer_graph(model):
    """Whether `model` is functional or Sequential (its layers can be rebuilt)."""
    return keras_private.is_functional(model) or isinstance(model, keras.Sequential)


def check_rebuildable(model, what, hint=""):
    """Errors unless `model` is a built functional or Sequential keras.Model.

    `what` names the caller in the message; `hint` says what to do with a
    subclassed model instead.
    """
    if not isinstance(model, keras.Model):
        raise TypeError(f"{what} expects a keras.Model, got {type(model).__module__}.{type(model).__name__}.")
    if not has_layer_graph(model):
        raise ValueError(
            f"{what} supports Sequential and functional models; {type(model).__name__} is a subclassed "
            f"model, which keras.models.clone_model cannot rebuild layer by layer.{' ' + hint if hint else ''}"
        )
    if not model.built:
        raise ValueError(f"{what}: build the model first (call it on data or give it an Input).")
