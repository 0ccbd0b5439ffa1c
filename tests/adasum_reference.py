"""NumPy reference of the AdaSum rule and tree (float64), shared by the tests."""

import numpy as np


def np_adasum(a, b):
    """Whole-tensor dot products; a zero vector gives the other unchanged."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    dot, na, nb = (a * b).sum(), (a * a).sum(), (b * b).sum()
    ca = 1.0 - dot / (2 * na) if na > 0 else 1.0
    cb = 1.0 - dot / (2 * nb) if nb > 0 else 1.0
    return ca * a + cb * b


def np_tree(tensors):
    """Pairs (0,1), (2,3), ...; an odd last element passes up unchanged."""
    tensors = [np.asarray(t, np.float64) for t in tensors]
    while len(tensors) > 1:
        level = [np_adasum(a, b) for a, b in zip(tensors[0::2], tensors[1::2])]
        if len(tensors) % 2:
            level.append(tensors[-1])
        tensors = level
    return tensors[0]
