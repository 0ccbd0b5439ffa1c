"""LessBN: fewer BatchNormalization layers, and a normalized classifier head.

`LessBN(model)` removes the BatchNormalization layers MindSpore's LessBN
pass removes (ResNet basic and bottleneck blocks, MobileNetV2 inverted
residuals, DenseNet dense layers: the patterns, as data, are in `patterns`);
with `fn_flag=True` the classifier's last `Dense` becomes a
`NormalizedDense`. `find_less_bn(model)` is the dry run.

Modules, one concept each: `patterns` (the patterns), `graph_view` (a
model's layer graph), `matcher` (pattern matching), `pretrained` (the frozen
and trained BNs kept), `head` (the head `fn_flag` swaps), `report`
(`LessBNReport`), `dry_run` (`find_less_bn`), `surgery` (`LessBN`).

Example:

```python
from keras_boost.algorithms.less_bn import LessBN, find_less_bn

print(find_less_bn(model))           # what would go
model = LessBN(model, fn_flag=True)  # a new model; the input is not mutated
```

The method card: `docs/methods/less_bn.md`.
"""

from keras_boost.algorithms.less_bn import patterns
from keras_boost.algorithms.less_bn.normalized_dense import NO_GC_ATTR
from keras_boost.algorithms.less_bn.normalized_dense import NormalizedDense
from keras_boost.algorithms.less_bn.normalized_dense import adacos_scale
from keras_boost.algorithms.less_bn.normalized_dense import matched_scale
from keras_boost.algorithms.less_bn.dry_run import find_less_bn
from keras_boost.algorithms.less_bn.dry_run import patterns_without
from keras_boost.algorithms.less_bn.dry_run import unchanged_report
from keras_boost.algorithms.less_bn.head import head_scale
from keras_boost.algorithms.less_bn.report import REPORT_ATTR
from keras_boost.algorithms.less_bn.report import LessBNReport
from keras_boost.algorithms.less_bn.report import RemovedBN
from keras_boost.algorithms.less_bn.surgery import LessBN
from keras_boost.algorithms.less_bn.surgery import less_bn_for_config

__all__ = [
    "LessBN",
    "LessBNReport",
    "NO_GC_ATTR",
    "NormalizedDense",
    "REPORT_ATTR",
    "RemovedBN",
    "adacos_scale",
    "find_less_bn",
    "head_scale",
    "less_bn_for_config",
    "matched_scale",
    "patterns",
    "patterns_without",
    "unchanged_report",
]
