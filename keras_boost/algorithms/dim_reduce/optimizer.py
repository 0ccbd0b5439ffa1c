"""`DimReduce`: stage 2 of dimension-reduced training (Li et al., TPAMI 2022).

BFGS steps in the top-k PCA subspace of the stage-1 weight trajectory, with
an Armijo line search on the same batch, plus momentum SGD on the gradient
outside the subspace (MindSpore's `mindspore.boost.DimReduce`; reference doc
section 7.3). The step needs extra forward passes of the model, so it runs
inside `BoostModel`'s train step (TensorFlow, JAX, torch); this optimizer
holds the state: the basis, the inverse Hessian, the last subspace gradient
and step, and the residual momentum. All of it is saved with the model.

Under tf.distribute (MirroredStrategy, MultiWorkerMirroredStrategy) the
step uses the global batch's gradient and losses, all-reduced, so every
replica takes the same step; the basis is computed once per process, and
across workers by the chief only, the others reading its `pca_mat_path`
(`load_basis`, `wait_for_basis`).

What the user's optimizer becomes: MindSpore replaces it by SGD(lr=1) and
drops its learning-rate schedule silently; here the wrapped optimizer is
kept only for its configuration, stage 2 uses `alpha` (a constant rate) for
the residual, and a schedule on the wrapped optimizer raises a warning.
"""

import math
import os
import time
import warnings

import keras
import numpy as np

from keras_boost import backend as kb_backend
from keras_boost import config as config_lib
from keras_boost.atomic_write import atomic_write
from keras_boost.algorithms.dim_reduce.trajectory import load_trajectory
from keras_boost.errors import NoEffectWarning
from keras_boost.algorithms.dim_reduce import subspace as dr
from keras_boost.algorithms.dim_reduce.pca import trajectory_pca
from keras_boost.algorithms.optimizer_wrapper import HYPERPARAMETERS
from keras_boost.algorithms.optimizer_wrapper import OptimizerWrapper

__all__ = ["DimReduce", "load_basis", "read_basis", "wait_for_basis"]


def load_basis(n_components, pca_mat_path=None, weight_load_dir=None, variables=None, chief=True,
               workers=1, timeout=1800, poll_interval=1.0):
    """The (k, n) basis that every replica of this process shares.

    From `pca_mat_path` if it is a file, else the PCA of the trajectory in
    `weight_load_dir`, written (atomically) to `pca_mat_path`, or to
    `<weight_load_dir>/pca_mat.npy` when it is None.

    With several workers (`workers > 1`), only the chief computes the PCA;
    the others wait for the chief's `pca_mat_path` (see `wait_for_basis`)
    and read it, so `pca_mat_path` must be set, on a filesystem every
    worker reads.

    Example:

    ```python
    basis = load_basis(16, weight_load_dir="traj", variables=model.trainable_variables)
    ```
    """
    n = sum(math.prod(v.shape) for v in variables)
    if workers > 1 and pca_mat_path is None:
        raise ValueError(
            f"DimReduce on {workers} workers shares the basis through pca_mat_path (the chief "
            "computes it, the other workers read it): set pca_mat_path to a .npy path on a "
            "filesystem every worker reads; got pca_mat_path=None."
        )
    if pca_mat_path is not None and os.path.isfile(pca_mat_path):
        return read_basis(pca_mat_path, n_components, n)
    if workers > 1 and not chief:
        wait_for_basis(pca_mat_path, timeout, poll_interval)
        return read_basis(pca_mat_path, n_components, n)
    if weight_load_dir is None:
        raise ValueError(
            "DimReduce needs the stage-1 trajectory: set weight_load_dir (a directory written by "
            "boost.callbacks.WeightTrajectory) or pca_mat_path (an existing .npy basis)."
        )
    samples, _ = load_trajectory(weight_load_dir, variables=variables)
    basis = trajectory_pca(samples, n_components)
    # Atomic: a worker waiting for the file never reads half of it.
    target = pca_mat_path or os.path.join(os.fspath(weight_load_dir), "pca_mat.npy")
    atomic_write(os.fspath(target), lambda f: np.save(f, basis))
    return basis


def read_basis(path, n_components, n):
    """The first `n_components` rows of the (>= k, n) matrix in `path`."""
    basis = np.load(path)
    if basis.ndim != 2 or basis.shape[1] != n or basis.shape[0] < n_components:
        raise ValueError(
            f"pca_mat_path {path!r} holds a matrix of shape {basis.shape}; this model "
            f"needs at least ({n_components}, {n}) (n_components x trainable weights)."
        )
    return basis[:n_components].astype("float32")


def wait_for_basis(path, timeout, poll_interval=1.0):
    """Blocks until the file `path` exists (the chief worker writes it),
    checking every `poll_interval` seconds; `TimeoutError` naming the path
    and the timeout once `timeout` seconds have passed without it.

    Example:

    ```python
    wait_for_basis("/shared/pca.npy", timeout=1800)   # on a non-chief worker
    ```
    """
    deadline = time.monotonic() + timeout
    while not os.path.isfile(path):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(
                f"DimReduce waited timeout={timeout} s for the basis pca_mat_path={path!r}, "
                "which the chief worker computes from weight_load_dir and writes; it did not "
                "appear. Check the chief's log and that the path is on a filesystem every "
                "worker reads, or raise timeout."
            )
        time.sleep(min(poll_interval, remaining))
    return path


@keras.saving.register_keras_serializable(package="keras_boost")
class DimReduce(OptimizerWrapper):
    """Subspace BFGS + residual momentum SGD, the DimReduce stage-2 step.

    Use it through `BoostModel` (config `{"boost": {"mode": "manual",
    "dim_reduce": True}, "dim_reduce": {...}}`), which runs the line search;
    `apply` alone raises.

    Every argument is checked by the rule of the config's `dim_reduce`
    section (`keras_boost.config.SCHEMA`): one rule, one error message.

    Args:
        optimizer: the user's optimizer (kept for its configuration only).
        n_components: k, the subspace dimension (an int >= 1).
        rho: backtracking factor of the line search (steps 1, rho, ...),
            in (0, 1).
        gamma: momentum of the residual SGD, in [0, 1).
        alpha: learning rate of the residual SGD (replaces the user's), > 0.
        sigma: Armijo constant, in (0, 1).
        pca_mat_path, weight_load_dir: where the basis comes from (see
            `load_basis`); several workers need `pca_mat_path`, a path
            every worker reads.
        timeout: seconds (> 0) a non-chief worker waits for the chief to
            write `pca_mat_path` before `TimeoutError` (multi-worker runs
            only).
        max_line_search: trials of the line search (an int >= 1;
            MindSpore: 2).
        name: optional name.

    Example:

    ```python
    model.fit(x, y, epochs=20, callbacks=[boost.callbacks.WeightTrajectory("traj")])
    stage2 = boost.BoostModel.from_model(model, boost_config_dict={
        "boost": {"mode": "manual", "dim_reduce": True},
        "dim_reduce": {"weight_load_dir": "traj", "n_components": 16}})
    stage2.compile(optimizer="sgd", loss=...)
    stage2.fit(x, y, epochs=2)
    ```
    """

    # `rho` and `gamma` are DimReduce's own (the line search's, the residual
    # momentum's), not the wrapped optimizer's.
    forwarded_hyperparameters = HYPERPARAMETERS - {"rho", "gamma"}

    def __init__(self, optimizer, n_components=32, rho=0.55, gamma=0.9, alpha=0.001, sigma=0.4,
                 pca_mat_path=None, weight_load_dir=None, timeout=1800, max_line_search=2,
                 name=None, **kwargs):
        super().__init__(optimizer, name=name or "dim_reduce", **kwargs)
        arguments = dict(
            n_components=n_components, rho=rho, gamma=gamma, alpha=alpha, sigma=sigma,
            pca_mat_path=pca_mat_path, weight_load_dir=weight_load_dir, timeout=timeout,
            max_line_search=max_line_search,
        )
        for key, value in arguments.items():
            setattr(self, key, config_lib.check_value("dim_reduce", key, value))
        if isinstance(getattr(optimizer, "_learning_rate", None), keras.optimizers.schedules.LearningRateSchedule):
            warnings.warn(
                "DimReduce does not use the optimizer's learning-rate schedule: stage 2 takes "
                f"BFGS steps in the subspace and residual SGD steps at alpha={alpha}.",
                NoEffectWarning,
                stacklevel=2,
            )

    def _build_own(self, var_list):
        chief, workers = kb_backend.current().worker_role()
        basis = load_basis(self.n_components, self.pca_mat_path, self.weight_load_dir, var_list,
                           chief=chief, workers=workers, timeout=self.timeout)
        k, n = basis.shape
        self.basis = self.add_variable(shape=(k, n), dtype="float32", name="pca_basis",
                                       initializer=keras.initializers.Constant(basis))
        self.inverse_hessian = self.add_variable(shape=(k, k), dtype="float32", name="inverse_hessian",
                                                 initializer=keras.initializers.Identity())
        self.g_last = self.add_variable(shape=(k,), dtype="float32", initializer="zeros", name="g_last")
        self.last_step = self.add_variable(shape=(k,), dtype="float32", initializer="zeros", name="last_step")
        self.initialized = self.add_variable(shape=(), dtype="bool", initializer="zeros", name="initialized")
        self.residual_momentum = self.add_variable(shape=(n,), dtype="float32", initializer="zeros",
                                                   name="residual_momentum")
        self.accepted_steps = self.add_variable(shape=(), dtype="int32", initializer="zeros", name="accepted")

    def state_variables(self):
        """The variables `step` reads and writes, in its state order."""
        return [self.inverse_hessian, self.g_last, self.last_step, self.initialized, self.residual_momentum]

    def step(self, basis, state, weights, gradient, loss, trial_loss):
        """Pure: `(new_weights, new_state, accepted)` for flat vectors."""
        new_weights, new_state = dr.subspace_step(
            basis, *state, weights, gradient, loss, trial_loss,
            self.rho, self.gamma, self.alpha, self.sigma, self.max_line_search,
        )
        return new_weights, list(new_state[:5]), new_state[5]

    def _apply(self, grads, trainable_variables):
        raise RuntimeError(
            "DimReduce's step runs a line search with extra forward passes of the model, so it "
            "runs in BoostModel's train step: use BoostModel with the dim_reduce config instead "
            "of compiling a plain model with it."
        )

    def _stateless_apply(self, own_variables, inner_variables, grads, trainable):
        self._apply(grads, trainable)

    def get_config(self):
        config = super().get_config()
        config.update(
            n_components=self.n_components, rho=self.rho, gamma=self.gamma, alpha=self.alpha,
            sigma=self.sigma, pca_mat_path=self.pca_mat_path, weight_load_dir=self.weight_load_dir,
            timeout=self.timeout, max_line_search=self.max_line_search,
        )
        return config

