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

from keras import ops


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
