"""`ProgressiveResize`: the in-model half of progressive resizing.

Placed right after a model's input, it shrinks training batches to the size
that `keras_boost.callbacks.ProgressiveResizing` schedules, and passes
everything through unchanged at inference (`predict`, `evaluate`) and when
no callback drives it. See that callback for the design.
"""

import keras

from keras_boost.algorithms.progressive_resizing.schedule import check_scale
from keras_boost.algorithms.progressive_resizing.schedule import scheduled_size

__all__ = ["MODES", "ProgressiveResize"]

MODES = ("resize", "crop")


@keras.saving.register_keras_serializable(package="keras_boost")
class ProgressiveResize(keras.layers.Layer):
    """Shrinks training images to a scheduled scale; identity at inference.

    In training (`training=True`) with `scale < 1`, the spatial size `s` of
    each side becomes `scheduled_size(s, scale, size_increment)`: the
    nearest multiple of `size_increment`. `mode="resize"` resizes the batch
    (bilinear by default); `mode="crop"` takes one random crop of that size
    per batch. With `training=False`, or `scale == 1`, the inputs pass
    through untouched, so evaluation always sees full-size images.

    `scale` is a plain Python attribute, read when the train function is
    traced: under a compiled train function (TensorFlow, JAX) changing it
    takes effect only after a new trace, which
    `keras_boost.callbacks.ProgressiveResizing` forces each time the size
    changes. Set it yourself only between `fit` calls (and reset
    `model.train_function = None`).

    The rest of the model must accept any spatial size (convolutions and
    global pooling; no `Flatten` before a `Dense`).

    Args:
        mode: `"resize"` or `"crop"`.
        interpolation: for `mode="resize"`, any interpolation of
            `keras.ops.image.resize` (`"bilinear"`, `"nearest"`, ...).
        size_increment: sizes are rounded to a multiple of this (pixels).
        data_format: `"channels_last"` or `"channels_first"`; default
            `keras.config.image_data_format()`.
        seed: seed of the random crops.
        **kwargs: `keras.layers.Layer` arguments (`name`, ...).

    Example:

    ```python
    inputs = keras.Input((28, 28, 1))
    x = boost.layers.ProgressiveResize()(inputs)
    x = keras.layers.Conv2D(16, 3, activation="relu")(x)
    outputs = keras.layers.Dense(10)(keras.layers.GlobalAveragePooling2D()(x))
    model = keras.Model(inputs, outputs)
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(x_train, y_train, epochs=5,
              callbacks=[boost.callbacks.ProgressiveResizing(initial_scale=0.5,
                                                             finish_fraction="0.6dur")])
    ```
    """

    def __init__(self, mode="resize", interpolation="bilinear", size_increment=4,
                 data_format=None, seed=None, **kwargs):
        super().__init__(**kwargs)
        if mode not in MODES:
            raise ValueError(f"ProgressiveResize mode must be one of {MODES}, got {mode!r}.")
        if isinstance(size_increment, bool) or not isinstance(size_increment, int) or size_increment < 1:
            raise ValueError(f"size_increment must be an int >= 1 (pixels), got {size_increment!r}.")
        self.mode = mode
        self.interpolation = interpolation
        self.size_increment = size_increment
        data_format = data_format or keras.config.image_data_format()
        if data_format not in ("channels_last", "channels_first"):
            raise ValueError(
                f"data_format must be 'channels_last' or 'channels_first', got {data_format!r}."
            )
        self.data_format = data_format
        self.seed = seed
        self.scale = 1.0
        # Always created (one small variable), so that the mode can change later.
        self.seed_generator = keras.random.SeedGenerator(seed)
        self.traced_sizes = []  # (height, width) of each trace (or eager call) that shrank
        self.full_size = None  # (height, width) of the inputs, once known

    @property
    def scale(self):
        """The current scale in (0, 1]; 1 is the identity."""
        return self._scale

    @scale.setter
    def scale(self, value):
        self._scale = check_scale(value)

    def _spatial_axes(self):
        return (1, 2) if self.data_format == "channels_last" else (2, 3)

    def build(self, input_shape):
        if len(input_shape) != 4:
            raise ValueError(
                f"ProgressiveResize expects 4-D image batches, got input shape {input_shape}."
            )
        h, w = (input_shape[a] for a in self._spatial_axes())
        if h is not None and w is not None:
            self.full_size = (int(h), int(w))

    def target_size(self, full_size=None):
        """The (height, width) that training batches of `full_size` get now."""
        full_size = full_size or self.full_size
        if full_size is None:
            return None
        return tuple(scheduled_size(s, self.scale, self.size_increment) for s in full_size)

    def call(self, inputs, training=None):
        if not training or self.scale >= 1.0:
            return inputs
        ah, aw = self._spatial_axes()
        h, w = inputs.shape[ah], inputs.shape[aw]
        if h is None or w is None:
            raise ValueError(
                "ProgressiveResize needs static spatial dimensions in training, got "
                f"{inputs.shape}; batch the data to a fixed image size."
            )
        self.full_size = self.full_size or (int(h), int(w))
        th, tw = self.target_size((int(h), int(w)))
        if (th, tw) == (h, w):
            return inputs
        self.traced_sizes.append((th, tw))
        if self.mode == "resize":
            return keras.ops.image.resize(
                inputs, (th, tw), interpolation=self.interpolation, data_format=self.data_format
            )
        dy = keras.random.randint((), 0, h - th + 1, seed=self.seed_generator)
        dx = keras.random.randint((), 0, w - tw + 1, seed=self.seed_generator)
        x = keras.ops.take(inputs, dy + keras.ops.arange(th, dtype="int32"), axis=ah)
        return keras.ops.take(x, dx + keras.ops.arange(tw, dtype="int32"), axis=aw)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            mode=self.mode, interpolation=self.interpolation, size_increment=self.size_increment,
            data_format=self.data_format, seed=self.seed,
        )
        return config
