"""DimReduce's subspace quasi-Newton math (Li et al., TPAMI 2022), in `keras.ops`.

Pure functions of MindSpore's stage-2 step (reference doc section 7.3),
so that each piece is testable against NumPy:

- `project(basis, g)` / `back_project(basis, d)`: between the n weights and
  the k subspace coordinates (basis: k x n, orthonormal rows);
- `bfgs_inverse_update(H, s, y)`: the BFGS update of the inverse Hessian
  with the curvature guard (skipped unless y.s > `eps`);
- `armijo_accepts(loss_new, loss_old, sigma, step, slope)`: the sufficient
  decrease test of the backtracking line search.
"""

import math

from keras import ops

__all__ = [
    "armijo_accepts",
    "back_project",
    "bfgs_inverse_update",
    "flatten",
    "project",
    "subspace_step",
    "unflatten",
]


def project(basis, gradient):
    """Subspace coordinates `P g` of a flat gradient (k,)."""
    return ops.matmul(basis, gradient)


def back_project(basis, coordinates):
    """The weight-space vector `P^T d` of subspace coordinates (n,)."""
    return ops.matmul(ops.transpose(basis), coordinates)


def bfgs_inverse_update(inverse_hessian, s, y, eps=1e-20):
    """`(I - rho s y^T) H (I - rho y s^T) + rho s s^T` with rho = 1 / (y.s);
    `H` unchanged when the curvature `y.s <= eps` (the update would not stay
    positive definite)."""
    curvature = ops.sum(y * s)
    ok = ops.greater(curvature, eps)
    rho = ops.where(ok, 1.0 / ops.where(ok, curvature, 1.0), 0.0)
    k = ops.shape(s)[0]
    eye = ops.eye(k, dtype=inverse_hessian.dtype)
    left = eye - rho * ops.outer(s, y)
    updated = ops.matmul(ops.matmul(left, inverse_hessian), ops.transpose(left)) + rho * ops.outer(s, s)
    return ops.where(ok, updated, inverse_hessian)


def armijo_accepts(loss_new, loss_old, sigma, step, slope):
    """Sufficient decrease: `loss_new < loss_old + sigma * step * slope`
    (slope = g.d < 0 for a descent direction d)."""
    return ops.less(loss_new, loss_old + sigma * step * slope)


def subspace_step(basis, inverse_hessian, g_last, s, initialized, momentum, weights, gradient,
                  loss, trial_loss, rho, gamma, alpha, sigma, trials):
    """One DimReduce step on flat vectors; returns `(new_weights, state)`.

    `state` = `(inverse_hessian, g_last, s, initialized, momentum, accepted)`.
    `trial_loss(w)` is the loss of the same batch at weights `w`. The line
    search tries steps 1, rho, rho**2, ... (`trials` of them, all evaluated:
    static control flow for `jit`) and takes the first that passes Armijo;
    if none does, the subspace step is 0 and the BFGS state (H, g_last, s)
    is left as it was. The residual outside the subspace takes a momentum
    SGD step of rate `alpha`.

    On several replicas, `gradient`, `loss` and `trial_loss` must be the
    global batch's (the same on every replica: the caller all-reduces
    them); the step is then identical on every replica.

    Example:

    ```python
    w, (H, g_last, s, init, m, accepted) = subspace_step(
        P, H, g_last, s, init, m, w, g, loss, loss_at,
        rho=0.55, gamma=0.9, alpha=1e-3, sigma=0.4, trials=2)
    ```
    """
    g_k = project(basis, gradient)
    candidate = ops.where(initialized, bfgs_inverse_update(inverse_hessian, s, g_k - g_last), inverse_hessian)
    d_k = -ops.matmul(candidate, g_k)
    direction = back_project(basis, d_k)
    slope = ops.sum(g_k * d_k)
    step = ops.zeros((), dtype=weights.dtype)
    found = ops.zeros((), dtype="bool")
    for i in range(trials):
        r = rho**i
        ok = ops.logical_and(armijo_accepts(trial_loss(weights + r * direction), loss, sigma, r, slope),
                             ops.logical_not(found))
        step = ops.where(ok, r, step)
        found = ops.logical_or(found, ok)
    residual = gradient - back_project(basis, g_k)
    momentum = gamma * momentum + residual
    new_weights = weights + step * direction - alpha * momentum
    state = (
        ops.where(found, candidate, inverse_hessian),
        ops.where(found, g_k, g_last),
        ops.where(found, step * d_k, s),
        ops.logical_or(initialized, found),
        momentum,
        found,
    )
    return new_weights, state


def flatten(tensors):
    """One float32 vector of all `tensors`, flattened in order."""
    return ops.concatenate([ops.reshape(ops.cast(t, "float32"), (-1,)) for t in tensors])


def unflatten(flat, like):
    """Pieces of `flat` shaped and typed like the variables `like`."""
    out, offset = [], 0
    for v in like:
        size = math.prod(v.shape)
        out.append(ops.cast(ops.reshape(flat[offset:offset + size], v.shape), v.dtype))
        offset += size
    return out
