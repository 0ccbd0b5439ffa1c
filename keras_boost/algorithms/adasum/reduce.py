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

`norm_bound=True` scales each pairwise result down, when it is longer, to the
norm of the longer input (its norm follows from the same three dot products:
|ca a + cb b|^2 = ca^2 |a|^2 + 2 ca cb a.b + cb^2 |b|^2), so a tree result is
never longer than its longest input. Orthogonal inputs of equal norm then
give their sum's direction at that norm; parallel or opposite inputs (whose
AdaSum is their mean) are unchanged. `keras_boost.optimizers.AdaSum` says why.
"""

from keras import ops

__all__ = [
    "adasum",
    "adasum_reduce",
    "adasum_tree",
    "bit_reversed",
    "combine_halves",
    "group_mean",
    "halving_doubling",
    "halving_levels",
    "partial_dots",
    "run_collectives",
    "simulate_halving_doubling",
    "split_halves",
]


# Relative slack on the squared norm before `norm_bound` shrinks a result:
# float rounding must not shrink the combination of identical inputs.
_ROUNDING_SLACK = 1e-6


def _compute_dtype(dtype):
    return "float64" if str(dtype) == "float64" else "float32"


def _coefficient(dot, norm_sq):
    # 1 - dot / (2 |x|^2), and 1 for a zero vector (its term vanishes then,
    # and dot is 0, so the other vector keeps coefficient 1).
    positive = ops.greater(norm_sq, 0)
    safe = ops.where(positive, norm_sq, ops.ones_like(norm_sq))
    return ops.where(positive, 1.0 - dot / (2.0 * safe), ops.ones_like(norm_sq))


def _bound_factor(coefficient_a, coefficient_b, dot, norm_sq_a, norm_sq_b):
    # The factor that scales ca a + cb b down to the longer input's norm
    # (1 when it is not longer), from the three dot products alone.
    combined_sq = (
        coefficient_a**2 * norm_sq_a + 2.0 * coefficient_a * coefficient_b * dot + coefficient_b**2 * norm_sq_b
    )
    limit_sq = ops.maximum(norm_sq_a, norm_sq_b)
    longer = ops.greater(combined_sq, limit_sq * (1.0 + _ROUNDING_SLACK))
    safe = ops.where(longer, combined_sq, ops.ones_like(combined_sq))
    return ops.where(longer, ops.sqrt(limit_sq / safe), ops.ones_like(combined_sq))


def _coefficients(dot, norm_sq_a, norm_sq_b, norm_bound):
    """`(ca, cb)`: AdaSum(a, b) = ca a + cb b, from a.b, |a|^2 and |b|^2."""
    coefficient_a = _coefficient(dot, norm_sq_a)
    coefficient_b = _coefficient(dot, norm_sq_b)
    if norm_bound:
        scale = _bound_factor(coefficient_a, coefficient_b, dot, norm_sq_a, norm_sq_b)
        coefficient_a, coefficient_b = scale * coefficient_a, scale * coefficient_b
    return coefficient_a, coefficient_b


def _pair(a, b, axes, norm_bound=False):
    def dot(x, y):
        return ops.sum(x * y, axis=axes, keepdims=True)

    coefficient_a, coefficient_b = _coefficients(dot(a, b), dot(a, a), dot(b, b), norm_bound)
    return coefficient_a * a + coefficient_b * b


def adasum(a, b, norm_bound=False):
    """AdaSum of two tensors of the same shape.

    With `norm_bound=True` the result is scaled down, when it is longer, to
    the norm of the longer input (see `keras_boost.optimizers.AdaSum`).

    Example:

    ```python
    boost.ops.adasum(np.array([1., 0.]), np.array([0., 2.]))  # [1., 2.]: sum
    boost.ops.adasum(np.array([1., 2.]), np.array([1., 2.]))  # [1., 2.]: same
    boost.ops.adasum(np.array([3., 0.]), np.array([0., 4.]), norm_bound=True)  # [2.4, 3.2]
    ```
    """
    a, b = ops.convert_to_tensor(a), ops.convert_to_tensor(b)
    if tuple(a.shape) != tuple(b.shape):
        raise ValueError(
            f"adasum needs two tensors of the same shape, got {tuple(a.shape)} and {tuple(b.shape)}."
        )
    dtype = a.dtype
    compute = _compute_dtype(dtype)
    result = _pair(ops.cast(a, compute), ops.cast(b, compute), axes=None, norm_bound=norm_bound)
    return ops.cast(result, dtype)


def adasum_tree(stacked, norm_bound=False):
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
        combined = _pair(x[0 : 2 * pairs : 2], x[1 : 2 * pairs : 2], axes, norm_bound)
        x = ops.concatenate([combined, x[2 * pairs :]], axis=0) if n % 2 else combined
        n = pairs + n % 2
    return ops.cast(x[0], dtype)


def adasum_reduce(tensors, norm_bound=False):
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
        level = [adasum(a, b, norm_bound) for a, b in zip(tensors[0::2], tensors[1::2])]
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


# --- the halving/doubling exchange (Horovod's AdaSum pattern) ------------------
# For 2**k replicas the tree above can be computed without any replica holding
# all the gradients: at level l (distance d = 2**l) replica r and its partner
# r ^ d swap halves of their current vector (the lower one keeps the first
# half), compute the dot products of the halves they kept, sum them over the
# block of 2d replicas that together hold the two subtrees' vectors, and
# combine their halves. After k levels each replica holds 1/2**k of the
# result, which an all-gather reassembles. Each replica sends
# S/2 + S/4 + ... of its S values and then gathers (1 - 1/n) S: the bytes of
# a ring all-reduce, where gathering every gradient receives (n - 1) S.
# These pure pieces are what every replica computes; `simulate_halving_doubling`
# runs them for all replicas at once (the reference for the collective version).


def halving_levels(replicas):
    """The number of levels for `replicas`, a power of two (else ValueError)."""
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 1 or replicas & (replicas - 1):
        raise ValueError(f"The halving/doubling exchange needs a power-of-two replica count, got {replicas!r}.")
    return replicas.bit_length() - 1


def split_halves(x, segment_ids, lower):
    """`(kept, sent, kept_ids)`: the lower partner keeps the first half."""
    half = x.shape[0] // 2
    if lower:
        return x[:half], x[half:], segment_ids[:half]
    return x[half:], x[:half], segment_ids[half:]


def partial_dots(lower_half, upper_half, segment_ids, num_segments):
    """`(3, num_segments)`: per segment a.b, a.a and b.b over these halves
    (a: the lower subtree's vector, b: the upper one's)."""
    return ops.stack([
        ops.segment_sum(lower_half * upper_half, segment_ids, num_segments),
        ops.segment_sum(lower_half * lower_half, segment_ids, num_segments),
        ops.segment_sum(upper_half * upper_half, segment_ids, num_segments),
    ])


def combine_halves(lower_half, upper_half, segment_ids, dots, norm_bound=False):
    """The AdaSum of the two halves, from the block's summed `dots`."""
    coefficient_a, coefficient_b = _coefficients(dots[0], dots[1], dots[2], norm_bound)
    coefficient_a = ops.take(coefficient_a, segment_ids)
    coefficient_b = ops.take(coefficient_b, segment_ids)
    return coefficient_a * lower_half + coefficient_b * upper_half


def bit_reversed(index, levels):
    """Where replica `index`'s final chunk lies: its bits reversed.

    Example:

    ```python
    [bit_reversed(r, 2) for r in range(4)]   # [0, 2, 1, 3]
    ```
    """
    return int(format(index, f"0{levels}b")[::-1], 2) if levels else 0


def halving_doubling(x, segment_ids, num_segments, rank, replicas, norm_bound=False):
    """One replica's side of the exchange, as a generator of its collectives.

    It yields `("exchange", level, tensor)` (send `tensor` to the partner
    `rank ^ 2**level`; send back what the partner sent) and
    `("block_sum", level, partials)` (send back the SUM of `partials` over
    the block of `2**(level + 1)` replicas holding `rank`), and returns this
    replica's chunk of the result: chunk `bit_reversed(rank, levels)` of the
    `len(x) / replicas` long chunks. `run_collectives` drives it with real
    collectives, `simulate_halving_doubling` for all replicas at once.

    Args:
        x: this replica's flat float32 vector; its length a multiple of
            `replicas` (a power of two).
        segment_ids: `(len(x),)` int32, the tensor each position belongs to
            (AdaSum's dot products are per tensor).
        num_segments: number of segments.
        rank: this replica's id; replicas: the replica count.
        norm_bound: bound every combination (see the module docstring).
    """
    levels = halving_levels(replicas)
    if x.shape[0] % replicas:
        raise ValueError(f"The vector length {x.shape[0]} must be a multiple of the {replicas} replicas.")
    for level in range(levels):
        lower = not rank & (2**level)
        kept, sent, kept_ids = split_halves(x, segment_ids, lower)
        received = yield "exchange", level, sent
        a, b = (kept, received) if lower else (received, kept)
        dots = yield "block_sum", level, partial_dots(a, b, kept_ids, num_segments)
        x, segment_ids = combine_halves(a, b, kept_ids, dots, norm_bound), kept_ids
    return x


def run_collectives(steps, exchange, block_sum):
    """Drives one `halving_doubling` generator; returns its chunk.

    `exchange(tensor, level)` and `block_sum(tensor, level)` are the
    collectives (see `keras_boost.backend.tensorflow_collectives`).
    """
    try:
        kind, level, value = next(steps)
        while True:
            reply = exchange(value, level) if kind == "exchange" else block_sum(value, level)
            kind, level, value = steps.send(reply)
    except StopIteration as done:
        return done.value


def simulate_halving_doubling(stacked, segment_ids, num_segments, norm_bound=False):
    """The halving/doubling exchange of every replica, run in one place.

    Args:
        stacked: `(n, L)` float32, replica r's flat vector in row r; n a
            power of two and L a multiple of n.
        segment_ids: `(L,)` int32, which tensor (segment) each position
            belongs to.
        num_segments: number of segments.
        norm_bound: as for `adasum_tree`.

    Returns:
        `(L,)`, equal to `adasum_tree` applied per segment (up to the order
        of float additions): the reference for the collective version.

    Example:

    ```python
    ids = np.array([0, 0, 1, 1])   # two tensors of 2 values each, from 4 replicas
    simulate_halving_doubling(np.random.rand(4, 4).astype("float32"), ids, 2)
    ```
    """
    n = stacked.shape[0]
    levels = halving_levels(n)
    if levels == 0:
        return stacked[0]
    ids = ops.convert_to_tensor(segment_ids, "int32")
    steps = [halving_doubling(stacked[r], ids, num_segments, r, n, norm_bound) for r in range(n)]
    requests = [next(step) for step in steps]
    results = [None] * n
    while requests:  # every replica makes the same requests, level by level
        kind, level = requests[0][:2]
        values = [request[2] for request in requests]
        if kind == "exchange":
            replies = [values[r ^ (2**level)] for r in range(n)]
        else:
            block = 2 ** (level + 1)
            replies = [sum(values[(r // block) * block + i] for i in range(block)) for r in range(n)]
        next_requests = []
        for r, (step, reply) in enumerate(zip(steps, replies)):
            try:
                next_requests.append(step.send(reply))
            except StopIteration as done:
                results[r] = done.value
        requests = next_requests
    chunks = [None] * n
    for r in range(n):
        chunks[bit_reversed(r, levels)] = results[r]
    return ops.concatenate(chunks, axis=0)
