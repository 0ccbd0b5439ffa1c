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
"""

import keras
import numpy as np
from keras import ops

from keras_boost import backend as kb_backend
from keras_boost.optimizers.base import OptimizerWrapper
from keras_boost.optimizers.base import find_in_chain
from keras_boost.optimizers.base import optimizer_chain
from keras_boost.optimizers.base import check_optimizer


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

    Args:
        optimizer: the `keras.optimizers.Optimizer` to wrap. Its own
            `gradient_accumulation_steps` must be unset.
        max_accumulation_step: int >= 1, the number k of micro-batches per
            update (1: every call updates).
        name: optional name.

    Example:

    ```python
    # Effective batch 256 in the memory of 32: 8 micro-batches per update.
    opt = boost.GradientAccumulation(keras.optimizers.Adam(1e-3), max_accumulation_step=8)
    model.compile(optimizer=opt, loss="sparse_categorical_crossentropy")
    model.fit(x, y, batch_size=32, epochs=3,
              callbacks=[boost.FlushGradientAccumulation()])
    opt.iterations  # number of real updates
    ```
    """

    def __init__(self, optimizer, max_accumulation_step, name=None, **kwargs):
        check_optimizer(optimizer, where="GradientAccumulation's optimizer")
        max_accumulation_step = _check_steps(max_accumulation_step)
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

    @property
    def micro_step(self):
        """Micro-batches accumulated in the current (unfinished) window."""
        return self._micro_step

    @property
    def accumulators(self):
        return list(self._accumulators)

    def _index(self, variable):
        return self._trainable_variables_indices[self._var_key(variable)]

    # --- stateful path (TensorFlow, torch; JAX outside jit) ----------------

    def _apply(self, grads, trainable_variables):
        if trainable_variables is None:
            trainable_variables = self._trainable_variables
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
        grads = []
        for variable in trainable_variables:
            acc = self._accumulators[self._index(variable)]
            grads.append(acc.value / ops.cast(divisor, acc.dtype))
        self.inner_optimizer.apply(grads, trainable_variables)
        for acc in self._accumulators:
            acc.assign(ops.zeros(acc.shape, dtype=acc.dtype))
        self._micro_step.assign(0)

    def _jax_stateful_apply(self, grads, trainable_variables):
        # JAX cannot branch on state inside jit: go through the stateless path.
        full = [None] * len(self._trainable_variables)
        for grad, variable in zip(grads, trainable_variables):
            full[self._index(variable)] = grad
        new_trainable, new_optimizer = self.stateless_apply(
            [v.value for v in self.variables],
            full,
            [v.value for v in self._trainable_variables],
        )
        for variable, value in zip(self._trainable_variables, new_trainable):
            variable.assign(value)
        for variable, value in zip(self.variables, new_optimizer):
            variable.assign(value)

    # --- stateless path (JAX) ----------------------------------------------

    def _stateless_apply(self, own_variables, inner_variables, grads, trainable):
        position = {id(v): i for i, v in enumerate(self._variables)}
        acc_pos = [position[id(a)] for a in self._accumulators]
        micro_pos = position[id(self._micro_step)]
        accs = [own_variables[i] for i in acc_pos]
        micro = own_variables[micro_pos]
        new_accs = [a if g is None else a + ops.cast(g, a.dtype) for a, g in zip(accs, grads)]
        micro = micro + 1
        k = self.max_accumulation_step
        inner_variables = list(inner_variables)
        trainable = list(trainable)
        present = [g is not None for g in grads]

        def update():
            divisor = ops.cast(micro, "float32")
            mean = [
                ops.divide(a, ops.cast(divisor, a.dtype)) if p else None
                for a, p in zip(new_accs, present)
            ]
            new_trainable, new_inner = self.inner_optimizer.stateless_apply(
                inner_variables, mean, trainable
            )
            zeros = [ops.zeros_like(a) for a in new_accs]
            return list(new_trainable), zeros, ops.zeros_like(micro), list(new_inner)

        def accumulate():
            return trainable, new_accs, micro, inner_variables

        new_trainable, new_accs, micro, new_inner = ops.cond(
            ops.greater_equal(micro, k), update, accumulate
        )
        new_own = list(own_variables)
        for i, value in zip(acc_pos, new_accs):
            new_own[i] = value
        new_own[micro_pos] = micro
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
        variables = self._trainable_variables
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

    def load_own_variables(self, store):
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
        return config


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
