"""Graph machinery the model surgeries share (not an algorithm).

`rebuild(model, what, ...)` copies a Functional or Sequential model with
some layers removed, swapped or converted: LessBN, fused batch norm and
`with_precision` all make their copies with it.

Example:

```python
from keras_boost.graph import rebuild

copy = rebuild(model, "LessBN", removed_ids={id(model.get_layer("bn"))})
```
"""

from keras_boost.graph.rebuild import rebuild

__all__ = ["rebuild"]
