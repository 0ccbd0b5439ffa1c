"""Model surgery, under the path users know: LessBN and fused batch norm.

- `LessBN(model, fn_flag=False)`, `find_less_bn(model)` (the dry run, a
  `LessBNReport`), `patterns.PATTERNS`: `keras_boost.algorithms.less_bn`;
- `fuse_batch_norm(model)`, `count_batch_norms(model)`:
  `keras_boost.algorithms.fused_batch_norm`;
- `rebuild(model, what, ...)`, the model copy both make: `keras_boost.graph`.

Example:

```python
from keras_boost import surgery
print(surgery.find_less_bn(model))
```
"""

from keras_boost.algorithms.fused_batch_norm import count_batch_norms
from keras_boost.algorithms.fused_batch_norm import fuse_batch_norm
from keras_boost.algorithms.less_bn import LessBN
from keras_boost.algorithms.less_bn import LessBNReport
from keras_boost.algorithms.less_bn import RemovedBN
from keras_boost.algorithms.less_bn import find_less_bn
from keras_boost.algorithms.less_bn import patterns
from keras_boost.graph import rebuild

__all__ = [
    "LessBN",
    "LessBNReport",
    "RemovedBN",
    "count_batch_norms",
    "find_less_bn",
    "fuse_batch_norm",
    "patterns",
    "rebuild",
]
