"""Progressive resizing: train on smaller images first (Composer's method).

A `ProgressiveResize` layer right after the input resizes the batch to the
size the `ProgressiveResizing` callback sets: `initial_scale` of the full
size at first, growing linearly to the full size at `finish_fraction` of
training (`resize_scale`, `scheduled_size`: the pure schedule).

Example:

```python
from keras_boost.algorithms.progressive_resizing import ProgressiveResize, ProgressiveResizing

inputs = keras.Input((32, 32, 3))
h = ProgressiveResize()(inputs)
...
model.fit(x, y, epochs=10, callbacks=[ProgressiveResizing(initial_scale=0.5, finish_fraction="0.6dur")])
```

The method card: `docs/methods/progressive_resizing.md`.
"""

from keras_boost.algorithms.progressive_resizing.callback import ProgressiveResizing
from keras_boost.algorithms.progressive_resizing.callback import find_resize_layers
from keras_boost.algorithms.progressive_resizing.layer import MODES
from keras_boost.algorithms.progressive_resizing.layer import ProgressiveResize
from keras_boost.algorithms.progressive_resizing.schedule import check_scale
from keras_boost.algorithms.progressive_resizing.schedule import resize_scale
from keras_boost.algorithms.progressive_resizing.schedule import scheduled_size

__all__ = [
    "MODES",
    "ProgressiveResize",
    "ProgressiveResizing",
    "check_scale",
    "find_resize_layers",
    "resize_scale",
    "scheduled_size",
]
