"""Truncating a batch of token sequences to a shorter length, in `keras.ops`.

A batch is a sequence batch when its inputs hold integer tensors of shape
`(batch, length, ...)` (token ids; keras-hub's `{"token_ids", "padding_mask"}`
dicts too). Its length is theirs; every tensor of the inputs, targets and
sample weights whose axis 1 has that length is cut to its first `length`
positions (next-token targets, padding masks, per-token weights). Other
tensors (a per-example class label, a float feature vector) pass unchanged.

Example:

```python
from keras_boost.algorithms.seq_length_warmup import truncate_batch

x = np.zeros((4, 64), "int32")
y = np.zeros((4, 64), "int32")
(x, y, weights), full = truncate_batch((x, y, None), 16)  # x, y: (4, 16); full: 64
```
"""

import keras

__all__ = ["is_integer_tensor", "sequence_axis_length", "truncate_batch"]


def is_integer_tensor(tensor):
    """Whether `tensor` (a tensor or a `keras.KerasTensor`) holds integers (token ids)."""
    return "int" in keras.backend.standardize_dtype(tensor.dtype)


def sequence_axis_length(x):
    """The static axis-1 length of `x`'s integer tensors of rank >= 2, or None.

    Raises `ValueError` when they disagree (two token inputs of different
    lengths cannot be cut to one schedule).
    """
    lengths = {int(t.shape[1]) for t in keras.tree.flatten(x)
               if t is not None and hasattr(t, "shape") and len(t.shape) >= 2 and t.shape[1] is not None
               and is_integer_tensor(t)}
    if len(lengths) > 1:
        raise ValueError(f"Sequence-length warm-up needs one sequence length per batch; the integer inputs "
                         f"have lengths {sorted(lengths)}.")
    return lengths.pop() if lengths else None


def truncate_batch(batch, length):
    """`batch` (a structure of tensors) cut to `length` along the sequence axis.

    Returns `(batch, full_length)`; `full_length` is the batch's sequence
    length (None for a batch with no integer `(batch, length)` input, which
    comes back unchanged). Cutting is a static slice: each length is one
    trace of a compiled step.
    """
    inputs = batch[0] if isinstance(batch, tuple) else batch
    full = sequence_axis_length(inputs)
    if full is None or length >= full:
        return batch, full

    def cut(tensor):
        if tensor is None or not hasattr(tensor, "shape") or len(tensor.shape) < 2 or tensor.shape[1] != full:
            return tensor
        return tensor[:, :length]

    return keras.tree.map_structure(cut, batch, none_is_leaf=True), full
