"""PCA of a weight trajectory (DimReduce's subspace), in NumPy.

`trajectory_pca(samples, k)` returns the top-k principal directions of the
snapshots (rows of `samples`, one flattened weight vector each) as the rows
of a k x n matrix P with orthonormal rows.

It works on the m x m Gram matrix of the centred snapshots (m snapshots, n
weights, m << n): exact, deterministic, and it never holds more than the
snapshots, the Gram matrix and P (MindSpore's randomized SVD, seeded from
NumPy's global RNG, holds an n x (k + 10) sketch and gives a slightly
different basis every run). Signs are fixed: in each row the entry of the
largest magnitude is positive.
"""

import numpy as np

__all__ = ["trajectory_pca"]


def trajectory_pca(samples, n_components):
    """Top `n_components` principal directions of `samples` (m x n), as rows.

    Example:

    ```python
    P = trajectory_pca(np.stack(snapshots), 32)   # (32, n), P @ P.T == I
    ```
    """
    samples = np.asarray(samples)
    if samples.ndim != 2:
        raise ValueError(f"samples must be a 2-D array (snapshots x weights), got shape {samples.shape}.")
    m, n = samples.shape
    if not isinstance(n_components, (int, np.integer)) or isinstance(n_components, bool) or n_components < 1:
        raise ValueError(f"n_components must be an int >= 1, got {n_components!r}.")
    # Centring removes one dimension: m snapshots span at most m - 1 directions.
    if n_components > m - 1:
        raise ValueError(
            f"n_components={n_components} needs at least {n_components + 1} weight snapshots "
            f"(centred snapshots span at most m - 1 directions), got m={m}."
        )
    mean = samples.mean(axis=0, dtype=np.float64)
    centred = samples - mean.astype(samples.dtype)
    gram = np.asarray(centred @ centred.T, dtype=np.float64)  # m x m
    eigenvalues, eigenvectors = np.linalg.eigh(gram)
    order = np.argsort(eigenvalues)[::-1][:n_components]
    values = eigenvalues[order]
    if values[-1] <= 1e-12 * max(values[0], 1e-300):
        raise ValueError(
            f"The trajectory spans fewer than {n_components} directions (singular values "
            f"{np.sqrt(np.clip(values, 0, None))}); save more, or more distinct, snapshots or "
            "lower n_components."
        )
    # Right singular vectors: v_i = X^T u_i / sigma_i.
    basis = (eigenvectors[:, order].T @ centred) / np.sqrt(values)[:, None]
    basis = np.asarray(basis, dtype=np.float64)
    # One more Gram-Schmidt pass against float error in the products above.
    basis, _ = np.linalg.qr(basis.T)
    basis = basis.T
    largest = np.argmax(np.abs(basis), axis=1)
    signs = np.sign(basis[np.arange(n_components), largest])
    return (basis * signs[:, None]).astype(np.float32)
