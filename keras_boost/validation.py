"""Argument checks shared by every keras_boost entry point.

They run before anything is built, so a bad argument never leaves a model or
an optimizer half-transformed.
"""

import keras


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
    """Whether `model`'s class defines its own `train_step` (a VAE, a GAN...)."""
    return type(model).train_step is not keras.Model.train_step
