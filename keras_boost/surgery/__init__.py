"""Model surgery, under the path users know: LessBN and fused batch norm.

- `LessBN(model, fn_flag=False)`, `find_less_bn(model)` (the dry run, a
  `LessBNReport`), `patterns.PATTERNS`: `keras_boost.algorithms.less_bn`;
- `fuse_batch_norm(model)`, `count_batch_norms(model)`:
  `keras_boost.algorithms.fused_batch_norm`;
- `rebuild.rebuild(...)`, the model copy both make: `keras_boost.graph`.

Example:

```python
from keras_boost import surgery
print(surgery.find_less_bn(model))
```
"""

# The old modules first: importing `surgery.fuse_batch_norm` (the module)
# binds that name, which the function of the same name then takes back, as
# before the algorithms moved (`boost.surgery.less_bn.head_scale`,
# `boost.surgery.fuse_batch_norm(model)`).
from keras_boost.surgery import fuse_batch_norm  # noqa: F401
from keras_boost.surgery import less_bn  # noqa: F401
from keras_boost.surgery import patterns
from keras_boost.surgery import rebuild
from keras_boost.algorithms.fused_batch_norm import count_batch_norms
from keras_boost.algorithms.fused_batch_norm import fuse_batch_norm  # noqa: F811
from keras_boost.algorithms.less_bn import LessBN
from keras_boost.algorithms.less_bn import LessBNReport
from keras_boost.algorithms.less_bn import RemovedBN
from keras_boost.algorithms.less_bn import find_less_bn

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
