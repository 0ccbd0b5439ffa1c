"""Which examples of a batch to train on: the pure math of selective backprop, in `keras.ops`.

- `per_example_loss(loss_fn, y, y_pred)`: the compiled loss of each example,
  unreduced (a per-token loss is averaged over the example's tokens);
- `kept_count(batch_size, keep)`: how many examples a step keeps;
- `hardest_examples(losses, count)`: the indices of the `count` examples
  with the highest loss, hardest first;
- `take_examples(batch, indices)`: those examples of every tensor of a
  batch structure.

Example:

```python
from keras_boost.algorithms.selective_backprop import hardest_examples

hardest_examples(np.array([0.1, 2.0, 0.5, 1.0]), 2)   # [1, 3]
```
"""

import keras
from keras import ops

__all__ = ["example_loss_function", "hardest_examples", "kept_count", "per_example_loss", "take_examples"]


def example_loss_function(loss):
    """The unreduced form of a compiled `loss` (a name, a `keras.losses.Loss`
    or a function `loss(y_true, y_pred)`); raises `ValueError` for a loss
    per output (a dict or list), whose examples have no single ranking."""
    if isinstance(loss, (dict, list, tuple)):
        raise ValueError(
            f"Selective backprop ranks examples by one loss; this model compiles one per output "
            f"({type(loss).__name__} of {len(loss)}). Compile a single loss, or switch "
            "selective_backprop off."
        )
    if loss is None:
        raise ValueError("Selective backprop ranks examples by the compiled loss; compile the model "
                         "with a loss (model.compile(..., loss=...)).")
    loss = keras.losses.get(loss) if isinstance(loss, str) else loss
    if isinstance(loss, keras.losses.Loss):
        return loss.call  # before the reduction
    if callable(loss):
        return loss
    raise ValueError(f"Selective backprop cannot rank examples by the loss {loss!r}: give a loss name, "
                     "a keras.losses.Loss or a function loss(y_true, y_pred).")


def per_example_loss(loss_fn, y, y_pred):
    """Each example's loss, shape `(batch,)`: `loss_fn`'s unreduced values
    averaged over every axis but the first."""
    values = ops.convert_to_tensor(loss_fn(y, y_pred))
    if len(values.shape) == 0:
        raise ValueError("Selective backprop needs one loss per example; the compiled loss function "
                         "returned a scalar (it reduces the batch itself).")
    if len(values.shape) > 1:
        values = ops.mean(ops.reshape(values, (ops.shape(values)[0], -1)), axis=1)
    return ops.cast(values, "float32")


def kept_count(batch_size, keep):
    """How many of `batch_size` examples a step keeps: `round(keep *
    batch_size)`, at least 1. A Python int for an int `batch_size`; an int32
    tensor for a batch size known only when the step runs (TensorFlow's
    trace of a `tf.data` batch; XLA folds it into a constant)."""
    if isinstance(batch_size, int):
        return max(1, int(round(keep * batch_size)))
    count = ops.cast(ops.round(keep * ops.cast(batch_size, "float32")), "int32")
    return ops.maximum(count, 1)


def hardest_examples(losses, count):
    """The indices of the `count` highest `losses`, highest first."""
    return ops.top_k(ops.convert_to_tensor(losses), count, sorted=True)[1]


def take_examples(batch, indices):
    """`batch` (a structure of tensors with a leading batch axis; None
    passes) restricted to the examples at `indices`."""
    return keras.tree.map_structure(
        lambda t: None if t is None else ops.take(t, indices, axis=0), batch, none_is_leaf=True)
