"""Training precision (float32 or mixed float16 / bfloat16), under the path users know.

The code lives in `keras_boost.algorithms.precision`: `choose_precision`
times a few training steps per precision and keeps the fastest,
`with_precision` copies a model under another dtype policy.

Example:

```python
choice = boost.precision.choose_precision(model, x_train[:256])
fast = boost.precision.with_precision(model, choice.policy)
```
"""

from keras_boost.algorithms.precision import choose_precision  # noqa: F401
from keras_boost.algorithms.precision import CONFIG_VALUES  # noqa: F401
from keras_boost.algorithms.precision import model_policies  # noqa: F401
from keras_boost.algorithms.precision import PrecisionChoice  # noqa: F401
from keras_boost.algorithms.precision import PRECISIONS  # noqa: F401
from keras_boost.algorithms.precision import resolve_precision  # noqa: F401
from keras_boost.algorithms.precision import signature  # noqa: F401
from keras_boost.algorithms.precision import time_training_steps  # noqa: F401
from keras_boost.algorithms.precision import with_precision  # noqa: F401

__all__ = [
    "choose_precision",
    "CONFIG_VALUES",
    "model_policies",
    "PrecisionChoice",
    "PRECISIONS",
    "resolve_precision",
    "signature",
    "time_training_steps",
    "with_precision",
]
