"""Model surgery: LessBN (BatchNormalization removal and the normalized head), fused batch norm.

- `LessBN(model, fn_flag=False)`: the new model (see `less_bn`);
- `fuse_batch_norm(model)`: a copy whose BatchNormalization layers train
  with one fused kernel (see `fuse_batch_norm`);
- `rebuild.rebuild(...)`: the model copy both surgeries make;
- `find_less_bn(model)`: a dry run returning the `LessBNReport`;
- `patterns.PATTERNS`: the patterns, as data.

Example:

```python
from keras_boost import surgery
print(surgery.find_less_bn(model))
```
"""

from keras_boost.surgery import patterns
from keras_boost.surgery import rebuild
from keras_boost.surgery.fuse_batch_norm import count_batch_norms
from keras_boost.surgery.fuse_batch_norm import fuse_batch_norm
from keras_boost.surgery.less_bn import LessBN
from keras_boost.surgery.less_bn import LessBNReport
from keras_boost.surgery.less_bn import RemovedBN
from keras_boost.surgery.less_bn import find_less_bn
