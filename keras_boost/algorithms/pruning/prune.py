"""Magnitude pruning during training (Zhu & Gupta 2017) for any Keras 3 backend.

`prune_low_magnitude(model, target_sparsity)` returns a copy of `model` whose
kernel layers are wrapped in `PruneLowMagnitude` (which holds the 0/1 mask and
the pruning step as non-trainable variables, so they save and load with the
model). The `UpdatePruningMasks` callback does the pruning: after every batch
it recomputes the masks when the schedule says so and multiplies each pruned
kernel by its mask, so the pruned weights are exactly zero after every
optimizer update. The copy is a `PrunedModel`, whose `fit` adds the callback
when it is not given; a pruned layer trained with no callback driving it
(`train_on_batch`, another model's `fit`, a custom loop) raises at its first
training call instead of pruning nothing. `strip(model)` returns the plain
model with the zeros baked in; `sparsity_report(model)` gives the real
fraction of zeros per layer.

Why a callback and not an optimizer wrapper: on JAX the optimizer's
`stateless_apply` sees only trainable and optimizer state, never the model's
non-trainable variables, so masks kept in the model (where they belong for
saving, `strip` and recompiling with another optimizer) cannot be read inside
the jitted update. The callback works with any optimizer chain
(LossScaleOptimizer, `GradientAccumulation`, `FreezeOptimizer`) untouched; it
costs one elementwise multiply per pruned kernel per batch (and, on JAX, a
state sync per batch). With `steps_per_execution > 1` it runs once per
execution.

Example:

```python
pruned = boost.pruning.prune_low_magnitude(model, 0.8)
pruned.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
pruned.fit(x, y, epochs=3)                   # adds UpdatePruningMasks()
boost.pruning.sparsity_report(pruned)        # {"dense": 0.8, ...}
plain = boost.pruning.strip(pruned)
```
"""

import numbers
import warnings

import keras
from keras import ops

from keras_boost import keras_private
from keras_boost.algorithms.pruning import sparsity as sparsity_ops
from keras_boost.durations import parse_duration
from keras_boost.errors import NoEffectWarning
from keras_boost.validation import check_rebuildable

__all__ = [
    "apply_masks",
    "kernel_variable",
    "PolynomialDecay",
    "prune_low_magnitude",
    "PrunedModel",
    "PruneLowMagnitude",
    "sparsity_report",
    "strip",
    "UpdatePruningMasks",
]


def _check_sparsity(value, name, allow_zero=False):
    low = "[0" if allow_zero else "(0"
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Real)
        or not ((0.0 <= value) if allow_zero else (0.0 < value)) or value > 1.0
    ):
        raise ValueError(
            f"{name} must be a number in {low}, 1] (a fraction of the kernel's weights), "
            f"got {value!r}."
        )
    return float(value)


def _check_step(value, name):
    """An int (steps, >= 0) or a duration (fraction of the run)."""
    if isinstance(value, bool):
        raise ValueError(f"{name} must be a step count (int >= 0) or a duration like '0.7dur', got {value!r}.")
    if isinstance(value, numbers.Integral):
        if value < 0:
            raise ValueError(f"{name} must be a step count >= 0 or a duration like '0.7dur', got {value!r}.")
        return int(value)
    try:
        parse_duration(value)
    except ValueError as error:
        raise ValueError(f"{name}: {error} (or give a step count, an int >= 0).") from None
    return value


def _resolve(value, total_steps, name):
    if isinstance(value, int):
        return value
    if not total_steps:
        raise ValueError(
            f"{name}={value!r} is a duration, but the number of training steps is unknown "
            "(a dataset without a known length?): give steps as ints, or pass "
            "total_steps to UpdatePruningMasks."
        )
    return int(round(parse_duration(value) * total_steps))


@keras.saving.register_keras_serializable(package="keras_boost")
class PolynomialDecay:
    """Zhu & Gupta's polynomial sparsity schedule (the cubic ramp).

    The sparsity rises from `initial_sparsity` at `begin_step` to
    `final_sparsity` at `end_step` as
    `s_f + (s_i - s_f) * (1 - (t - t0) / (end - t0)) ** power`; masks are
    recomputed every `frequency` steps inside the ramp and once more at
    `end_step`.

    Args:
        final_sparsity: target fraction in (0, 1]; `None` lets
            `prune_low_magnitude` fill in its `target_sparsity`.
        initial_sparsity: fraction in [0, 1) at `begin_step`.
        begin_step, end_step: ints (steps = training batches) or durations
            (`"0.7dur"`, `0.7`: fractions of the run, resolved when `fit`
            starts).
        frequency: steps between mask updates (the paper's Δt).
        power: exponent (3).

    Example:

    ```python
    schedule = boost.pruning.PolynomialDecay(begin_step=0, end_step="0.7dur", frequency=50)
    pruned = boost.pruning.prune_low_magnitude(model, 0.8, schedule)
    ```
    """

    def __init__(self, final_sparsity=None, initial_sparsity=0.0, begin_step=0, end_step="0.7dur",
                 frequency=100, power=3):
        if final_sparsity is not None:
            final_sparsity = _check_sparsity(final_sparsity, "final_sparsity")
        self.final_sparsity = final_sparsity
        self.initial_sparsity = _check_sparsity(initial_sparsity, "initial_sparsity", allow_zero=True)
        if final_sparsity is not None and self.initial_sparsity > final_sparsity:
            raise ValueError(
                f"initial_sparsity ({initial_sparsity}) must not exceed final_sparsity ({final_sparsity})."
            )
        self.begin_step = _check_step(begin_step, "begin_step")
        self.end_step = _check_step(end_step, "end_step")
        if isinstance(frequency, bool) or not isinstance(frequency, numbers.Integral) or frequency < 1:
            raise ValueError(f"frequency must be an int >= 1 (steps between mask updates), got {frequency!r}.")
        self.frequency = int(frequency)
        if isinstance(power, bool) or not isinstance(power, numbers.Real) or power <= 0:
            raise ValueError(f"power must be a number > 0, got {power!r}.")
        self.power = power
        self._steps = None  # resolved (begin, end)

    def resolve(self, total_steps=None):
        """Turns durations into steps for a run of `total_steps` steps; returns (begin, end)."""
        begin = _resolve(self.begin_step, total_steps, "begin_step")
        end = _resolve(self.end_step, total_steps, "end_step")
        if end <= begin:
            raise ValueError(
                f"The pruning schedule ends (end_step={self.end_step!r} -> step {end}) before or when "
                f"it begins (begin_step={self.begin_step!r} -> step {begin}); end_step must be later."
            )
        self._steps = (begin, end)
        return self._steps

    def _resolved(self):
        if self._steps is None:
            if isinstance(self.begin_step, int) and isinstance(self.end_step, int):
                return self.resolve()
            raise ValueError("The schedule has durations: call resolve(total_steps) first.")
        return self._steps

    def sparsity(self, step):
        """The target sparsity at `step` (a Python float)."""
        if self.final_sparsity is None:
            raise ValueError("final_sparsity is not set (prune_low_magnitude sets it).")
        begin, end = self._resolved()
        value = sparsity_ops.polynomial_sparsity(
            step, self.initial_sparsity, self.final_sparsity, begin, end, self.power
        )
        return float(ops.convert_to_numpy(value))

    def should_update(self, step):
        """Whether the masks are recomputed at `step`."""
        begin, end = self._resolved()
        return begin <= step <= end and ((step - begin) % self.frequency == 0 or step == end)

    def with_final(self, final_sparsity):
        config = self.get_config()
        config["final_sparsity"] = final_sparsity
        return type(self).from_config(config)

    def get_config(self):
        return {
            "final_sparsity": self.final_sparsity, "initial_sparsity": self.initial_sparsity,
            "begin_step": self.begin_step, "end_step": self.end_step,
            "frequency": self.frequency, "power": self.power,
        }

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_config().items())
        return f"PolynomialDecay({args})"


def kernel_variable(layer):
    """The kernel variable of `layer` (`_kernel` under Keras' LoRA property), or None.

    Example:

    ```python
    boost.pruning.kernel_variable(model.get_layer("logits")).shape   # (64, 10)
    ```
    """
    for attr in ("_kernel", "kernel"):
        try:
            kernel = getattr(layer, attr, None)
        except Exception:  # a property that fails on an unbuilt layer
            kernel = None
        if isinstance(kernel, keras.Variable) and len(kernel.shape) >= 2:
            return kernel
    return None


def _has_kernel(layer):
    if kernel_variable(layer) is not None:
        return True
    # Unbuilt layers: Dense, EinsumDense and the convolutions have kernels.
    return not layer.built and isinstance(layer, _KERNEL_TYPES)


_KERNEL_TYPES = (
    keras.layers.Dense, keras.layers.EinsumDense, keras.layers.Conv1D, keras.layers.Conv2D,
    keras.layers.Conv3D, keras.layers.Conv1DTranspose, keras.layers.Conv2DTranspose,
    keras.layers.Conv3DTranspose, keras.layers.DepthwiseConv1D, keras.layers.DepthwiseConv2D,
    keras.layers.SeparableConv1D, keras.layers.SeparableConv2D,
)


@keras.saving.register_keras_serializable(package="keras_boost")
class PruneLowMagnitude(keras.layers.Wrapper):
    """Holds a layer's pruning mask and step; the forward pass is the layer's own.

    The mask (`kernel` shape, 0/1) and `pruning_step` are non-trainable
    variables, saved with the model. The kernel itself is kept exactly zero
    where the mask is 0 by `UpdatePruningMasks` after every batch.

    Args:
        layer: a layer with a `kernel` (Dense, Conv*, EinsumDense, ...).
        schedule: a `PolynomialDecay` with `final_sparsity` set.

    Example:

    ```python
    wrapped = boost.pruning.PruneLowMagnitude(keras.layers.Dense(8), boost.pruning.PolynomialDecay(0.5, end_step=100))
    ```
    """

    def __init__(self, layer, schedule, **kwargs):
        if isinstance(schedule, dict):
            schedule = keras.saving.deserialize_keras_object(schedule)
        if not isinstance(schedule, PolynomialDecay) or schedule.final_sparsity is None:
            raise ValueError(
                f"PruneLowMagnitude needs a PolynomialDecay schedule with final_sparsity set, got {schedule!r}."
            )
        kwargs.setdefault("name", f"prune_low_magnitude_{layer.name}")
        kwargs.setdefault("dtype", layer.dtype_policy)
        super().__init__(layer, **kwargs)
        self.schedule = schedule
        self._call_passes_training = keras_private.call_has_training_arg(layer)
        # Set by the UpdatePruningMasks callback that updates this layer's mask.
        self._masks_driven = False

    def build(self, input_shape=None):
        if not self.layer.built:
            self.layer.build(input_shape)
        kernel = kernel_variable(self.layer)
        if kernel is None:
            raise ValueError(
                f"Layer {self.layer.name!r} ({type(self.layer).__name__}) has no kernel to prune; "
                f"prunable layers have a `kernel` variable: {', '.join(t.__name__ for t in _KERNEL_TYPES)}."
            )
        self.mask = self.add_weight(
            name="pruning_mask", shape=kernel.shape, dtype=kernel.dtype,
            initializer="ones", trainable=False,
        )
        self.pruning_step = self.add_weight(
            name="pruning_step", shape=(), dtype="int32", initializer="zeros", trainable=False,
        )
        self.built = True

    @property
    def kernel(self):
        return kernel_variable(self.layer)

    def call(self, inputs, training=None):
        if training and not self._masks_driven:
            # Python, so on TF and JAX it runs when the train step is traced,
            # before any update.
            raise RuntimeError(
                f"{self.name!r} is being trained without the boost.pruning.UpdatePruningMasks "
                "callback, which advances the pruning schedule and applies the masks: without it "
                "nothing is pruned. Pass callbacks=[boost.pruning.UpdatePruningMasks()] to fit "
                "(a PrunedModel's fit adds it), or in a custom loop call its on_train_begin() "
                "and on_train_batch_end(step)."
            )
        if self._call_passes_training:
            return self.layer(inputs, training=training)
        return self.layer(inputs)

    def compute_output_shape(self, input_shape):
        return self.layer.compute_output_shape(input_shape)

    def compute_output_spec(self, *args, **kwargs):
        return self.layer.compute_output_spec(*args, **kwargs)

    def get_config(self):
        config = super().get_config()
        config["schedule"] = keras.saving.serialize_keras_object(self.schedule)
        return config

    @classmethod
    def from_config(cls, config, custom_objects=None):
        config = dict(config)
        config["layer"] = keras.saving.deserialize_keras_object(config["layer"], custom_objects=custom_objects)
        config["schedule"] = keras.saving.deserialize_keras_object(config["schedule"], custom_objects=custom_objects)
        return cls(**config)


def _pruned_wrappers(model):
    layers = keras_private.flatten_layers(model, include_self=False, recursive=True)
    return [layer for layer in layers if isinstance(layer, PruneLowMagnitude)]


def _check_model(model, what):
    check_rebuildable(model, what, "Wrap its layers in boost.pruning.PruneLowMagnitude yourself.")


def _fresh(layer):
    return layer.__class__.from_config(layer.get_config())


def _clone(model, clone_function, weight_source):
    """clone_model, then copies each original layer's weights into the clone."""
    clone = keras.models.clone_model(model, clone_function=clone_function)
    originals = [l for l in model.layers if not isinstance(l, keras.layers.InputLayer)]
    copies = [l for l in clone.layers if not isinstance(l, keras.layers.InputLayer)]
    for original, copy in zip(originals, copies):
        weight_source(original, copy)
    return clone


def prune_low_magnitude(model, target_sparsity, schedule=None, layers=None):
    """A copy of `model` set up for magnitude pruning to `target_sparsity`.

    Every layer with a kernel (or only those in `layers`) is wrapped in
    `PruneLowMagnitude`; weights are copied, `model` is left untouched. The
    copy is a `PrunedModel`: its `fit` runs the `UpdatePruningMasks()`
    callback that prunes (pass one yourself to set `total_steps`).

    Args:
        model: a built Sequential or functional `keras.Model`.
        target_sparsity: final fraction of zero weights per pruned kernel,
            in (0, 1].
        schedule: a `PolynomialDecay` (its `final_sparsity` may be None or
            must equal `target_sparsity`), its config dict, or None for
            `PolynomialDecay(begin_step=0, end_step="0.7dur", frequency=100)`.
        layers: optional layer names or layer objects (top-level layers of
            `model`) to prune; each must have a kernel.

    Returns:
        The new `PrunedModel` (functional, uncompiled).

    Raises:
        ValueError: sparsity outside (0, 1], a bad schedule, a named layer
            that does not exist or has no kernel.

    Example:

    ```python
    pruned = boost.pruning.prune_low_magnitude(model, 0.5, boost.pruning.PolynomialDecay(end_step="0.6dur"))
    pruned.compile(optimizer="adam", loss="mse")
    pruned.fit(x, y, epochs=2)
    ```
    """
    _check_model(model, "prune_low_magnitude")
    target_sparsity = _check_sparsity(target_sparsity, "target_sparsity")
    if schedule is None:
        schedule = PolynomialDecay()
    elif isinstance(schedule, dict):
        schedule = PolynomialDecay.from_config(schedule)
    if not isinstance(schedule, PolynomialDecay):
        raise TypeError(
            f"schedule must be a boost.pruning.PolynomialDecay, its config dict or None, got {schedule!r}."
        )
    if schedule.final_sparsity is not None and abs(schedule.final_sparsity - target_sparsity) > 1e-12:
        raise ValueError(
            f"The schedule's final_sparsity ({schedule.final_sparsity}) differs from target_sparsity "
            f"({target_sparsity}); leave final_sparsity=None."
        )
    schedule = schedule.with_final(target_sparsity)

    candidates = [l for l in model.layers if not isinstance(l, keras.layers.InputLayer)]
    prunable = [l for l in candidates if _has_kernel(l) and not isinstance(l, PruneLowMagnitude)]
    if layers is None:
        targets = prunable
    else:
        if isinstance(layers, (str, keras.layers.Layer)):
            layers = [layers]
        by_name = {l.name: l for l in candidates}
        targets = []
        for item in layers:
            layer = by_name.get(item) if isinstance(item, str) else item
            valid = ", ".join(repr(l.name) for l in prunable) or "none"
            if layer is None or all(layer is not l for l in candidates):
                raise ValueError(
                    f"prune_low_magnitude: {item!r} is not a top-level layer of the model; "
                    f"prunable layers: {valid}."
                )
            if all(layer is not l for l in prunable):
                raise ValueError(
                    f"prune_low_magnitude: layer {layer.name!r} ({type(layer).__name__}) has no kernel "
                    f"to prune; prunable layers of this model: {valid}."
                )
            targets.append(layer)
    if not targets:
        warnings.warn(
            "prune_low_magnitude found no layer with a kernel to prune; the copy is unpruned.",
            NoEffectWarning, stacklevel=2,
        )
    target_ids = {id(l) for l in targets}

    def clone_function(layer):
        if id(layer) in target_ids:
            return PruneLowMagnitude(_fresh(layer), schedule)
        return _fresh(layer)

    def copy_weights(original, copy):
        inner = copy.layer if isinstance(copy, PruneLowMagnitude) else copy
        inner.set_weights(original.get_weights())
        if isinstance(copy, PruneLowMagnitude) and not copy.built:
            copy.build()

    clone = _clone(model, clone_function, copy_weights)
    return PrunedModel(clone.input, clone.output, name=clone.name)


def apply_masks(model):
    """Multiplies every pruned kernel of `model` by its mask (eagerly). Returns the count.

    Example:

    ```python
    boost.pruning.apply_masks(pruned)   # e.g. after editing weights by hand
    ```
    """
    wrappers = _pruned_wrappers(model)
    for wrapper in wrappers:
        wrapper.kernel.assign(ops.multiply(wrapper.kernel, wrapper.mask))
    return len(wrappers)


def strip(model):
    """A plain copy of a pruned `model`: no wrappers or masks, the zeros baked in.

    Example:

    ```python
    plain = boost.pruning.strip(pruned)
    plain.save("pruned_plain.keras")
    ```
    """
    _check_model(model, "strip")
    if not _pruned_wrappers(model):
        warnings.warn("strip: the model has no pruned layers; returning a plain copy.", NoEffectWarning, stacklevel=2)

    def clone_function(layer):
        return _fresh(layer.layer if isinstance(layer, PruneLowMagnitude) else layer)

    def copy_weights(original, copy):
        if isinstance(original, PruneLowMagnitude):
            kernel = ops.convert_to_numpy(ops.multiply(original.kernel, original.mask))
            copy.set_weights(original.layer.get_weights())
            kernel_variable(copy).assign(kernel)
        else:
            copy.set_weights(original.get_weights())

    plain = _clone(model, clone_function, copy_weights)
    if isinstance(plain, PrunedModel):  # clone_model keeps the class
        plain = keras.Model(plain.input, plain.output, name=plain.name)
    return plain


def sparsity_report(model):
    """The real sparsity (fraction of exact zeros) of each kernel in `model`.

    Returns:
        A dict `{layer name: fraction}` over every layer with a kernel
        (pruned or not; a pruned layer is named after its inner layer).

    Example:

    ```python
    boost.pruning.sparsity_report(pruned)   # {"conv": 0.8, "logits": 0.8}
    ```
    """
    report = {}
    for layer in keras_private.flatten_layers(model, include_self=False, recursive=True):
        if isinstance(layer, PruneLowMagnitude):
            continue
        kernel = kernel_variable(layer)
        if kernel is not None:
            report[layer.name] = sparsity_ops.real_sparsity(kernel)
    return report


@keras.saving.register_keras_serializable(package="keras_boost")
class UpdatePruningMasks(keras.callbacks.Callback):
    """Advances the pruning schedule and re-applies the masks after every batch.

    At the end of each training batch, for every `PruneLowMagnitude` layer:
    if its schedule says so, the mask becomes the magnitude mask at the
    current sparsity; then the kernel is multiplied by the mask, so pruned
    weights are exactly zero after each optimizer update. Durations in the
    schedule are resolved from `epochs * steps` (or `total_steps`).

    Args:
        total_steps: optional length of the run in steps, for durations when
            `fit` cannot tell it (datasets of unknown length).

    Example:

    ```python
    pruned.fit(x, y, epochs=3, callbacks=[boost.pruning.UpdatePruningMasks()])
    ```
    """

    def __init__(self, total_steps=None):
        super().__init__()
        if total_steps is not None and (isinstance(total_steps, bool) or not isinstance(total_steps, int)
                                        or total_steps < 1):
            raise ValueError(f"total_steps must be None or an int >= 1, got {total_steps!r}.")
        self.total_steps = total_steps
        self._wrappers = []
        self._steps = []

    def on_train_begin(self, logs=None):
        self._wrappers = _pruned_wrappers(self.model)
        if not self._wrappers:
            warnings.warn(
                "UpdatePruningMasks: the model has no PruneLowMagnitude layers (use "
                "boost.pruning.prune_low_magnitude); nothing is pruned.", NoEffectWarning, stacklevel=2,
            )
            return
        total = self.total_steps
        if total is None and self.params.get("steps"):
            total = int(self.params["epochs"]) * int(self.params["steps"])
        for wrapper in self._wrappers:
            wrapper.schedule.resolve(total)
            wrapper._masks_driven = True
        self._steps = [int(ops.convert_to_numpy(w.pruning_step)) for w in self._wrappers]

    def on_epoch_begin(self, epoch, logs=None):
        self._last_batch = -1

    def on_train_batch_end(self, batch, logs=None):
        if not self._wrappers:
            return
        # With steps_per_execution = k this runs once per k batches.
        advanced = max(1, batch - getattr(self, "_last_batch", -1))
        self._last_batch = batch
        if keras.backend.backend() == "jax":
            self.model.jax_state_sync()  # the next step re-reads the variables
        for i, wrapper in enumerate(self._wrappers):
            step = self._steps[i]
            end = step + advanced
            if any(wrapper.schedule.should_update(s) for s in range(step, end)):
                kernel = wrapper.kernel
                masked = ops.multiply(kernel, wrapper.mask)  # already-pruned weights rank first
                # Never below the mask's sparsity: a later fit (its own length
                # resolving the durations) must not revive pruned weights.
                current = 1.0 - float(ops.convert_to_numpy(ops.mean(wrapper.mask)))
                target = max(wrapper.schedule.sparsity(end - 1), current)
                wrapper.mask.assign(sparsity_ops.magnitude_mask(masked, target))
            wrapper.kernel.assign(ops.multiply(wrapper.kernel, wrapper.mask))
            self._steps[i] = end
            wrapper.pruning_step.assign(end)

    def on_train_end(self, logs=None):
        unfinished = [
            (w, step) for w, step in zip(self._wrappers, self._steps) if step <= w.schedule._resolved()[1]
        ]
        if unfinished:
            wrapper, step = unfinished[0]
            warnings.warn(
                f"UpdatePruningMasks: training stopped at pruning step {step}, before the schedule's "
                f"end_step ({wrapper.schedule._resolved()[1]}); {len(unfinished)} layer(s) are below the "
                f"target sparsity {wrapper.schedule.final_sparsity} (see sparsity_report). Train longer "
                "or end the schedule earlier.", UserWarning, stacklevel=2,
            )

    def get_config(self):
        return {"total_steps": self.total_steps}

    @classmethod
    def from_config(cls, config):
        return cls(**config)


@keras.saving.register_keras_serializable(package="keras_boost")
class PrunedModel(keras.Model):
    """The functional model `prune_low_magnitude` returns: its `fit` prunes.

    `fit` adds an `UpdatePruningMasks()` callback unless its `callbacks`
    list holds one already (pass your own to set `total_steps`); everything
    else is `keras.Model`'s.

    Example:

    ```python
    pruned = boost.pruning.prune_low_magnitude(model, 0.8)   # a PrunedModel
    pruned.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    pruned.fit(x, y, epochs=3)
    ```
    """

    def fit(self, x=None, y=None, batch_size=None, epochs=1, verbose="auto", callbacks=None, **kwargs):
        # A ready CallbackList is left as given (without the callback, the
        # pruned layers raise at the first step).
        if not isinstance(callbacks, keras.callbacks.CallbackList) and not any(
            isinstance(c, UpdatePruningMasks) for c in callbacks or []
        ):
            callbacks = [*(callbacks or []), UpdatePruningMasks()]
        return super().fit(x, y, batch_size, epochs, verbose, callbacks, **kwargs)
