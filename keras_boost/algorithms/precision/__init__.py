"""Mixed precision chosen per model: float32, mixed_float16 or mixed_bfloat16.

`with_precision(model, policy)` copies a model into a dtype policy (keeping
the output layers in float32); `choose_precision(model)` times a few
training steps per candidate policy and keeps the fastest when it is faster
by a margin (`PrecisionChoice`); `resolve_precision` applies the config's
`"common": {"precision": ...}` value, `"auto"` included.

Example:

```python
from keras_boost.algorithms.precision import choose_precision, with_precision

choice = choose_precision(model)
model = with_precision(model, choice.policy)
```

The method card: `docs/methods/precision.md`.
"""

from keras_boost.algorithms.precision.policy import CONFIG_VALUES
from keras_boost.algorithms.precision.policy import PRECISIONS
from keras_boost.algorithms.precision.policy import PrecisionChoice
from keras_boost.algorithms.precision.policy import choose_precision
from keras_boost.algorithms.precision.policy import model_policies
from keras_boost.algorithms.precision.policy import resolve_precision
from keras_boost.algorithms.precision.policy import signature
from keras_boost.algorithms.precision.policy import time_training_steps
from keras_boost.algorithms.precision.policy import with_precision

__all__ = [
    "CONFIG_VALUES",
    "PRECISIONS",
    "PrecisionChoice",
    "choose_precision",
    "model_policies",
    "resolve_precision",
    "signature",
    "time_training_steps",
    "with_precision",
]
