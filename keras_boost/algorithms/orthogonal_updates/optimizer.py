"""`OrthogonalUpdates`: Muon-style orthogonalized updates around any Keras optimizer."""

import warnings
import weakref

import keras
import numpy as np
from keras import ops

from keras_boost import backend as kb_backend
from keras_boost import keras_private
from keras_boost.algorithms.optimizer_wrapper import HYPERPARAMETERS
from keras_boost.algorithms.optimizer_wrapper import optimizer_chain
from keras_boost.algorithms.optimizer_wrapper import OptimizerWrapper
from keras_boost.algorithms.orthogonal_updates.newton_schulz import NS_COEFFICIENTS
from keras_boost.algorithms.orthogonal_updates.newton_schulz import momentum_direction
from keras_boost.algorithms.orthogonal_updates.newton_schulz import orthogonal_update
from keras_boost.algorithms.orthogonal_updates.routing import NOT_ROUTED
from keras_boost.algorithms.orthogonal_updates.routing import routes_for_model
from keras_boost.errors import NoEffectWarning

__all__ = ["OrthogonalUpdates"]

_RULES = ("auto", "adam", "norm")


def _building_model(optimizer):
    """The `keras.Model` compiled with `optimizer` (alone or in a chain)
    whose method is building it now, or None (see `keras_private.calling_model`)."""
    def compiled_with(model):
        return any(o is optimizer for o in optimizer_chain(getattr(model, "optimizer", None)))

    return keras_private.calling_model(compiled_with)


@keras.saving.register_keras_serializable(package="keras_boost")
class OrthogonalUpdates(OptimizerWrapper):
    """Muon-style orthogonalized updates for the hidden weight matrices, the
    wrapped optimizer's own update for everything else.

    For each routed kernel (see below), with gradient `g`:

    1. momentum `B <- momentum * B + g`; direction `g + momentum * B`
       (Nesterov, the default) or `B`;
    2. the direction, viewed as a `(fan_in, fan_out)` matrix, is
       orthogonalized by `ns_steps` quintic Newton-Schulz iterations (Keras'
       `Muon.zeropower_via_newtonschulz5`);
    3. scaled (`rms_rule`): `"adam"` multiplies by `rms_rate *
       sqrt(max(fan_in, fan_out))`, giving an update RMS of about
       `rms_rate` (0.2 ~ AdamW's, Moonlight's rule), so an Adam-family
       optimizer's learning rate and weight decay carry over; `"norm"`
       scales it to the Frobenius norm of SGD's steady-state step on the
       same gradients, `||direction|| * (1 - momentum) / (1 - sgd_momentum)`;
       `"auto"` picks `"norm"` when the innermost optimizer is a
       `keras.optimizers.SGD`, else `"adam"`;
    4. `w <- w - lr * wd * w` (decoupled, when the wrapped optimizer has a
       `weight_decay` and does not exclude `w` from it), then `w <- w - lr *
       update`, with `lr` the wrapped optimizer's current learning rate
       (schedules included).

    The wrapped optimizer's loss-scale factor and gradient clipping apply to
    the routed gradients too (clipping over the whole gradient list).

    Routing (`routes_for_model`): 2-D Dense kernels, and EinsumDense kernels
    whose equation contracts leading axes (MultiHeadAttention's q/k/v
    `(hidden, heads, head_dim)` and output `(heads, head_dim, hidden)`
    kernels, viewed as `(hidden, heads*head_dim)` and `(heads*head_dim,
    hidden)`); convolution kernels as `(k*k*in, out)` only with
    `conv_kernels=True`. Left to the wrapped optimizer: variables of rank <
    2, Embedding layers (and paths containing "embedding"), the model's
    output layer (its last Dense/EinsumDense; `exclude_output`), and paths
    matching a regex of `exclude`. The layer types come from `model`, else
    from the model compiled with this optimizer when Keras builds it; built
    outside a model, variable names and shapes decide, and the output
    layer is the last routed kernel of the variable list.

    State: one momentum buffer per routed kernel. The wrapped optimizer is
    built for every variable (its slots for the routed ones stay unused),
    and its `iterations` count the steps.

    Args:
        optimizer: the `keras.optimizers.Optimizer` to wrap (Adam, AdamW,
            SGD, ...); its Keras `gradient_accumulation_steps` must be unset.
        model: optional `keras.Model` it trains (for the layer types; not
            saved).
        momentum: float in [0, 1), the buffer's momentum. Default 0.95.
        nesterov: bool. Default True.
        ns_steps: int >= 1, Newton-Schulz iterations. Default 5.
        rms_rule: `"auto"`, `"adam"` or `"norm"` (see above).
        rms_rate: the update RMS of the `"adam"` rule. Default 0.2.
        exclude: regex or list of regexes; matching variable paths keep the
            wrapped optimizer's update.
        exclude_embeddings: bool. Default True.
        exclude_output: bool. Default True.
        conv_kernels: bool, also orthogonalize convolution kernels.
            Default False.
        name: optional name.

    Example:

    ```python
    opt = boost.optimizers.OrthogonalUpdates(keras.optimizers.AdamW(1e-3, weight_decay=0.01))
    model.compile(optimizer=opt, loss="sparse_categorical_crossentropy")
    model.fit(x, y)
    opt.routed_paths()   # the kernels that got orthogonalized updates
    ```
    """

    # Its own hyperparameters, though Keras optimizers have some of these names.
    forwarded_hyperparameters = HYPERPARAMETERS - {
        "momentum", "nesterov", "ns_steps", "rms_rate", "exclude_embeddings",
    }

    def __init__(self, optimizer, model=None, momentum=0.95, nesterov=True, ns_steps=5,
                 rms_rule="auto", rms_rate=0.2, exclude=None, exclude_embeddings=True,
                 exclude_output=True, conv_kernels=False, name=None, **kwargs):
        super().__init__(optimizer, name=name or "orthogonal_updates", **kwargs)
        if model is not None and not isinstance(model, keras.Model):
            raise TypeError(f"model must be None or a keras.Model, got {type(model).__name__}.")
        for inner in optimizer_chain(optimizer):
            if getattr(inner, "gradient_accumulation_steps", None):
                raise ValueError(
                    f"{self.name}: the wrapped optimizer {inner.name!r} has Keras' "
                    "gradient_accumulation_steps; use boost.optimizers.GradientAccumulation "
                    "around OrthogonalUpdates instead."
                )
        if not (isinstance(momentum, (int, float)) and 0.0 <= momentum < 1.0):
            raise ValueError(f"momentum must be a number in [0, 1), got {momentum!r}.")
        if isinstance(ns_steps, bool) or not isinstance(ns_steps, int) or ns_steps < 1:
            raise ValueError(f"ns_steps must be an int >= 1, got {ns_steps!r}.")
        if rms_rule not in _RULES:
            raise ValueError(f"rms_rule must be one of {list(_RULES)}, got {rms_rule!r}.")
        if not (isinstance(rms_rate, (int, float)) and rms_rate > 0):
            raise ValueError(f"rms_rate must be a number > 0, got {rms_rate!r}.")
        if isinstance(exclude, str):
            exclude = [exclude]
        self.momentum = float(momentum)
        self.nesterov = bool(nesterov)
        self.ns_steps = int(ns_steps)
        self.rms_rule = rms_rule
        self.rms_rate = float(rms_rate)
        self.exclude = tuple(exclude or ())
        self.exclude_embeddings = bool(exclude_embeddings)
        self.exclude_output = bool(exclude_output)
        self.conv_kernels = bool(conv_kernels)
        self._model_ref = weakref.ref(model) if model is not None else None
        # Per position of the build-time variable list: the split index of
        # the kernel's matrix view, or 0 (the wrapped optimizer's update).
        # Saved in the config once built, so a reloaded model routes alike.
        self._routes = None
        self._momentums = None

    # --- state -------------------------------------------------------------

    def _build_own(self, var_list):
        if self._routes is None or len(self._routes) != len(var_list):
            model = self._model_ref() if self._model_ref is not None else _building_model(self)
            self._routes = routes_for_model(
                var_list, model, self.exclude, self.exclude_embeddings, self.exclude_output,
                self.conv_kernels,
            )
        self._momentums = [
            self.add_variable_from_reference(v, name="orthogonal_momentum") if r else None
            for v, r in zip(var_list, self._routes)
        ]
        if not any(self._routes):
            warnings.warn(
                f"{self.name}: no variable is routed to orthogonalized updates (no hidden "
                "Dense/EinsumDense kernel); the wrapped optimizer updates every variable.",
                NoEffectWarning,
                stacklevel=4,
            )

    @property
    def routes(self):
        """Per built variable, the split of its matrix view (0: the wrapped
        optimizer's update); None before build."""
        return None if self._routes is None else list(self._routes)

    def routed_paths(self):
        """The paths of the variables that get orthogonalized updates."""
        variables = keras_private.optimizer_trained_variables(self) if self.built else []
        return [v.path for v, r in zip(variables, self._routes or ()) if r]

    def summary(self):
        """One phrase: how many kernels get orthogonalized updates."""
        if self._routes is None:
            return "orthogonalized updates of the hidden weight matrices"
        return (f"orthogonalized updates of {sum(1 for r in self._routes if r)} of "
                f"{len(self._routes)} variables")

    def _innermost(self):
        return optimizer_chain(self.inner_optimizer)[-1]

    def _rule_and_ratio(self, innermost):
        rule = self.rms_rule
        if rule == "auto":
            rule = "norm" if isinstance(innermost, keras.optimizers.SGD) else "adam"
        ratio = 1.0
        if rule == "norm":
            sgd_momentum = float(getattr(innermost, "momentum", 0.0) or 0.0)
            ratio = (1.0 - self.momentum) / (1.0 - sgd_momentum)
        return rule, ratio

    # --- updates -----------------------------------------------------------

    def _apply(self, grads, trainable_variables):
        if trainable_variables is None:
            trainable_variables = keras_private.optimizer_trained_variables(self)
        trainable_variables = list(trainable_variables)
        if len(grads) != len(trainable_variables):
            raise ValueError(f"Got {len(grads)} gradients for {len(trainable_variables)} variables.")
        if kb_backend.current().replica_layout()[0] > 1:
            raise NotImplementedError(
                f"{self.name}: orthogonalized updates under a tf.distribute strategy with "
                "several replicas are not implemented (the routed gradients would not be "
                "all-reduced)."
            )
        # NumPy gradients (a custom loop) as tensors: torch's optimizers need them.
        grads = [ops.convert_to_tensor(g) if isinstance(g, np.ndarray) else g for g in grads]
        positions = [keras_private.optimizer_variable_index(self, v) for v in trainable_variables]
        routed = [self._routes[p] if g is not None else NOT_ROUTED for g, p in zip(grads, positions)]
        if not any(routed):
            return self.inner_optimizer.apply(grads, trainable_variables)

        innermost = self._innermost()
        scale = innermost.loss_scale_factor
        clipping = bool(innermost.clipnorm or innermost.global_clipnorm or innermost.clipvalue)
        unscaled = [g if g is None or scale is None else g / scale for g in grads]
        if clipping:
            unscaled = keras_private.optimizer_clip_gradients(innermost, unscaled)
        # Read before the wrapped optimizer advances `iterations`.
        lr = ops.convert_to_tensor(innermost.learning_rate)
        rule, ratio = self._rule_and_ratio(innermost)
        for g, variable, p, split in zip(unscaled, trainable_variables, positions, routed):
            if split:
                self._update_routed(g, variable, self._momentums[p], split, lr, innermost, rule, ratio)

        rest = [
            (g if not clipping else (c if scale is None else c * scale), v)
            for g, c, v, split in zip(grads, unscaled, trainable_variables, routed)
            if not split and g is not None
        ]
        if rest:
            self.inner_optimizer.apply([g for g, _ in rest], [v for _, v in rest])
        else:
            self.inner_optimizer.iterations.assign_add(1)

    def _update_routed(self, gradient, variable, buffer, split, lr, innermost, rule, ratio):
        dtype = variable.dtype
        g = ops.cast(ops.convert_to_tensor(gradient), dtype)
        new_buffer, direction = momentum_direction(buffer.value, g, self.momentum, self.nesterov)
        buffer.assign(new_buffer)
        update = orthogonal_update(
            direction, split, self.ns_steps, NS_COEFFICIENTS, rule, self.rms_rate, ratio
        )
        lr = ops.cast(lr, dtype)
        value = variable.value
        wd = innermost.weight_decay
        if wd and keras_private.optimizer_uses_weight_decay(innermost, variable):
            value = value - value * (lr * ops.cast(wd, dtype))
        variable.assign(value - lr * update)
        if variable.constraint is not None:
            variable.assign(variable.constraint(variable))

    def _stateless_apply(self, own_variables, inner_variables, grads, trainable):
        # The stateful update, run in a scope that maps every variable it
        # reads (model, own and inner state) to the values given.
        variables = keras_private.optimizer_trained_variables(self)
        own = keras_private.optimizer_own_variables(self)
        mapping = (list(zip(variables, trainable)) + list(zip(own, own_variables))
                   + list(zip(self.inner_optimizer.variables, inner_variables)))
        with keras.StatelessScope(state_mapping=mapping) as scope:
            self._apply(list(grads), variables)

        def current(vs, old):
            return [o if scope.get_current_value(v) is None else scope.get_current_value(v)
                    for v, o in zip(vs, old)]

        return (current(variables, trainable), current(own, own_variables),
                current(self.inner_optimizer.variables, inner_variables))

    # --- serialization -----------------------------------------------------

    def get_config(self):
        config = super().get_config()
        config.update({
            "momentum": self.momentum,
            "nesterov": self.nesterov,
            "ns_steps": self.ns_steps,
            "rms_rule": self.rms_rule,
            "rms_rate": self.rms_rate,
            "exclude": list(self.exclude),
            "exclude_embeddings": self.exclude_embeddings,
            "exclude_output": self.exclude_output,
            "conv_kernels": self.conv_kernels,
        })
        if self._routes is not None:
            config["routes"] = list(self._routes)
        return config

    @classmethod
    def from_config(cls, config, custom_objects=None):
        config = dict(config)
        routes = config.pop("routes", None)
        optimizer = super().from_config(config, custom_objects=custom_objects)
        optimizer._routes = None if routes is None else [int(r) for r in routes]
        return optimizer
