"""`GradientAccumulation`: k micro-batches, one exact big-batch update.

Port of MindSpore's `mindspore.boost.GradientAccumulation` (and of the
accumulation inside `BoostTrainOneStepCell`), as an optimizer wrapper that
works on the TensorFlow, JAX and PyTorch backends and under `tf.distribute`.

Semantics (one "window" = `max_accumulation_step` = k calls of `apply`):

- every call adds the micro-batch gradients to replica-local accumulators
  (variables with aggregation "none": under `tf.distribute` each replica
  accumulates its own local gradients, nothing is communicated);
- the k-th call divides the sums by k (the mean over micro-batches, so with a
  mean loss it equals the gradient of the k-times larger batch), hands them
  to the inner optimizer's `apply` once, and zeroes the accumulators.

Everything stateful of the inner optimizer (`iterations`, learning-rate
schedules, weight decay, clipping, EMA, its TF gradient all-reduce) therefore
runs once per window, i.e. counts real updates. Keras' own
`gradient_accumulation_steps` advances schedules and EMA per micro-step and
cannot run under `MirroredStrategy` (keras#20582); see
`docs/methods/grad_accumulation.md`.

With `measure_gradient_norms=True` a window also yields the two squared
gradient norms of the gradient noise scale (McCandlish et al. 2018, appendix
A), read with `gradient_norms()`; `AdaptiveBatchSize(noise_scale=...)` switches
it on and feeds its estimator from them.
"""

import collections

import keras
import numpy as np
from keras import ops

from keras_boost import keras_private
from keras_boost import backend as kb_backend
from keras_boost.algorithms.accumulation.gradient_norms import squared_global_norm
from keras_boost.algorithms.accumulation.gradient_norms import window_gradient_norms
from keras_boost.algorithms.optimizer_wrapper import OptimizerWrapper
from keras_boost.algorithms.optimizer_wrapper import find_in_chain
from keras_boost.algorithms.optimizer_wrapper import optimizer_chain
from keras_boost.algorithms.optimizer_wrapper import check_optimizer

__all__ = ["find_gradient_accumulation", "FlushGradientAccumulation", "GradientAccumulation"]


# The gradient-norm state (appended to the wrapper's own variables after
# `micro_step`). Checkpoints written before it existed have this many fewer
# optimizer variables; `load_own_variables` reads them with the state zeroed.
_NORM_VARIABLES = (
    ("sq_norm_sum", "float32"),
    ("sq_norm_measured", "int32"),
    ("last_sq_norm_small", "float32"),
    ("last_sq_norm_big", "float32"),
    ("last_window_steps", "int32"),
    ("measured_windows", "int32"),
)

GradientNorms = collections.namedtuple(
    "GradientNorms", ["sq_norm_small", "sq_norm_big", "steps", "windows", "replicas"]
)
GradientNorms.__doc__ = """The squared gradient norms of the last measured accumulation window.

- `sq_norm_small`: the mean over the window's micro-batches of the squared
  global L2 norm of each micro-batch gradient (batch b, the `fit` batch);
- `sq_norm_big`: the squared global L2 norm of the window's mean gradient
  (batch `steps * b`);
- `steps`: the window's number of micro-batches (its k, or m < k for a
  flushed partial window), so `b_big = steps * b_small`;
- `windows`: how many windows have been measured so far (tells a new
  measurement from one already read);
- `replicas`: the replicas in sync; with more than 1, the norms are replica
  0's, of its local micro-batch of b / replicas examples.
"""


def _check_steps(max_accumulation_step):
    if isinstance(max_accumulation_step, np.integer):
        max_accumulation_step = int(max_accumulation_step)
    if isinstance(max_accumulation_step, bool) or not isinstance(
        max_accumulation_step, int
    ):
        raise TypeError(
            "max_accumulation_step must be an int >= 1 (the number of "
            "micro-batches averaged into one update), got "
            f"{max_accumulation_step!r} of type {type(max_accumulation_step).__name__}."
        )
    if max_accumulation_step < 1:
        raise ValueError(
            "max_accumulation_step must be an int >= 1 (the number of "
            f"micro-batches averaged into one update), got {max_accumulation_step}."
        )
    return max_accumulation_step


@keras.saving.register_keras_serializable(package="keras_boost")
class GradientAccumulation(OptimizerWrapper):
    """Averages gradients over `max_accumulation_step` micro-batches, then
    applies one update of the wrapped optimizer.

    Training with micro-batches of size b and `max_accumulation_step=k` gives
    the same weights as training with batches of size k*b (to float
    rounding), in the memory of a batch of size b, provided that the loss is
    a mean over the batch (Keras' default reduction
    `"sum_over_batch_size"`) and that the model has no BatchNormalization
    (see below).

    - `iterations` (the wrapped optimizer's), learning-rate schedules,
      weight decay, gradient clipping and EMA (`use_ema=True`) all act once
      per update, i.e. they count real updates, as in a big-batch run.
    - `fit` still reports the loss and metrics of every micro-batch, as
      Keras reports them; `steps_per_epoch`, callbacks' `batch` and
      `epochs` count micro-batches.
    - Under `tf.distribute` (MirroredStrategy, MultiWorkerMirroredStrategy),
      each replica accumulates its local gradients; the update is decided in
      cross-replica context (like Keras' `LossScaleOptimizer`), so the
      gradient all-reduce of the wrapped optimizer runs only on update
      steps: communication falls by k.
    - JAX: `stateless_apply` selects the update with `lax.cond`; the inner
      optimizer's math runs only on update steps.

    Partial windows: the window state (accumulators and micro-step count)
    is carried over across epochs, `fit` calls and `model.save` /
    `keras.saving.load_model`, so micro-batches are never dropped or
    re-weighted: the stream of micro-batches is cut into windows of exactly
    k, whatever the epoch length. To apply a partial window at the end of
    training, call `flush()` (or pass the `FlushGradientAccumulation`
    callback to `fit`): it applies the mean over the m < k accumulated
    micro-batches (divisor m, never k), as one update. Under
    MirroredStrategy a mid-window save keeps the sum of the replicas'
    partial sums, so resuming (also on another replica count) is exact.

    Loss scaling: inside `BoostModel` with dynamic loss scaling, a micro-step
    whose gradients overflow skips the whole `apply`, so it does not enter
    the window (the window then spans k finite micro-batches). Keras'
    `LossScaleOptimizer` wrapping this optimizer behaves the same way.

    BatchNormalization: BN computes its batch statistics per micro-batch
    (like "ghost batch norm" with ghost batches of size b), and its moving
    statistics are updated once per micro-batch, i.e. k times per update.
    Training is then not identical to the big batch. To keep the moving
    averages' time constant in real updates, use BN momentum `m ** (1 / k)`
    instead of `m`.

    Gradient freezing: the update is applied to the variables passed to the
    call that completes the window; keep the trained set constant within a
    window (a freeze schedule keyed on `optimizer.iterations`, which counts
    updates, does this).

    Gradient norms (opt-in, `measure_gradient_norms=True`): each micro-step
    then also adds the squared global L2 norm of its gradient (a float32 sum
    of squares over all gradients: one extra read of the gradients, no
    communication) to a running sum, and each completed window of k >= 2
    micro-batches stores two scalars, read with `gradient_norms()`:
    `sq_norm_small`, the mean over the k micro-batches of their squared norms
    (batch b), and `sq_norm_big`, the squared norm of the window's mean
    gradient (batch k * b): the inputs of
    `keras_boost.algorithms.batch_size.simple_noise_scale`. A window with k = 1, or
    one that started before the flag was switched on, records nothing. Off
    (the default), nothing is computed; the six scalar state variables exist
    either way, so the flag can be switched later (it is read when the train
    step is traced: call `model.make_train_function(force=True)` after
    changing it, as `AdaptiveBatchSize` does). Under `tf.distribute` every
    replica measures its own local micro-batches (b / replicas examples);
    `gradient_norms()` returns replica 0's values, multiplied by replicas**2
    to undo Keras' division of each replica's loss by the replica count.

    Args:
        optimizer: the `keras.optimizers.Optimizer` to wrap. Its own
            `gradient_accumulation_steps` must be unset.
        max_accumulation_step: int >= 1, the number k of micro-batches per
            update (1: every call updates).
        name: optional name.
        measure_gradient_norms: bool, measure the two squared gradient norms
            of each window (see above). Default False.

    Example:

    ```python
    # Effective batch 256 in the memory of 32: 8 micro-batches per update.
    opt = boost.GradientAccumulation(keras.optimizers.Adam(1e-3), max_accumulation_step=8)
    model.compile(optimizer=opt, loss="sparse_categorical_crossentropy")
    model.fit(x, y, batch_size=32, epochs=3,
              callbacks=[boost.FlushGradientAccumulation()])
    opt.iterations  # number of real updates

    # The two squared norms of the gradient noise scale, per window:
    opt = boost.GradientAccumulation(keras.optimizers.SGD(0.1), 4, measure_gradient_norms=True)
    model.compile(optimizer=opt, loss="mse")
    model.fit(x, y, batch_size=32, epochs=1)
    opt.gradient_norms()  # GradientNorms(sq_norm_small=..., sq_norm_big=..., steps=4, ...)
    ```
    """

    def __init__(self, optimizer, max_accumulation_step, name=None, measure_gradient_norms=False, **kwargs):
        check_optimizer(optimizer, where="GradientAccumulation's optimizer")
        max_accumulation_step = _check_steps(max_accumulation_step)
        if not isinstance(measure_gradient_norms, (bool, np.bool_)):
            raise TypeError(
                "measure_gradient_norms must be True or False, got "
                f"{measure_gradient_norms!r} of type {type(measure_gradient_norms).__name__}."
            )
        for inner in optimizer_chain(optimizer):
            steps = getattr(inner, "gradient_accumulation_steps", None)
            if steps:
                raise ValueError(
                    f"The wrapped optimizer {inner.name!r} has Keras' own "
                    f"gradient_accumulation_steps={steps}; use either it or "
                    "GradientAccumulation, not both (Keras' version advances "
                    "learning-rate schedules and EMA on every micro-step and "
                    "fails under MirroredStrategy). Set "
                    "gradient_accumulation_steps=None on the inner optimizer."
                )
        super().__init__(optimizer, name=name or "gradient_accumulation", **kwargs)
        self.max_accumulation_step = max_accumulation_step
        self.measure_gradient_norms = bool(measure_gradient_norms)

    # --- state -------------------------------------------------------------

    def _build_own(self, var_list):
        # Replica-local sums of the micro-batch gradients (aggregation "none").
        self._accumulators = [
            self.add_variable_from_reference(v, name="grad_accumulator") for v in var_list
        ]
        # Micro-batches in the current window: 0 <= micro_step < k.
        self._micro_step = self.add_variable(
            shape=(), dtype="int32", initializer="zeros", name="micro_step"
        )
        # The gradient-norm state (replica-local too); see _NORM_VARIABLES.
        self._norm_variables = [
            self.add_variable(shape=(), dtype=dtype, initializer="zeros", name=name)
            for name, dtype in _NORM_VARIABLES
        ]

    @property
    def micro_step(self):
        """Micro-batches accumulated in the current (unfinished) window."""
        return self._micro_step

    def gradient_norms(self):
        """The squared gradient norms of the last measured window, or None.

        Returns a `GradientNorms(sq_norm_small, sq_norm_big, steps, windows,
        replicas)` (see its docstring), or None while no window of at least 2
        micro-batches has been measured (see `measure_gradient_norms`). Eager
        only. On JAX inside `fit`, read it after `callback.model` (which syncs
        the fit loop's state into the variables).

        Example:

        ```python
        norms = opt.gradient_norms()
        simple_noise_scale(norms.sq_norm_small, norms.sq_norm_big,
                           b_small=32, b_big=32 * norms.steps)
        ```
        """
        if not self.built:
            return None
        small, big, steps, windows = (
            _first_replica(v) for v in self._norm_variables[2:]
        )
        if int(steps) < 2:
            return None
        _, replicas = self._replicas(self._micro_step)
        scale = float(replicas) ** 2
        return GradientNorms(
            float(small) * scale, float(big) * scale, int(steps), int(windows), replicas
        )

    def _measuring(self):
        # A Python decision, baked into the traced step like k itself.
        return self.measure_gradient_norms and self.max_accumulation_step >= 2

    @staticmethod
    def _accumulated_norms(norms, grads):
        """The gradient-norm state after one measured micro-step."""
        sq_sum, measured, *last = norms
        return [sq_sum + squared_global_norm(grads), measured + 1, *last]

    @staticmethod
    def _closed_norms(norms, steps, means):
        """The gradient-norm state after a window of `steps` micro-batches
        with mean gradient `means`: the last-window values are replaced only
        by a valid measurement (see `window_gradient_norms`)."""
        sq_sum, measured, small_old, big_old, steps_old, windows = norms
        small, big, valid = window_gradient_norms(sq_sum, measured, steps, means)
        return [
            ops.zeros((), dtype="float32"),
            ops.zeros((), dtype="int32"),
            ops.where(valid, small, ops.cast(small_old, "float32")),
            ops.where(valid, big, ops.cast(big_old, "float32")),
            ops.where(valid, ops.cast(steps, "int32"), ops.cast(steps_old, "int32")),
            ops.where(valid, ops.cast(windows, "int32") + 1, ops.cast(windows, "int32")),
        ]

    def _assign_norms(self, values):
        for variable, value in zip(self._norm_variables, values):
            variable.assign(ops.cast(value, variable.dtype))

    @property
    def accumulators(self):
        return list(self._accumulators)

    def _index(self, variable):
        return keras_private.optimizer_variable_index(self, variable)

    # --- stateful path (TensorFlow, torch; JAX outside jit) ----------------

    def _apply(self, grads, trainable_variables):
        if trainable_variables is None:
            trainable_variables = keras_private.optimizer_trained_variables(self)
        trainable_variables = list(trainable_variables)
        if len(grads) != len(trainable_variables):
            raise ValueError(
                f"Got {len(grads)} gradients for {len(trainable_variables)} variables."
            )
        if keras.backend.backend() == "jax":
            return self._jax_stateful_apply(grads, trainable_variables)
        for grad, variable in zip(grads, trainable_variables):
            if grad is not None:
                # Replica-local: under tf.distribute only this replica's copy.
                self.assign_add(self._accumulators[self._index(variable)], grad)
        if self._measuring():
            self._assign_norms(
                self._accumulated_norms([v.value for v in self._norm_variables], grads)
            )
        self._micro_step.assign_add(1)
        is_update = ops.greater_equal(self._micro_step.value, self.max_accumulation_step)
        # On TF under a strategy: a cross-replica cond (merge_call ->
        # cond -> call_for_each_replica), so the inner all-reduce runs only
        # when the window is complete; elsewhere a plain cond / Python if.
        kb_backend.current().apply_if(
            is_update, self._apply_window, (trainable_variables,)
        )

    def _apply_window(self, trainable_variables):
        """Applies the mean of the accumulated gradients; resets the window."""
        divisor = ops.cast(self._micro_step.value, "float32")

        def mean(acc):
            return acc.value / ops.cast(divisor, acc.dtype)

        grads = [mean(self._accumulators[self._index(v)]) for v in trainable_variables]
        if self._measuring():
            # Over every accumulator: what entered the micro-step norms.
            self._assign_norms(self._closed_norms(
                [v.value for v in self._norm_variables],
                self._micro_step.value,
                [mean(acc) for acc in self._accumulators],
            ))
        self.inner_optimizer.apply(grads, trainable_variables)
        for acc in self._accumulators:
            acc.assign(ops.zeros(acc.shape, dtype=acc.dtype))
        self._micro_step.assign(0)

    def _jax_stateful_apply(self, grads, trainable_variables):
        # JAX cannot branch on state inside jit: go through the stateless path.
        full = [None] * len(keras_private.optimizer_trained_variables(self))
        for grad, variable in zip(grads, trainable_variables):
            full[self._index(variable)] = grad
        new_trainable, new_optimizer = self.stateless_apply(
            [v.value for v in self.variables],
            full,
            [v.value for v in keras_private.optimizer_trained_variables(self)],
        )
        for variable, value in zip(keras_private.optimizer_trained_variables(self), new_trainable):
            variable.assign(value)
        for variable, value in zip(self.variables, new_optimizer):
            variable.assign(value)

    # --- stateless path (JAX) ----------------------------------------------

    def _stateless_apply(self, own_variables, inner_variables, grads, trainable):
        position = {id(v): i for i, v in enumerate(keras_private.optimizer_own_variables(self))}
        acc_pos = [position[id(a)] for a in self._accumulators]
        micro_pos = position[id(self._micro_step)]
        norm_pos = [position[id(v)] for v in self._norm_variables]
        accs = [own_variables[i] for i in acc_pos]
        micro = own_variables[micro_pos]
        norms = [own_variables[i] for i in norm_pos]
        new_accs = [a if g is None else a + ops.cast(g, a.dtype) for a, g in zip(accs, grads)]
        micro = micro + 1
        measuring = self._measuring()
        if measuring:
            norms = self._accumulated_norms(norms, grads)
        k = self.max_accumulation_step
        inner_variables = list(inner_variables)
        trainable = list(trainable)
        present = [g is not None for g in grads]

        def update():
            divisor = ops.cast(micro, "float32")
            means = [ops.divide(a, ops.cast(divisor, a.dtype)) for a in new_accs]
            mean = [m if p else None for m, p in zip(means, present)]
            new_trainable, new_inner = self.inner_optimizer.stateless_apply(
                inner_variables, mean, trainable
            )
            zeros = [ops.zeros_like(a) for a in new_accs]
            new_norms = self._closed_norms(norms, micro, means) if measuring else norms
            return (list(new_trainable), zeros, ops.zeros_like(micro), list(new_inner),
                    _cast_like(new_norms, self._norm_variables))

        def accumulate():
            return (trainable, new_accs, micro, inner_variables,
                    _cast_like(norms, self._norm_variables))

        new_trainable, new_accs, micro, new_inner, new_norms = ops.cond(
            ops.greater_equal(micro, k), update, accumulate
        )
        new_own = list(own_variables)
        for i, value in zip(acc_pos, new_accs):
            new_own[i] = value
        new_own[micro_pos] = micro
        for i, value in zip(norm_pos, new_norms):
            new_own[i] = value
        return new_trainable, new_own, new_inner

    # --- partial window ----------------------------------------------------

    def flush(self):
        """Applies a partial window now, as the mean over its micro-batches.

        Call it after the last `fit` (or use `FlushGradientAccumulation`). A
        window of m < k micro-batches becomes one update with divisor m (the
        gradient of a batch of m * b samples), counted in `iterations`. Does
        nothing when the window is empty. Eager only (not inside a traced
        step); under `tf.distribute` it runs on every replica, with the
        all-reduce.
        """
        if not self.built or int(ops.convert_to_numpy(self._micro_step.value)) == 0:
            return False
        variables = keras_private.optimizer_trained_variables(self)
        if keras.backend.backend() == "jax":
            # Eager JAX: the inner optimizer's stateful apply is legal here.
            self._apply_window(variables)
        else:
            kb_backend.current().run_on_replicas(self._apply_window, (variables,), self._micro_step)
        return True

    # --- saving ------------------------------------------------------------
    # Under tf.distribute each replica holds its own partial sum; saving the
    # first replica's copy (what Keras saves) would lose the others'. Saved:
    # the sum over replicas (the window's global gradient sum, which does not
    # depend on the replica count, as Keras pre-scales losses by
    # 1/replicas); loaded: that sum divided by the current replica count on
    # every replica, so the next update's all-reduce SUM gives it back.
    # MultiWorkerMirroredStrategy: only the local worker's replicas are
    # summed; flush() before a mid-window save there.

    @staticmethod
    def _replicas(variable):
        value = getattr(variable, "value", variable)
        strategy = getattr(value, "_distribute_strategy", None)
        if strategy is None or strategy.num_replicas_in_sync == 1:
            return None, 1
        return strategy, strategy.num_replicas_in_sync

    def save_own_variables(self, store):
        # As the base class (one entry per variable; the store cannot be
        # overwritten), with the accumulators summed over replicas.
        accumulators = {id(a) for a in getattr(self, "_accumulators", ())}
        for i, variable in enumerate(self.variables):
            strategy, _ = self._replicas(variable)
            if id(variable) in accumulators and strategy is not None:
                copies = [
                    ops.convert_to_numpy(c)
                    for c in strategy.experimental_local_results(variable.value)
                ]
                store[str(i)] = sum(copies).astype(copies[0].dtype)
            else:
                store[str(i)] = variable.numpy()

    # Checkpoints written before the gradient-norm state existed hold
    # len(_NORM_VARIABLES) fewer entries, the rest in the same order: they are
    # read with that state at zero (shapes checked, else Keras' own warning
    # and skip).

    def load_own_variables(self, store):
        if self.built and len(store.keys()) == len(self.variables) - len(_NORM_VARIABLES):
            store = _upgrade_store(store, self.variables, self._norm_variables) or store
        super().load_own_variables(store)
        if not self.built or len(store.keys()) != len(self.variables):
            return
        position = {id(v): i for i, v in enumerate(self.variables)}
        for acc in self._accumulators:
            _, n = self._replicas(acc)
            if n > 1:
                acc.assign(store[str(position[id(acc)])] / n)

    # --- serialization -----------------------------------------------------

    def get_config(self):
        config = super().get_config()
        config["max_accumulation_step"] = self.max_accumulation_step
        config["measure_gradient_norms"] = self.measure_gradient_norms
        return config


def _cast_like(values, variables):
    return [ops.cast(value, variable.dtype) for value, variable in zip(values, variables)]


def _first_replica(variable):
    """The value of `variable` (replica 0's copy under tf.distribute), in NumPy."""
    value = variable.value
    strategy = getattr(value, "_distribute_strategy", None)
    if strategy is not None:
        value = strategy.experimental_local_results(value)[0]
    return ops.convert_to_numpy(value)


class _UpgradedStore:
    """A store without the gradient-norm entries, read in the current layout."""

    def __init__(self, store, start, fill):
        self._store, self._start, self._fill = store, start, fill

    def keys(self):
        return [str(i) for i in range(len(self._store.keys()) + len(self._fill))]

    def __getitem__(self, key):
        i = int(key)
        if i < self._start:
            return self._store[key]
        if i < self._start + len(self._fill):
            return self._fill[i - self._start]
        return self._store[str(i - len(self._fill))]


def _upgrade_store(store, variables, norm_variables):
    """`store` of the layout before the gradient-norm state, as an
    `_UpgradedStore` (that state at zero), or None when the saved shapes do
    not fit that layout."""
    start = next(i for i, v in enumerate(variables) if v is norm_variables[0])
    fill = [np.zeros(v.shape, dtype=v.dtype) for v in norm_variables]
    upgraded = _UpgradedStore(store, start, fill)
    for i, variable in enumerate(variables):
        if not start <= i < start + len(fill):
            if tuple(np.shape(upgraded[str(i)])) != tuple(variable.shape):
                return None
    return upgraded


def find_gradient_accumulation(optimizer):
    """The `GradientAccumulation` in an optimizer chain, or None."""
    return find_in_chain(optimizer, GradientAccumulation)


class FlushGradientAccumulation(keras.callbacks.Callback):
    """Applies a partial accumulation window at the end of `fit`.

    With `GradientAccumulation` the window state carries over between `fit`
    calls; this callback instead ends each `fit` with `flush()`: the m < k
    micro-batches left over become one update with divisor m.

    Example:

    ```python
    model.fit(x, y, batch_size=32, callbacks=[boost.FlushGradientAccumulation()])
    ```
    """

    def on_train_end(self, logs=None):
        opt = find_gradient_accumulation(self.model.optimizer)
        if opt is None:
            raise ValueError(
                "FlushGradientAccumulation needs a model compiled with a "
                "boost.GradientAccumulation optimizer (possibly wrapped), got "
                f"{type(self.model.optimizer).__name__}."
            )
        opt.flush()
