"""Graph machinery the model surgeries share (not an algorithm).

`topological_nodes(model)` lists a functional model's layer calls, each
after its producers, and `producer(tensor)` gives the call behind one
tensor: LessBN's matcher, prefix caching's split and gradient
centralization's gate finder read graphs with them.
`rebuild(model, what, ...)` copies a Functional or Sequential model with
some layers removed, swapped or converted: LessBN, fused batch norm and
`with_precision` all make their copies with it.

Example:

```python
from keras_boost.graph import rebuild

copy = rebuild(model, "LessBN", removed_ids={id(model.get_layer("bn"))})
```
"""

from keras_boost.graph.nodes import layers_shared_with_nested_models
from keras_boost.graph.nodes import producer
from keras_boost.graph.nodes import topological_nodes
from keras_boost.graph.rebuild import rebuild

__all__ = ["layers_shared_with_nested_models", "producer", "rebuild", "topological_nodes"]
