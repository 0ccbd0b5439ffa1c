"""Model surgery: LessBN (BatchNormalization removal and the normalized head).

- `LessBN(model, fn_flag=False)`: the new model (see `less_bn`);
- `find_less_bn(model)`: a dry run returning the `LessBNReport`;
- `patterns.PATTERNS`: the patterns, as data.

Example:

```python
from keras_boost import surgery
print(surgery.find_less_bn(model))
```
"""

from keras_boost.surgery import patterns
from keras_boost.surgery.less_bn import LessBN
from keras_boost.surgery.less_bn import LessBNReport
from keras_boost.surgery.less_bn import RemovedBN
from keras_boost.surgery.less_bn import find_less_bn
