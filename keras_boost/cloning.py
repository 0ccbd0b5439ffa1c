"""How `keras.models.clone_model` keeps a `BoostModel`'s settings.

`clone_model` rebuilds a functional model as
`type(model)(inputs, outputs, name=model.name)` right after running the
model's graph with copied layers (keras/src/models/cloning.py), which would
reset a `BoostModel` to its defaults (level O0). So each `BoostModel` notes
the symbolic outputs its graph made last (per thread, by weak reference,
`note_graph_run`), and a constructor called with exactly those outputs and
no boost argument takes the settings of the model they were copied from
(`graph_copy_source`).

Example:

```python
copy = keras.models.clone_model(model)  # a BoostModel at model's level
```
"""

import threading
import weakref

import keras

from keras_boost import keras_private
from keras_boost.auto_boost import AutoBoost
from keras_boost.algorithms.precision import model_policies

__all__ = ["graph_copy_source", "note_graph_run", "settings_of_copy"]

_last_graph_run = threading.local()


def note_graph_run(model, outputs):
    """Records that `model`'s graph just made `outputs`."""
    flat = keras.tree.flatten(outputs)
    if flat and all(isinstance(t, keras.KerasTensor) for t in flat):
        _last_graph_run.value = (weakref.ref(model), [weakref.ref(t) for t in flat])


def graph_copy_source(outputs):
    """The BoostModel whose graph, run with copied layers, made `outputs`, or None."""
    source, refs = getattr(_last_graph_run, "value", (lambda: None, []))
    source, flat = source(), keras.tree.flatten(outputs)
    if source is None or len(flat) != len(refs) or any(t is not r() for t, r in zip(flat, refs)):
        return None
    # `model(x)` on Keras tensors also runs the graph, but its outputs come
    # from the model itself: a new model around it is not a copy of it.
    if any(keras_private.keras_history_operation(t) is source for t in flat):
        return None
    return source


def settings_of_copy(copy, source, boost, precision_choice):
    """`(boost, precision_choice)` of `copy`, a clone of `source`: a copy in
    another precision (`boost.precision.with_precision`) records what it
    computes in, and its source's precision decision does not describe it."""
    policies = model_policies(copy)
    if policies == model_policies(source):
        return boost, precision_choice
    config = boost.config
    config["common"]["precision"] = next(iter(policies)) if len(policies) == 1 else None
    return AutoBoost(boost.level, config), None
