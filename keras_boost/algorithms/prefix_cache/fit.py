"""Training with the frozen prefix's outputs computed once.

`fit_with_cached_prefix(model, x, y, ...)` splits the model
(`split_frozen_prefix`), computes the prefix's outputs for the training (and
validation) arrays once with `prefix.predict`, and trains the suffix on
them with `fit`: each epoch then costs the suffix's forward and backward
passes only. The suffix holds the model's own layers and is compiled with
the model's own optimizer, loss and metrics, so the model ends trained as
`model.fit` would have trained it, step for step (same batches: the same
gradients, to float rounding).
"""

import warnings

import keras
import numpy as np

from keras_boost import keras_private
from keras_boost.algorithms.prefix_cache.split import split_frozen_prefix
from keras_boost.errors import NoEffectWarning
from keras_boost.validation import check_model
from keras_boost.validation import has_custom_train_step

__all__ = ["are_arrays", "cached_inputs", "fit_suffix", "fit_with_cached_prefix"]


def fit_with_cached_prefix(model, x, y=None, *, batch_size=None, epochs=1, verbose="auto", callbacks=None,
                           validation_data=None, deterministic=(), predict_batch_size=None, **fit_kwargs):
    """`model.fit(x, y, ...)` with the frozen prefix computed once.

    The model's frozen prefix (`split_frozen_prefix`: the layers from the
    inputs that hold no trainable weight and act the same in training and
    inference) runs once over `x` (and the validation inputs); the rest
    trains on its outputs for `epochs` epochs. The model's variables are
    trained in place, by the model's own optimizer (`model.optimizer`, whose
    iteration count, learning-rate schedule and slots carry on as with
    `model.fit`; an optimizer built by this call is built for
    `model.trainable_variables`, in their order, so the model's next `fit`
    or `save` finds it as its own). The suffix is compiled with the model's
    loss, loss weights, metrics and `jit_compile` / `steps_per_execution`
    settings.

    Callbacks are called with the suffix as their `model`; the suffix's
    `save`, `save_weights` and `load_weights` act on `model`, so that
    `ModelCheckpoint`, `EarlyStopping(restore_best_weights=True)` and
    `BackupAndRestore` save and restore the model itself.

    Args:
        model: a compiled functional or Sequential `keras.Model`.
        x: the inputs, as arrays: one array, a list of arrays or a dict of
            arrays keyed by input name (as `model.fit` takes them). A
            `tf.data.Dataset`, a generator or a `PyDataset` is refused: its
            batches may differ at each epoch (shuffling, augmentation), so
            the prefix's outputs cannot be computed once.
        y: the targets (arrays), as `model.fit` takes them.
        batch_size: the training batch size (`fit`'s).
        epochs: `fit`'s.
        verbose: `fit`'s; the prefix's `predict` is silent.
        callbacks: `fit`'s (see above).
        validation_data: `(x_val, y_val)` or `(x_val, y_val, sample_weight)`
            of arrays; `x_val` goes through the prefix once too.
        deterministic: layer names or classes to treat as acting the same
            in training and inference (see `split_frozen_prefix`).
        predict_batch_size: the prefix's `predict` batch size (default
            `batch_size`).
        **fit_kwargs: the rest of `fit`'s arguments (`shuffle`,
            `validation_split`, `sample_weight`, `class_weight`,
            `initial_epoch`, `steps_per_epoch`, ...), passed on.

    Returns:
        The `History` of the suffix's `fit` (its `model` is `model`).

    Raises:
        ValueError: `model` is not compiled.
        TypeError: `model` defines its own `train_step` or `compute_loss`
            (the suffix would train with Keras' own), or `x` or
            `validation_data` are not arrays while something could be cached.

    Warns:
        NoEffectWarning: nothing can be cached (no frozen layer at the
            inputs, a subclassed model, a first layer that draws random
            numbers...) or nothing is trainable: `model.fit` then runs as
            it is.

    Example:

    ```python
    base = keras.applications.MobileNetV2(include_top=False, pooling="avg", input_shape=(96, 96, 3))
    base.trainable = False
    inputs = keras.Input((96, 96, 3))
    outputs = keras.layers.Dense(10, activation="softmax")(base(inputs, training=False))
    model = keras.Model(inputs, outputs)
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    history = fit_with_cached_prefix(model, x_train, y_train, batch_size=64, epochs=10,
                                     validation_data=(x_val, y_val))
    ```
    """
    check_model(model)
    if not model.compiled or model.optimizer is None:
        raise ValueError(
            f"fit_with_cached_prefix trains {model.name!r} with its own optimizer and loss: "
            "call model.compile(optimizer=..., loss=...) first."
        )
    if has_custom_train_step(model):
        raise TypeError(
            f"{type(model).__name__} {model.name!r} defines its own train_step or compute_loss; "
            "fit_with_cached_prefix trains the model's trainable part with Keras' own train step, "
            "which would bypass it. Use model.fit, or split_frozen_prefix(model) and train the "
            "suffix yourself."
        )
    fit_kwargs = dict(fit_kwargs, batch_size=batch_size, epochs=epochs, verbose=verbose,
                      callbacks=callbacks, validation_data=validation_data)

    def plain_fit(why):
        warnings.warn(NoEffectWarning(f"prefix cache: {why}; training with model.fit."), stacklevel=3)
        return model.fit(x, y, **fit_kwargs)

    try:
        split = split_frozen_prefix(model, deterministic=deterministic)
    except TypeError as error:
        return plain_fit(f"no graph to split ({error})")
    if split.report.empty:
        first = split.report.stops[0] if split.report.stops else None
        why = f"the first layer {first[0]!r} {first[1]}" if first else "no frozen layer at the inputs"
        return plain_fit(f"nothing of {model.name!r} can be cached ({why})")
    if not model.trainable_variables:
        return plain_fit(f"{model.name!r} has no trainable weight")
    _check_arrays("x", x)
    _check_arrays("y", y)
    features, fit_kwargs = cached_inputs(split, x, fit_kwargs, predict_batch_size or batch_size)
    return fit_suffix(model, split, features, y, fit_kwargs)


def cached_inputs(split, x, fit_kwargs, predict_batch_size=None):
    """The prefix's outputs for `x` and for the validation inputs of
    `fit_kwargs` (arrays, checked), computed once: `(features, fit_kwargs
    with the validation inputs replaced by theirs)`."""
    fit_kwargs = dict(fit_kwargs)
    predict_batch_size = predict_batch_size or fit_kwargs.get("batch_size")
    features = split.features(x, batch_size=predict_batch_size)
    if fit_kwargs.get("validation_data") is not None:
        fit_kwargs["validation_data"] = _validation_features(split, fit_kwargs["validation_data"],
                                                             predict_batch_size)
    return features, fit_kwargs


def fit_suffix(model, split, features, y, fit_kwargs):
    """`fit` of the split's suffix on `features`, compiled as `model` (its
    optimizer, loss, metrics and settings); returns the `History`, whose
    `model` is `model`."""
    suffix = split.suffix
    given = keras_private.compile_arguments(model)
    suffix.compile(
        optimizer=model.optimizer,
        loss=given.get("loss"),
        loss_weights=given.get("loss_weights"),
        metrics=given.get("metrics"),
        weighted_metrics=given.get("weighted_metrics"),
        run_eagerly=model.run_eagerly,
        steps_per_execution=model.steps_per_execution,
        jit_compile=model.jit_compile,
    )
    history = suffix.fit(features, y, **fit_kwargs)
    history.set_model(model)
    model.history = history
    return history


def are_arrays(value):
    """True when `value` is arrays as `fit` takes them: an array or tensor,
    or a list, tuple or dict of them (None counts as arrays)."""
    if value is None:
        return True
    if isinstance(value, dict):
        items = list(value.values())
    elif isinstance(value, (list, tuple)):
        items = list(value)
    else:
        items = [value]
    return bool(items) and all(_is_array(v) for v in items)


def _is_array(value):
    return isinstance(value, np.ndarray) or keras.ops.is_tensor(value) or (
        hasattr(value, "__array__") and hasattr(value, "shape"))


def _check_arrays(where, value):
    if are_arrays(value):
        return
    kind = f"{type(value).__module__}.{type(value).__qualname__}"
    raise TypeError(
        f"fit_with_cached_prefix computes the frozen prefix's outputs once, so {where} must be "
        f"arrays (a NumPy array or tensor, a list of them, or a dict keyed by input name); got "
        f"{kind}. A dataset or generator may give other batches at each epoch (shuffling, "
        "augmentation). Pass arrays, or use model.fit (or compute the features yourself with "
        "split_frozen_prefix(model).prefix.predict(dataset) when the dataset is fixed)."
    )


def _validation_features(split, validation_data, batch_size):
    if not isinstance(validation_data, (list, tuple)) or len(validation_data) not in (2, 3):
        raise TypeError(
            "fit_with_cached_prefix takes validation_data as (x_val, y_val) or (x_val, y_val, "
            f"sample_weight) of arrays; got {type(validation_data).__module__}."
            f"{type(validation_data).__qualname__}."
        )
    x_val, *rest = validation_data
    _check_arrays("validation_data's x", x_val)
    return (split.features(x_val, batch_size=batch_size), *rest)
