"""Orthogonalized (Muon-style) updates around any Keras optimizer.

`OrthogonalUpdates(optimizer)` replaces the wrapped optimizer's update of
each hidden weight matrix (2-D Dense kernels and MultiHeadAttention's 3-D
EinsumDense kernels, viewed as fan-in x fan-out matrices) by a momentum
buffer orthogonalized with Keras' Newton-Schulz iteration and scaled to the
wrapped optimizer's update size, stepped with its learning rate and weight
decay; embeddings, the output layer and vectors keep the optimizer's own
update. `newton_schulz` holds the math, `routing` the choice of variables.

Example:

```python
from keras_boost.algorithms.orthogonal_updates import OrthogonalUpdates

model.compile(optimizer=OrthogonalUpdates(keras.optimizers.AdamW(1e-3)), loss="mse")
```

The method card: `docs/methods/orthogonal_updates.md`.
"""

from keras_boost.algorithms.orthogonal_updates.newton_schulz import NS_COEFFICIENTS
from keras_boost.algorithms.orthogonal_updates.newton_schulz import matrix_shape
from keras_boost.algorithms.orthogonal_updates.newton_schulz import momentum_direction
from keras_boost.algorithms.orthogonal_updates.newton_schulz import orthogonal_update
from keras_boost.algorithms.orthogonal_updates.newton_schulz import orthogonalize
from keras_boost.algorithms.orthogonal_updates.newton_schulz import update_scale
from keras_boost.algorithms.orthogonal_updates.optimizer import OrthogonalUpdates
from keras_boost.algorithms.orthogonal_updates.routing import einsum_split
from keras_boost.algorithms.orthogonal_updates.routing import route_by_name
from keras_boost.algorithms.orthogonal_updates.routing import routes_for_model

__all__ = [
    "NS_COEFFICIENTS",
    "OrthogonalUpdates",
    "einsum_split",
    "matrix_shape",
    "momentum_direction",
    "orthogonal_update",
    "orthogonalize",
    "route_by_name",
    "routes_for_model",
    "update_scale",
]
