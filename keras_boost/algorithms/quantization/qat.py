"""Quantization-aware training (QAT) for Keras' int8 post-training quantization.

`quantize_aware(model)` returns a copy of `model` whose `Dense` layers are
`QuantizeAwareDense`: once switched on, their forward pass uses the kernel
rounded exactly as `model.quantize("int8")` will round it (symmetric,
per-output-channel abs-max, 127 levels) and, by default, the inputs rounded
per row as Keras' int8 `Dense` rounds them; gradients pass straight through.
The `QuantizationAwareTraining(start="0.7dur")` callback switches fake
quantization on for the last part of training. Afterwards call
`model.quantize("int8")` on the QAT model (or on `strip(model)`).

Only `Dense` is converted: in Keras 3.15 `model.quantize("int8")` turns
Dense, EinsumDense and Embedding into int8 and leaves convolutions in float,
so fake-quantizing convolutions would train for rounding that never happens.

Example:

```python
qat = boost.quantization.quantize_aware(model)
qat.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
qat.fit(x, y, epochs=5, callbacks=[boost.quantization.QuantizationAwareTraining(start="0.7dur")])
qat.quantize("int8")
```
"""

import numbers
import warnings

import keras
from keras import ops

from keras_boost import keras_private
from keras_boost.algorithms.quantization.fake_quant import fake_quantize
from keras_boost.durations import parse_duration
from keras_boost.errors import NoEffectWarning
from keras_boost.validation import check_rebuildable

__all__ = ["QuantizationAwareTraining", "quantize_aware", "QuantizeAwareDense", "set_active", "strip"]


@keras.saving.register_keras_serializable(package="keras_boost")
class QuantizeAwareDense(keras.layers.Dense):
    """A `Dense` that can fake-quantize its kernel (and inputs) like Keras' int8 Dense.

    Args:
        quantize_activations: also round the inputs per row (axis -1), as
            Keras' int8 `Dense` does at inference (default True).
        qat_active: whether fake quantization is on (saved in the config;
            the `QuantizationAwareTraining` callback turns it on).
        **kwargs: `keras.layers.Dense` arguments.

    `quantize("int8")` works as on a plain Dense.

    Example:

    ```python
    layer = boost.quantization.QuantizeAwareDense(16, qat_active=True)
    ```
    """

    def __init__(self, units, quantize_activations=True, qat_active=False, **kwargs):
        super().__init__(units, **kwargs)
        self.quantize_activations = bool(quantize_activations)
        self.qat_active = bool(qat_active)

    def call(self, inputs, training=None):
        if not self.qat_active:
            return super().call(inputs, training=training)
        kernel = fake_quantize(self.kernel, axis=0)
        if self.quantize_activations:
            inputs = fake_quantize(inputs, axis=-1)
        x = ops.matmul(inputs, ops.cast(kernel, inputs.dtype))
        if self.bias is not None:
            x = ops.add(x, self.bias)
        if self.activation is not None:
            x = self.activation(x)
        return x

    def quantize(self, mode=None, type_check=True, config=None):
        # Keras refuses Dense subclasses; this one computes what Dense does.
        super().quantize(mode, type_check=False, config=config)

    def get_config(self):
        config = super().get_config()
        config.update(quantize_activations=self.quantize_activations, qat_active=self.qat_active)
        return config


def _qat_layers(model):
    layers = keras_private.flatten_layers(model, include_self=False, recursive=True)
    return [layer for layer in layers if isinstance(layer, QuantizeAwareDense)]


def _check_model(model, what):
    check_rebuildable(model, what)


def _clone(model, convert):
    clone = keras.models.clone_model(model, clone_function=convert)
    pairs = zip(
        [l for l in model.layers if not isinstance(l, keras.layers.InputLayer)],
        [l for l in clone.layers if not isinstance(l, keras.layers.InputLayer)],
    )
    for original, copy in pairs:
        copy.set_weights(original.get_weights())
    return clone


def quantize_aware(model, activations=True, active=False):
    """A copy of `model` with every `Dense` replaced by `QuantizeAwareDense`.

    Weights are copied; `model` is untouched. Fake quantization starts off
    (`active=False`) and is switched on by `QuantizationAwareTraining`.

    Args:
        model: a built Sequential or functional model.
        activations: also fake-quantize each Dense layer's inputs (per row),
            as Keras' int8 Dense does (default True).
        active: start with fake quantization on.

    Example:

    ```python
    qat = boost.quantization.quantize_aware(model)
    ```
    """
    _check_model(model, "quantize_aware")
    found = []

    def convert(layer):
        if type(layer) is keras.layers.Dense and layer.quantization_mode is None:
            found.append(layer.name)
            config = layer.get_config()
            config.update(quantize_activations=activations, qat_active=active)
            return QuantizeAwareDense.from_config(config)
        return layer.__class__.from_config(layer.get_config())

    clone = _clone(model, convert)
    if not found:
        warnings.warn(
            "quantize_aware found no float keras.layers.Dense to fake-quantize (the layers "
            "model.quantize('int8') turns into int8); the copy trains in plain float.",
            NoEffectWarning, stacklevel=2,
        )
    return clone


def set_active(model, active=True):
    """Turns fake quantization on or off in every `QuantizeAwareDense` of `model`.

    Retrace the train step afterwards (`model.make_train_function(force=True)`
    or recompile); the callback does this for you. Returns the layer count.

    Example:

    ```python
    boost.quantization.set_active(qat, True); qat.make_train_function(force=True)
    ```
    """
    layers = _qat_layers(model)
    for layer in layers:
        layer.qat_active = bool(active)
    return len(layers)


def strip(model):
    """A plain copy of a QAT model: `QuantizeAwareDense` back to `Dense`.

    Example:

    ```python
    plain = boost.quantization.strip(qat); plain.quantize("int8")
    ```
    """
    _check_model(model, "strip")

    def convert(layer):
        if isinstance(layer, QuantizeAwareDense):
            config = layer.get_config()
            config.pop("quantize_activations")
            config.pop("qat_active")
            return keras.layers.Dense.from_config(config)
        return layer.__class__.from_config(layer.get_config())

    return _clone(model, convert)


@keras.saving.register_keras_serializable(package="keras_boost")
class QuantizationAwareTraining(keras.callbacks.Callback):
    """Switches fake int8 quantization on from `start` until the end of training.

    Args:
        start: when to start, a duration (`"0.7dur"`, `0.7`: the last 30% of
            the run is quantization-aware) or a step count (int >= 0).

    Example:

    ```python
    qat.fit(x, y, epochs=10, callbacks=[boost.quantization.QuantizationAwareTraining(start="0.7dur")])
    ```
    """

    def __init__(self, start="0.7dur"):
        super().__init__()
        if isinstance(start, numbers.Integral) and not isinstance(start, bool):
            if start < 0:
                raise ValueError(f"start must be a step count >= 0 or a duration like '0.7dur', got {start!r}.")
        else:
            try:
                parse_duration(start)
            except ValueError as error:
                raise ValueError(f"QuantizationAwareTraining start: {error} (or a step count, an int >= 0).") from None
        self.start = start
        self._start_step = None
        self._step = 0

    def on_train_begin(self, logs=None):
        if not _qat_layers(self.model):
            warnings.warn(
                "QuantizationAwareTraining: the model has no QuantizeAwareDense layers (use "
                "boost.quantization.quantize_aware); nothing is fake-quantized.", NoEffectWarning, stacklevel=2,
            )
            self._start_step = None
            return
        if isinstance(self.start, numbers.Integral) and not isinstance(self.start, bool):
            self._start_step = int(self.start)
        else:
            steps = self.params.get("steps")
            if not steps:
                raise ValueError(
                    f"QuantizationAwareTraining(start={self.start!r}) is a duration, but fit does not "
                    "know the number of steps; give start as a step count."
                )
            total = int(self.params["epochs"]) * int(steps)
            self._start_step = int(round(parse_duration(self.start) * total))
        self._steps_per_epoch = self.params.get("steps")
        self._epoch = 0
        self._set(False)

    def _set(self, active):
        """Flips fake quantization, retracing what was traced with the other value."""
        layers = _qat_layers(self.model)
        if layers and all(layer.qat_active == active for layer in layers):
            return
        set_active(self.model, active)
        # Compiled steps read the flag when traced (train and validation alike).
        self.model.make_train_function(force=True)
        self.model.make_test_function(force=True)

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch  # absolute (initial_epoch included)

    def on_train_batch_begin(self, batch, logs=None):
        if self._start_step is None:
            return
        # The global step from the epoch (correct with steps_per_execution > 1
        # and with a resumed fit); without a known epoch length, by counting.
        if self._steps_per_epoch:
            self._step = self._epoch * int(self._steps_per_epoch) + batch
        if self._step >= self._start_step:
            self._set(True)

    def on_train_batch_end(self, batch, logs=None):
        if not self._steps_per_epoch:
            self._step += 1

    def get_config(self):
        return {"start": self.start}

    @classmethod
    def from_config(cls, config):
        return cls(**config)
