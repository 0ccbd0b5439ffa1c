"""NumPy reference of the AdaSum rule and tree (float64), shared by the tests."""

import numpy as np


def np_adasum(a, b, norm_bound=False):
    """Whole-tensor dot products; a zero vector gives the other unchanged.
    `norm_bound`: a result longer than the longer input is scaled down to it."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    dot, na, nb = (a * b).sum(), (a * a).sum(), (b * b).sum()
    ca = 1.0 - dot / (2 * na) if na > 0 else 1.0
    cb = 1.0 - dot / (2 * nb) if nb > 0 else 1.0
    result = ca * a + cb * b
    length, limit = np.linalg.norm(result), np.sqrt(max(na, nb))
    return result * (limit / length) if norm_bound and length > limit else result


def np_tree(tensors, norm_bound=False):
    """Pairs (0,1), (2,3), ...; an odd last element passes up unchanged."""
    tensors = [np.asarray(t, np.float64) for t in tensors]
    while len(tensors) > 1:
        level = [np_adasum(a, b, norm_bound) for a, b in zip(tensors[0::2], tensors[1::2])]
        if len(tensors) % 2:
            level.append(tensors[-1])
        tensors = level
    return tensors[0]
