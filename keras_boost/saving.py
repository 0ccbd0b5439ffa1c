"""Legacy H5 support: keras_boost's classes under their plain names.

`.keras` files record `keras_boost>BoostModel`, which the registration
decorators resolve; legacy H5 files (`ModelCheckpoint("best.h5")`) record
only `BoostModel`, which Keras looks up among the global custom objects.
"""

import keras

__all__ = ["register_plain_names"]


def register_plain_names(classes):
    """Makes each class loadable from H5 by its plain name (never overriding
    a user's own object of that name)."""
    custom_objects = keras.saving.get_custom_objects()
    for cls in classes:
        custom_objects.setdefault(cls.__name__, cls)
