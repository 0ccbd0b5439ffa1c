"""The step-part interface: one algorithm's share of `BoostModel`'s train step.

`BoostModel.train_step` composes the parts of its optimizer chain (and of
its layers); `keras_boost.backend.jax_backend.train_step` is the same
composition, stateless. The step, in order:

    the batch, as each part prepares it in turn (`prepare_batch`)
    trained = the variables every part lets this step train
    forward -> loss -> gradients of `trained`
    the update: the one part that owns it (`owns_update`), else
        `optimizer.apply`; a part that skips a step (non-finite gradients)
        sets `finite`, and the state its `restored_state` lists is put back
    each part's `finish`: counters it advances, the logs it adds

As a Keras optimizer keeps `apply` and `stateless_apply` side by side, each
method that changes state comes in two forms: the stateful one (TensorFlow,
torch) assigns variables through a `Step`; the stateless one (JAX) reads and
writes values through a `StatelessStep`.

Example:

```python
class CountSteps(StepPart):
    def __init__(self, counter):
        self.counter = counter  # a variable of the optimizer chain

    def finish(self, step):
        self.counter.assign_add(1)
        return {"steps": self.counter.value}

    def stateless_finish(self, step):
        step.assign(self.counter, step.value(self.counter) + 1)
        return {"steps": step.value(self.counter)}
```
"""

__all__ = ["StatelessStep", "Step", "StepPart", "prepared_batch", "trained_variables", "update_owner"]


class StepPart:
    """One algorithm's share of the train step; every method has a default
    that leaves the step as Keras would run it."""

    #: The algorithm's name in messages.
    label = "a step part"
    #: True when `apply` / `stateless_apply` replace `optimizer.apply`.
    owns_update = False
    #: True for a part that only trades accuracy for time by training less
    #: of the model in some steps (gradient freezing): a faster way to fit
    #: (the frozen prefix computed once) may train without it, in full.
    #: False for a part without which the step would be wrong.
    optional = False

    def prepare_batch(self, x, y, sample_weight, predict):
        """The batch this step trains on (`x`, `y`, `sample_weight`), from
        the one `fit` gave; runs when the step is traced (a compiled step
        bakes a Python value it reads in). `predict(x)` is the model's
        inference-mode output on `x`, outside the gradient, at the step's
        weights."""
        return x, y, sample_weight

    def trained_variables(self, variables):
        """The variables of `variables` this step differentiates and updates."""
        return variables

    def restored_state(self, model):
        """The non-trainable variables a skipped step puts back as they were
        before its forward pass (the update's owner only)."""
        return []

    def apply(self, step):
        """Stateful update from `step.grads`; sets `step.finite` when the
        update may be skipped. Returns the logs it adds (a dict, or None)."""
        raise NotImplementedError(f"{type(self).__name__} does not own the update")

    def stateless_apply(self, step):
        """Stateless `apply`: sets `step.trainable`, the optimizer values and
        `step.finite`, as `apply` does. Returns the logs it adds (a dict, or None)."""
        raise NotImplementedError(f"{type(self).__name__} does not own the update")

    def finish(self, step):
        """Stateful end of the step (counters); returns the logs it adds."""
        return {}

    def stateless_finish(self, step):
        """Stateless `finish`."""
        return {}

    def on_compile(self, model, compile_kwargs):
        """Checks `compile`'s arguments and prepares the chain for `model`."""

    def make_train_function(self, model, compile_step):
        """A train function replacing Keras' own, or None.

        `compile_step(prepare)` returns Keras' train function around a fresh
        step that calls `prepare()` first (a part that needs several traced
        variants, one per setting, compiles one each).
        """
        return None

    def callbacks(self, model):
        """Callbacks `fit` adds for this part."""
        return []

    def summary(self, model):
        """This part's phrase in `BoostModel.boost_summary()` ("" for none)."""
        return ""


class Step:
    """The stateful step (TensorFlow, torch) as the parts see it.

    Attributes: `model`, `seam` (the backend module), `x`, `y`,
    `sample_weight`, `trained` (variables), `y_pred` and `grads` (after the
    backward pass), `finite` (None, or the flag of a step that may be
    skipped).
    """

    def __init__(self, model, seam, x, y, sample_weight, trained):
        self.model, self.seam = model, seam
        self.x, self.y, self.sample_weight = x, y, sample_weight
        self.trained = trained
        self.y_pred = self.grads = self.finite = None


class StatelessStep:
    """The stateless step (JAX) as the parts see it: values in, values out.

    `trainable`, `non_trainable` and `optimizer_values` are lists of values
    in the order of `model.trainable_variables`, `model.non_trainable_variables`
    and `model.optimizer.variables`; `grads` follows `trainable` (None for a
    variable the step does not train); `before` is `non_trainable` before
    the forward pass; `trial_loss(values)` is the loss of a forward pass from
    `before` with `values` in place of the trained variables.
    """

    def __init__(self, model, x, y, sample_weight, state, trained_positions, loss_fn):
        self.model = model
        self.x, self.y, self.sample_weight = x, y, sample_weight
        trainable, non_trainable, optimizer_values, _ = state
        self.trainable, self.before = list(trainable), list(non_trainable)
        self.non_trainable, self.optimizer_values = list(non_trainable), list(optimizer_values)
        self.trained_positions = trained_positions
        self._loss_fn = loss_fn
        self.loss = self.y_pred = self.grads = self.finite = None
        # Where each optimizer and non-trainable variable's value lives.
        self._where = {id(v): ("optimizer_values", i) for i, v in enumerate(model.optimizer.variables)}
        self._where.update({id(v): ("non_trainable", i) for i, v in enumerate(model.non_trainable_variables)})

    def value(self, variable):
        """The current value of an optimizer or non-trainable variable."""
        values, i = self._where[id(variable)]
        return getattr(self, values)[i]

    def assign(self, variable, value):
        """Sets the value of an optimizer or non-trainable variable."""
        values, i = self._where[id(variable)]
        getattr(self, values)[i] = value

    def value_before(self, variable):
        """A non-trainable variable's value before the forward pass."""
        return self.before[self._where[id(variable)][1]]

    def optimizer_slice(self, inner):
        """Where `inner.variables` sit in the chain's variables (a wrapper
        lists its own variables, then the inner ones: a contiguous run)."""
        if not inner.variables:
            return slice(0, 0)
        start = self._where[id(inner.variables[0])][1]
        return slice(start, start + len(inner.variables))

    def trial_loss(self, trained_values):
        """The loss with `trained_values` for the trained variables, from `before`."""
        return self._loss_fn(trained_values, self.before)[1][0]


def prepared_batch(parts, x, y, sample_weight, predict):
    """The batch the step trains on: each part prepares it in turn."""
    for part in parts:
        x, y, sample_weight = part.prepare_batch(x, y, sample_weight, predict)
    return x, y, sample_weight


def trained_variables(parts, variables):
    """The variables the step trains: each part narrows the list in turn."""
    variables = list(variables)
    for part in parts:
        variables = part.trained_variables(variables)
    return variables


def update_owner(parts):
    """The part that owns the update, or None; two owners are refused."""
    owners = [part for part in parts if part.owns_update]
    if len(owners) > 1:
        names = " and ".join(type(p).__name__ for p in owners)
        raise ValueError(f"{names} both replace the update and do not combine in this version: "
                         "switch one of them off.")
    return owners[0] if owners else None

