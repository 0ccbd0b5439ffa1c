"""Schedule math of progressive resizing: pure Python, no Keras.

The glue lives in `callback.ProgressiveResizing` (with the
`layer.ProgressiveResize` layer); this module only answers "what size at
fraction f of training?", so it is tested on its own.

- `resize_scale(f, ...)`: the image scale at fraction `f` of training:
  `initial_scale` until `start_fraction`, then linear up to 1 at
  `finish_fraction`, then 1 (Composer's ProgressiveResizing schedule).
- `scheduled_size(full, scale, size_increment)`: the side length in pixels,
  rounded to the nearest multiple of `size_increment` (so that only a few
  distinct sizes, hence a few traces of the train function, occur).

Example:

```python

from keras_boost.algorithms.progressive_resizing import resize_scale, scheduled_size

scale = resize_scale(0.3, initial_scale=0.5, finish_fraction=0.6)  # 0.75
scheduled_size(28, scale, size_increment=4)                        # 20
```
"""

import math

__all__ = ["check_scale", "resize_scale", "scheduled_size"]


def check_scale(initial_scale):
    """Validates `initial_scale`: a number in (0, 1]; returns it as a float.

    Example:

    ```python
    check_scale(0.5)  # 0.5
    check_scale(1.5)  # ValueError: initial_scale must be a number in (0, 1] ...
    ```
    """
    try:
        scale = float(initial_scale)
    except (TypeError, ValueError):
        scale = float("nan")
    if isinstance(initial_scale, bool) or not 0.0 < scale <= 1.0:
        raise ValueError(
            f"initial_scale must be a number in (0, 1] (the fraction of the full image size "
            f"to start from, e.g. 0.5), got {initial_scale!r}."
        )
    return scale


def resize_scale(fraction, initial_scale=0.5, finish_fraction=0.6, start_fraction=0.0):
    """The image scale at `fraction` of training.

    Args:
        fraction: progress through training, in [0, 1] (clipped).
        initial_scale: scale in (0, 1] used until `start_fraction`.
        finish_fraction: fraction at which the scale reaches 1.
        start_fraction: fraction at which the scale starts to grow
            (must be below `finish_fraction`).

    Returns:
        The scale, a float in [initial_scale, 1].

    Example:

    ```python
    resize_scale(0.0)  # 0.5
    resize_scale(0.3)  # 0.75
    resize_scale(0.6)  # 1.0
    ```
    """
    f = min(max(float(fraction), 0.0), 1.0)
    if f <= start_fraction:
        return float(initial_scale)
    if f >= finish_fraction:
        return 1.0
    progress = (f - start_fraction) / (finish_fraction - start_fraction)
    return float(initial_scale + (1.0 - initial_scale) * progress)


def scheduled_size(full_size, scale, size_increment=4):
    """The side length at `scale` of `full_size`, a multiple of `size_increment`.

    Rounded to the nearest multiple of `size_increment` (halves up), at
    least `size_increment` and at most `full_size`; `full_size` itself at
    scale 1 even when it is not a multiple.

    Example:

    ```python
    scheduled_size(28, 0.5)   # 16 (14 rounds up to 16)
    scheduled_size(28, 0.75)  # 20 (21 -> 20)
    scheduled_size(28, 1.0)   # 28
    ```
    """
    full_size, size_increment = int(full_size), int(size_increment)
    if scale >= 1.0:
        return full_size
    size = int(math.floor(full_size * float(scale) / size_increment + 0.5)) * size_increment
    return int(min(max(size, min(size_increment, full_size)), full_size))
