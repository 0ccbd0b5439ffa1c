"""The AdaSum rule (Maleki et al., MLSys 2021) in `keras.ops` (pure functions).

    AdaSum(a, b) = (1 - a.b / (2 |a|^2)) a + (1 - a.b / (2 |b|^2)) b

per tensor: the dot product and the norms run over the whole tensor. Two
orthogonal updates add, two identical ones give one of them (the average),
opposite ones cancel. The rule is symmetric but not associative, so a list
is reduced over a fixed binary tree: pairs (0, 1), (2, 3), ..., then pairs of
their results, an odd last element passing up a level unchanged (for 2**k
inputs this is Horovod's tree).

Everything is computed in float32 (float64 inputs stay float64) and cast back
to the input dtype. A zero vector contributes nothing: the other input passes
unchanged.
"""

from keras import ops


def _compute_dtype(dtype):
    return "float64" if str(dtype) == "float64" else "float32"


def _coefficient(dot, norm_sq):
    # 1 - dot / (2 |x|^2), and 1 for a zero vector (its term vanishes then,
    # and dot is 0, so the other vector keeps coefficient 1).
    positive = ops.greater(norm_sq, 0)
    safe = ops.where(positive, norm_sq, ops.ones_like(norm_sq))
    return ops.where(positive, 1.0 - dot / (2.0 * safe), ops.ones_like(norm_sq))


def _pair(a, b, axes):
    dot = ops.sum(a * b, axis=axes, keepdims=True)
    coefficient_a = _coefficient(dot, ops.sum(a * a, axis=axes, keepdims=True))
    coefficient_b = _coefficient(dot, ops.sum(b * b, axis=axes, keepdims=True))
    return coefficient_a * a + coefficient_b * b


def adasum(a, b):
    """AdaSum of two tensors of the same shape.

    Example:

    ```python
    boost.ops.adasum(np.array([1., 0.]), np.array([0., 2.]))  # [1., 2.]: sum
    boost.ops.adasum(np.array([1., 2.]), np.array([1., 2.]))  # [1., 2.]: same
    ```
    """
    a, b = ops.convert_to_tensor(a), ops.convert_to_tensor(b)
    if tuple(a.shape) != tuple(b.shape):
        raise ValueError(
            f"adasum needs two tensors of the same shape, got {tuple(a.shape)} and {tuple(b.shape)}."
        )
    dtype = a.dtype
    compute = _compute_dtype(dtype)
    result = _pair(ops.cast(a, compute), ops.cast(b, compute), axes=None)
    return ops.cast(result, dtype)


def adasum_tree(stacked):
    """Reduces the leading axis of `stacked` (shape `(n, ...)`) with the tree.

    `adasum_tree(ops.stack(tensors))` equals `adasum_reduce(tensors)`; this
    form handles one tensor gathered from n replicas, each level of the tree
    in one vectorized step.
    """
    stacked = ops.convert_to_tensor(stacked)
    n = stacked.shape[0]
    if n is None or n < 1:
        raise ValueError(f"adasum_tree needs a known, non-empty leading axis, got shape {stacked.shape}.")
    dtype = stacked.dtype
    x = ops.cast(stacked, _compute_dtype(dtype))
    axes = tuple(range(1, len(x.shape))) or None
    while n > 1:
        pairs = n // 2
        combined = _pair(x[0 : 2 * pairs : 2], x[1 : 2 * pairs : 2], axes)
        x = ops.concatenate([combined, x[2 * pairs :]], axis=0) if n % 2 else combined
        n = pairs + n % 2
    return ops.cast(x[0], dtype)


def adasum_reduce(tensors):
    """AdaSum over a list of same-shape tensors, by the binary tree.

    Example:

    ```python
    # ((g0 (+) g1) (+) (g2 (+) g3)); with three inputs (g0 (+) g1) (+) g2.
    combined = boost.ops.adasum_reduce([g0, g1, g2, g3])
    ```
    """
    tensors = [ops.convert_to_tensor(t) for t in tensors]
    if not tensors:
        raise ValueError("adasum_reduce needs at least one tensor, got an empty list.")
    shapes = {tuple(t.shape) for t in tensors}
    if len(shapes) != 1:
        raise ValueError(f"adasum_reduce needs tensors of one shape, got shapes {sorted(shapes)}.")
    while len(tensors) > 1:
        level = [adasum(a, b) for a, b in zip(tensors[0::2], tensors[1::2])]
        if len(tensors) % 2:
            level.append(tensors[-1])
        tensors = level
    return tensors[0]


def group_mean(stacked, group_size):
    """Means of consecutive groups of `group_size` along the leading axis
    (the hierarchical layout: plain mean inside a node, AdaSum across)."""
    n = stacked.shape[0]
    if n % group_size:
        raise ValueError(f"group_size {group_size} does not divide the {n} inputs.")
    shape = (n // group_size, group_size) + tuple(stacked.shape[1:])
    return ops.mean(ops.reshape(stacked, shape), axis=1)
