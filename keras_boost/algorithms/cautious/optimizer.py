"""`CautiousOptimizer`: cautious update masking (C-AdamW) around any Keras optimizer."""

import keras
from keras import ops

from keras_boost import backend as kb_backend
from keras_boost import keras_private
from keras_boost.algorithms.cautious.mask import MIN_KEPT_FRACTION
from keras_boost.algorithms.cautious.mask import cautious_update
from keras_boost.algorithms.optimizer_wrapper import OptimizerWrapper
from keras_boost.algorithms.optimizer_wrapper import optimizer_chain

__all__ = ["CautiousOptimizer"]


def _check_inner(optimizer, name):
    """Refuses an inner optimizer whose own EMA or gradient accumulation
    would see the unmasked step."""
    innermost = optimizer_chain(optimizer)[-1]
    if getattr(innermost, "gradient_accumulation_steps", None):
        raise ValueError(
            f"{name}: the wrapped optimizer {innermost.name!r} accumulates gradients itself "
            f"(gradient_accumulation_steps={innermost.gradient_accumulation_steps}), so the "
            "caution mask would compare its update with one micro-batch's gradient. Wrap "
            "the cautious optimizer instead: boost.GradientAccumulation(CautiousOptimizer(opt), k)."
        )
    if getattr(innermost, "use_ema", False):
        raise ValueError(
            f"{name}: the wrapped optimizer {innermost.name!r} has use_ema=True; its moving "
            "average would follow the unmasked weights. Keep the average outside the "
            "optimizer (e.g. a callback) or switch use_ema off."
        )
    return innermost


def _dense(gradient):
    """A sparse gradient (TensorFlow's IndexedSlices of an Embedding) as a tensor."""
    if type(gradient).__name__ == "IndexedSlices":
        return ops.convert_to_tensor(gradient)
    return gradient


@keras.saving.register_keras_serializable(package="keras_boost")
class CautiousOptimizer(OptimizerWrapper):
    """Cautious update masking (Liang et al. 2024, C-AdamW) around any Keras optimizer.

    The wrapped optimizer (AdamW, Adam, SGD with momentum, Lion, ...) takes
    its step as usual, moment buffers included; then each coordinate of the
    step whose sign disagrees with the current gradient is undone, and the
    kept ones are scaled per tensor by `1 / max(mean(kept), 1e-3)`
    (`boost.ops.cautious_mask`). With `u` the step the optimizer subtracts
    (its decoupled weight decay left out) and `g` the gradient:

        theta <- decay(theta) - u * 1[u * g > 0] / max(mean(1[u * g > 0]), 1e-3)

    Decoupled weight decay (Keras' `weight_decay`, applied by the base
    optimizer before its update) stays unmasked: the wrapper computes it
    from the wrapped optimizer's `weight_decay`, learning rate and
    exclusions, and masks only the rest of the step. Decay inside the
    update rule itself (a coupled L2 term, LARS' decay) is part of `u`.
    Where every coordinate agrees, the weights are exactly the wrapped
    optimizer's. Variable constraints are applied again after masking.

    `masked_fraction` is the fraction of coordinates masked at the last
    step (over every variable with a gradient): a mask that never fires
    shows as 0. `summary()` says it in words.

    The wrapped optimizer must not use its own `use_ema` or
    `gradient_accumulation_steps` (they would see the unmasked step); wrap
    this optimizer in `boost.GradientAccumulation` instead. A step the
    wrapped optimizer skips (a `keras.optimizers.LossScaleOptimizer` inside
    on an overflow) leaves the weights as they were.

    Args:
        optimizer: the `keras.optimizers.Optimizer` to wrap.
        max_scale: the largest factor the kept coordinates are scaled by
            (`1 / mean(kept)`, capped): 1000 is C-AdamW's rule (a kept
            fraction floored at 1e-3); 1.0 turns the rescaling off, so the
            kept coordinates take exactly the wrapped optimizer's step.
        name: optional name.

    Example:

    ```python
    opt = boost.CautiousOptimizer(keras.optimizers.AdamW(1e-3, weight_decay=0.01))
    model.compile(optimizer=opt, loss="sparse_categorical_crossentropy")
    model.fit(x, y)
    opt.masked_fraction   # e.g. 0.43: the mask fires
    ```
    """

    def __init__(self, optimizer, max_scale=1.0 / MIN_KEPT_FRACTION, name=None, **kwargs):
        super().__init__(optimizer, name=name or "cautious", **kwargs)
        _check_inner(optimizer, self.name)
        if (isinstance(max_scale, bool) or not isinstance(max_scale, (int, float))
                or not 1.0 <= max_scale < float("inf")):
            raise ValueError(f"{self.name}: max_scale must be a finite number >= 1.0 (1.0: no rescaling), "
                             f"got {max_scale!r}.")
        self.max_scale = float(max_scale)

    def _build_own(self, var_list):
        _check_inner(self.inner_optimizer, self.name)
        self._masked_fraction = self.add_variable(
            shape=(), dtype="float32", initializer="zeros", aggregation="only_first_replica",
            name="masked_fraction",
        )

    @property
    def masked_fraction(self):
        """The fraction of coordinates the mask set to zero at the last step
        (a Python float; None before the optimizer is built)."""
        if not self.built:
            return None
        return float(ops.convert_to_numpy(self._masked_fraction.value))

    def summary(self):
        """One phrase for the end-of-fit line, e.g. `"cautious masking: 41% of
        coordinates masked at the last step"`."""
        fraction = self.masked_fraction
        if fraction is None:
            return "cautious masking (not built yet)"
        return f"cautious masking: {fraction:.0%} of coordinates masked at the last step"

    # --- updates -----------------------------------------------------------

    def _apply(self, grads, trainable_variables):
        innermost = _check_inner(self.inner_optimizer, self.name)
        if trainable_variables is None:
            variables = list(keras_private.optimizer_trained_variables(self))
        else:
            variables = list(trainable_variables)
        # The variables the wrapped optimizer steps (Keras overwrites the
        # `overwrite_with_gradient` ones with their gradient: no step to mask).
        stepped = [
            i for i, (g, v) in enumerate(zip(grads, variables))
            if g is not None and not getattr(v, "overwrite_with_gradient", False)
        ]
        # Read before the inner step: the learning rate at this step, the
        # weights before it (a copy: torch assigns in place).
        before = [ops.copy(variables[i].value) for i in stepped]
        decays = self._decay_factors(innermost, [variables[i] for i in stepped])
        # A Keras optimizer always steps; one inside a wrapper (a
        # LossScaleOptimizer on an overflow) may not: then its step count
        # stays, and so do the weights.
        may_skip = self.inner_optimizer is not innermost
        steps_before = ops.copy(innermost.iterations.value) if may_skip else None
        grads = self._inner_apply(innermost, grads, trainable_variables)
        applied = ops.not_equal(innermost.iterations.value, steps_before) if may_skip else None

        assignments, kept_total, size_total = [], 0.0, 0
        for i, old, decay in zip(stepped, before, decays):
            variable = variables[i]
            after = variable.value
            # Keras' decoupled decay, `theta - theta * wd * lr`, where it applied.
            decayed = old if decay is None else old - old * decay
            if decay is not None and applied is not None:
                decayed = ops.where(applied, decayed, old)
            # The step subtracted: after = decayed - step.
            step = decayed - after
            masked, kept = cautious_update(step, _dense(grads[i]), 1.0 / self.max_scale,
                                           return_kept_fraction=True)
            # decayed - masked, written so that a full mask (scale 1) returns
            # the inner optimizer's weights exactly.
            new = after + (step - masked)
            if variable.constraint is not None:
                new = variable.constraint(new)
            assignments.append((variable, new))
            kept_total = kept_total + kept * float(_size(old))
            size_total += _size(old)
        if size_total:
            fraction = 1.0 - kept_total / float(size_total)
            if applied is not None:
                fraction = ops.where(applied, fraction, self._masked_fraction.value)
            assignments.append((self._masked_fraction, ops.cast(fraction, "float32")))
        kb_backend.current().assign_each(assignments)

    def get_config(self):
        return {**super().get_config(), "max_scale": self.max_scale}

    def _inner_apply(self, innermost, grads, trainable_variables):
        """Lets the wrapped optimizer step; returns the gradients it stepped
        with. Under a `tf.distribute` strategy, Keras' TensorFlow optimizers
        sum the replicas' gradients inside `apply`: the sum is taken here
        instead (the same one collective), so that the mask compares the step
        with the gradient that made it, the same on every replica."""
        seam = kb_backend.current()
        if (keras.backend.backend() == "tensorflow" and seam.in_replica_context()
                and keras_private.has_gradient_all_reduce(innermost)
                and not keras_private.gradient_all_reduce_replaced(innermost)):
            present = [i for i, g in enumerate(grads) if g is not None]
            summed = seam.all_reduce_sum([grads[i] for i in present])
            grads = list(grads)
            for i, g in zip(present, summed):
                grads[i] = g
            with seam.local_gradients(innermost):
                self.inner_optimizer.apply(grads, trainable_variables)
            return grads
        self.inner_optimizer.apply(grads, trainable_variables)
        return grads

    def _decay_factors(self, innermost, variables):
        """`weight_decay * lr` of the wrapped optimizer for each variable (in
        its dtype; the learning rate read once), or None where its decoupled
        weight decay does not apply."""
        factors, by_dtype = [], {}
        for variable in variables:
            if not keras_private.uses_weight_decay(innermost, variable):
                factors.append(None)
                continue
            if variable.dtype not in by_dtype:
                lr = ops.cast(innermost.learning_rate, variable.dtype)
                by_dtype[variable.dtype] = ops.cast(innermost.weight_decay, variable.dtype) * lr
            factors.append(by_dtype[variable.dtype])
        return factors

    def _stateless_apply(self, own_variables, inner_variables, grads, trainable):
        # The stateful rule, run in a scope that maps every variable to its
        # value (JAX): one implementation for the three backends.
        variables = keras_private.optimizer_trained_variables(self)
        own = keras_private.optimizer_own_variables(self)
        inner = self.inner_optimizer.variables
        mapping = (list(zip(variables, trainable)) + list(zip(own, own_variables))
                   + list(zip(inner, inner_variables)))
        with keras.StatelessScope(state_mapping=mapping) as scope:
            self._apply(list(grads), variables)
        return ([scope.get_current_value(v) for v in variables],
                [scope.get_current_value(v) for v in own],
                [scope.get_current_value(v) for v in inner])


def _size(tensor):
    size = 1
    for dim in tensor.shape:
        size *= int(dim)
    return size
