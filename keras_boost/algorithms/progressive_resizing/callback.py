"""`ProgressiveResizing`: train image models at a small size growing to full size.

Design (why a layer plus a callback). Keras' `fit` feeds the batches itself
and differs per backend in how (tf.data on TensorFlow, NumPy iterators on
JAX, a DataLoader on torch), so resizing the *data* would need one wrapper
per input kind (a `PyDataset` for NumPy, `dataset.map` for tf.data, ...) and
a model whose `Input` accepts every size. Resizing *inside the model*
works the same for every input kind and every backend:

- `keras_boost.layers.ProgressiveResize`, placed right after the input,
  shrinks training batches (`training=True`) to the scheduled size and is
  the identity at inference, so `evaluate`/`predict` (and the validation
  pass of `fit`) always see full-size images. The model keeps its
  full-size `Input`; everything after the layer must be size-agnostic
  (convolutions, global pooling).
- This callback computes the scale at each step from the fraction of
  training done (`initial_scale` until `start_fraction`, linear up to 1 at
  `finish_fraction`; see `keras_boost.algorithms.progressive_resizing.schedule`) and sets it on
  every `ProgressiveResize` layer of the model.

Retrace cost: TensorFlow and JAX compile the train function once per input
size, and a new scale is a Python value the compiled function cannot see.
So whenever the *rounded* size changes, the callback rebuilds the train
function (`model.make_train_function(force=True)`) and the next step traces
again. Sizes are rounded to multiples of `size_increment` (default 4 px),
so a run sees only a few distinct sizes: 16, 20, 24, 28 for 28x28 MNIST
from scale 0.5, i.e. 3 traces more than a plain run (each a few seconds on
CPU for a small ResNet; `compiles` counts them). On torch (eager) the
rebuild is free.

Example:

```python
inputs = keras.Input((28, 28, 1))
x = boost.layers.ProgressiveResize()(inputs)
...  # convolutions, then GlobalAveragePooling2D and Dense
model.fit(x_train, y_train, epochs=5, callbacks=[
    boost.callbacks.ProgressiveResizing(initial_scale=0.5, finish_fraction="0.6dur")])
```
"""

import re
import warnings

import keras
import numpy as np

from keras_boost import keras_private
from keras_boost.algorithms.progressive_resizing.layer import MODES
from keras_boost.algorithms.progressive_resizing.layer import ProgressiveResize
from keras_boost.algorithms.progressive_resizing.schedule import check_scale
from keras_boost.algorithms.progressive_resizing.schedule import resize_scale
from keras_boost.durations import parse_duration

__all__ = ["find_resize_layers", "ProgressiveResizing"]


def _training_error(model, specs, batch):
    """Why `model` cannot run a training forward pass on `batch`, or None."""
    call = (lambda *x: model(list(x) if len(x) > 1 else x[0], training=True))
    try:
        # Run first (torch raises the real error there, JAX gives NaN), then
        # traced as a compiled step is (TensorFlow fails only there).
        with keras.StatelessScope():
            outputs = call(*batch)
        keras_private.compute_output_spec(call, *specs)
    except Exception as error:  # noqa: BLE001 (any failure of the user's model is reported)
        # Keras' "Exception encountered when calling X.call()." puts the cause on the next line.
        lines = [line.strip() for line in re.sub(r"\x1b\[[0-9;]*m", "", str(error)).splitlines() if line.strip()]
        return f"{type(error).__name__}: {' '.join(lines[:2])[:300]}".rstrip(". ")
    if not all(np.all(np.isfinite(keras.ops.convert_to_numpy(o))) for o in keras.tree.flatten(outputs)):
        return "its outputs are not finite (a feature map shrank to 0x0)"
    return None


def find_resize_layers(model):
    """The `ProgressiveResize` layers of `model`, nested models included.

    Example:

    ```python
    find_resize_layers(model)  # [<ProgressiveResize name=progressive_resize>]
    ```
    """
    return [layer for layer in keras_private.flatten_layers(model, include_self=False, recursive=True)
            if isinstance(layer, ProgressiveResize)]


@keras.saving.register_keras_serializable(package="keras_boost")
class ProgressiveResizing(keras.callbacks.Callback):
    """Grows the training image size from `initial_scale` to full size.

    Drives the `keras_boost.layers.ProgressiveResize` layer(s) of the model
    (see the module docstring for why a layer): the scale is
    `initial_scale` until `start_fraction` of training, grows linearly to 1
    at `finish_fraction`, and stays 1 for the rest of the run (Composer's
    schedule). Fractions count optimizer steps over `epochs * steps` of the
    `fit` call (whole epochs when the number of steps per epoch is unknown).

    After `fit` the layers are back at scale 1 (the identity).

    Args:
        initial_scale: starting scale of each side, in (0, 1].
        finish_fraction: duration at which the full size is reached:
            `"0.6dur"` or a float in (0, 1].
        start_fraction: duration before which the scale stays at
            `initial_scale`: 0 (default), `"0.1dur"` or a float in [0, 1),
            below `finish_fraction`.
        size_increment: side lengths are rounded to a multiple of this
            (pixels; larger means fewer distinct sizes, fewer traces); set
            on the layers. None (default) keeps each layer's own (4 px by
            default).
        mode: `"resize"` (bilinear resize) or `"crop"` (one random crop per
            batch); set on the layers. None (default) keeps each layer's
            own mode ("resize" by default).
        verbose: 1 prints each new size.

    Attributes:
        sizes: `(step, (height, width))` each time the size changed.
        compiles: number of train-function rebuilds (one per new size).

    Example:

    ```python
    resizing = boost.callbacks.ProgressiveResizing(initial_scale=0.5, finish_fraction=0.6)
    model.fit(x_train, y_train, epochs=5, callbacks=[resizing])
    resizing.sizes  # [(0, (16, 16)), (54, (20, 20)), (108, (24, 24)), (162, (28, 28))] (63 steps/epoch)
    ```
    """

    def __init__(self, initial_scale=0.5, finish_fraction=0.6, start_fraction=0.0,
                 size_increment=None, mode=None, verbose=0):
        super().__init__()
        self.initial_scale = check_scale(initial_scale)
        self.finish_fraction = parse_duration(finish_fraction)
        if start_fraction in (0, 0.0, "0dur", "0"):
            self.start_fraction = 0.0
        else:
            self.start_fraction = parse_duration(start_fraction)
        if self.start_fraction >= self.finish_fraction:
            raise ValueError(
                f"start_fraction ({start_fraction!r}) must be below finish_fraction "
                f"({finish_fraction!r}): the scale grows between the two."
            )
        if size_increment is not None and (
                isinstance(size_increment, bool) or not isinstance(size_increment, int) or size_increment < 1):
            raise ValueError(f"size_increment must be None or an int >= 1 (pixels), got {size_increment!r}.")
        if mode is not None and mode not in MODES:
            raise ValueError(f"mode must be one of {MODES} or None, got {mode!r}.")
        self.size_increment = size_increment
        self.mode = mode
        self.verbose = verbose
        self.sizes = []
        self.compiles = 0

    def scale_at(self, fraction):
        """The scale at `fraction` of training."""
        return resize_scale(fraction, self.initial_scale, self.finish_fraction, self.start_fraction)

    def on_train_begin(self, logs=None):
        self._layers = find_resize_layers(self.model)
        if not self._layers:
            raise ValueError(
                f"ProgressiveResizing found no keras_boost.layers.ProgressiveResize layer in model "
                f"{self.model.name!r}: add one right after the input, e.g. "
                "x = boost.layers.ProgressiveResize()(inputs)."
            )
        for layer in self._layers:
            if self.size_increment is not None:
                layer.size_increment = self.size_increment
            if self.mode is not None:
                layer.mode = self.mode
        self._check_first_size()
        epochs = int(self.params.get("epochs") or 1)
        self._steps = self.params.get("steps")
        self._total = epochs * self._steps if self._steps else epochs
        self._epoch = 0
        self._current = None
        self.sizes, self.compiles = [], 0
        self._set_fraction(0.0, step=0, rebuild=True)

    def _check_first_size(self):
        """Fails before training when the model cannot train at its first size.

        A network that downsamples a small image too often breaks there: on
        TensorFlow the compiled step fails with "Negative dimension size", on
        torch the convolution raises, and on JAX a feature map shrinks to 0x0
        and the loss turns NaN without any error. So the model runs at each
        scheduled size, smallest first, until one works: eagerly on one
        example of ones (variable updates discarded), then traced as a
        compiled step is. Only a failure costs more than the first size.
        """
        inputs = getattr(self.model, "inputs", None)
        if not inputs or any(d is None for t in inputs for d in t.shape[1:]):
            return  # a subclassed model, or an unknown input size: nothing to run it on
        specs = [keras.KerasTensor((1, *t.shape[1:]), dtype=t.dtype) for t in inputs]
        batch = [np.ones(spec.shape, dtype=spec.dtype) for spec in specs]
        traced = [list(layer.traced_sizes) for layer in self._layers]
        failure, works = None, None  # (first size, why it fails); the smallest size that trains
        try:
            for scale in self._scheduled_scales():
                for layer in self._layers:
                    layer.scale = scale
                error = _training_error(self.model, specs, batch)
                if error is None:
                    works = self._key()[0]
                    break
                failure = failure or (self._key()[0], error)
        finally:
            for layer, sizes in zip(self._layers, traced):
                layer.scale = 1.0
                layer.traced_sizes[:] = sizes
        if failure is None:
            return
        size, error = failure
        if works is None:  # not even at full size: the check itself cannot run this model
            warnings.warn(f"ProgressiveResizing could not check that model {self.model.name!r} trains at "
                          f"its first size {size}: running it there and at full size failed with {error}.",
                          stacklevel=2)
            return
        full = self._layers[0].full_size
        if tuple(works) == tuple(full):
            fix = f"it trains only at its full size {works}: progressive resizing cannot act on it at this image size"
        else:
            fix = f"the smallest scheduled size it trains at is {works}: use initial_scale={works[0] / full[0]:g} or more"
        raise ValueError(
            f"ProgressiveResizing cannot train model {self.model.name!r} at its first size {size} "
            f"(initial_scale={self.initial_scale:g}): {error}. The network downsamples so small an "
            f"image to nothing; {fix}."
        )

    def _scheduled_scales(self):
        """The scale of each distinct size of the schedule, smallest first."""
        scales = {}
        for fraction in np.linspace(0.0, 1.0, 257):
            scale = self.scale_at(fraction)
            for layer in self._layers:
                layer.scale = scale
            scales.setdefault(self._key(), scale)
        return sorted(scales.values())

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch
        if not self._steps:
            self._set_fraction(epoch / self._total, step=epoch)

    def on_train_batch_begin(self, batch, logs=None):
        if self._steps:
            step = self._epoch * self._steps + batch
            self._set_fraction(step / self._total, step=step)

    def on_train_end(self, logs=None):
        for layer in self._layers:
            layer.scale = 1.0
        if self._key() != self._current:
            self.model.train_function = None  # it was traced at a smaller size
        self._layers = []

    def _key(self):
        return tuple(layer.target_size() for layer in self._layers)

    def _set_fraction(self, fraction, step, rebuild=False):
        scale = self.scale_at(fraction)
        for layer in self._layers:
            layer.scale = scale
        key = self._key()
        if key == self._current and not rebuild:
            return
        if key != self._current:
            self.sizes.append((int(step), key[0]))
            if self.verbose:
                print(f"ProgressiveResizing: step {step}, scale {scale:.3f}, size {key[0]}")
        self._current = key
        # The compiled train function baked the old size in: trace again.
        self.model.make_train_function(force=True)
        self.compiles += 1

    def get_config(self):
        return {
            "initial_scale": self.initial_scale,
            "finish_fraction": self.finish_fraction,
            "start_fraction": self.start_fraction,
            "size_increment": self.size_increment,
            "mode": self.mode,
            "verbose": self.verbose,
        }

    @classmethod
    def from_config(cls, config):
        return cls(**config)
