"""Adaptive optimizers missing from Keras 3: AdaBelief, AdaBound and LARS.

Plain `keras.optimizers.Optimizer` subclasses (one `update_step` in
`keras.ops` each), so they run on TensorFlow, JAX and torch, serialize like
Keras' own and take the usual keywords (`weight_decay`, `clipnorm`,
`use_ema`, ...). Each update follows its paper; the tests check 20 steps of
each against a NumPy implementation of the rule.
"""

import keras
from keras import ops

from keras_boost import keras_private

__all__ = ["AdaBelief", "AdaBound", "LARS"]


def _check_learning_rate(learning_rate):
    if isinstance(learning_rate, (int, float)) and not isinstance(learning_rate, bool):
        if learning_rate <= 0:
            raise ValueError(f"learning_rate must be > 0, got {learning_rate!r}.")


def _check_beta(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
        raise ValueError(f"{name} must be a float in [0, 1), got {value!r}.")


def _check_positive(name, value, allow_zero=False):
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and (
        value >= 0 if allow_zero else value > 0
    )
    if not ok:
        raise ValueError(f"{name} must be a {'non-negative' if allow_zero else 'positive'} float, got {value!r}.")


class _AdamFamily(keras.optimizers.Optimizer):
    """A first moment and one second statistic (slot `_second_name`) per
    variable, with Adam's bookkeeping; subclasses write the update."""

    _second_name = None

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        self._momentums, self._second_moments = self.add_optimizer_variables(
            var_list, ["momentum", self._second_name]
        )

    def _prepare(self, gradient, variable, learning_rate):
        """Casts, the step count, and the first moment updated:
        `(lr, g, t, b1, b2, m, second)`."""
        dtype = variable.dtype
        b1, b2 = ops.cast(self.beta_1, dtype), ops.cast(self.beta_2, dtype)
        g = ops.cast(gradient, dtype)
        index = keras_private.optimizer_variable_index(self, variable)
        m, second = self._momentums[index], self._second_moments[index]
        self.assign(m, b1 * m + (1 - b1) * g)
        t = ops.cast(self.iterations + 1, dtype)
        return ops.cast(learning_rate, dtype), g, t, b1, b2, m, second


@keras.saving.register_keras_serializable(package="keras_boost")
class AdaBelief(_AdamFamily):
    """AdaBelief (Zhuang et al., NeurIPS 2020): Adam that scales the step by the
    "belief" in the gradient, the variance of `g - m` instead of `g**2`:

        m = b1 m + (1 - b1) g
        s = b2 s + (1 - b2) (g - m)**2 + eps
        w -= lr * (m / (1 - b1**t)) / (sqrt(s / (1 - b2**t)) + eps)

    With `rectify=True`, the RAdam rectification (Liu et al. 2020): while the
    variance estimate is unreliable (rho_t <= 4) the step is momentum SGD,
    `w -= lr * m / (1 - b1**t)`, then the adaptive step is multiplied by
    the rectification term r_t.

    Args:
        learning_rate: float > 0 or a schedule.
        beta_1, beta_2: decay rates in [0, 1).
        epsilon: > 0, added inside the second moment and to its root.
        rectify: the RAdam rectification.
        **kwargs: Keras' optimizer keywords (`weight_decay`, `clipnorm`, ...).

    Example:

    ```python
    model.compile(optimizer=boost.AdaBelief(1e-3, rectify=True), loss="mse")
    ```
    """

    _second_name = "belief"

    def __init__(self, learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-16,
                 rectify=False, name="adabelief", **kwargs):
        _check_learning_rate(learning_rate)
        _check_beta("beta_1", beta_1)
        _check_beta("beta_2", beta_2)
        _check_positive("epsilon", epsilon)
        super().__init__(learning_rate=learning_rate, name=name, **kwargs)
        self.beta_1, self.beta_2, self.epsilon, self.rectify = beta_1, beta_2, epsilon, bool(rectify)

    def update_step(self, gradient, variable, learning_rate):
        lr, g, t, b1, b2, m, s = self._prepare(gradient, variable, learning_rate)
        self.assign(s, b2 * s + (1 - b2) * ops.square(g - m) + self.epsilon)
        m_hat = m / (1 - ops.power(b1, t))
        adaptive = m_hat / (ops.sqrt(s / (1 - ops.power(b2, t))) + self.epsilon)
        if not self.rectify:
            self.assign_sub(variable, lr * adaptive)
            return
        rho_inf = 2.0 / (1 - b2) - 1.0
        b2_t = ops.power(b2, t)
        rho_t = rho_inf - 2.0 * t * b2_t / (1 - b2_t)
        safe = ops.maximum(rho_t, 5.0)
        r_t = ops.sqrt((safe - 4) * (safe - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * safe))
        self.assign_sub(variable, lr * ops.where(rho_t > 4.0, r_t * adaptive, m_hat))

    def get_config(self):
        config = super().get_config()
        config.update(beta_1=self.beta_1, beta_2=self.beta_2, epsilon=self.epsilon, rectify=self.rectify)
        return config


@keras.saving.register_keras_serializable(package="keras_boost")
class AdaBound(_AdamFamily):
    """AdaBound (Luo et al., ICLR 2019): Adam whose per-element step size is
    clipped into bounds that close in on `final_lr`, so training moves from
    Adam towards SGD:

        lower(t) = final_lr * (1 - 1 / (gamma * t + 1))
        upper(t) = final_lr * (1 + 1 / (gamma * t))
        step = clip(lr * sqrt(1 - b2**t) / (1 - b1**t) / (sqrt(v) + eps), lower, upper)
        w -= step * m

    The bound functions are the paper's (gamma = 1 - b2 = 1e-3 in its
    experiments); bias correction as in the authors' implementation. Under a
    learning-rate schedule `final_lr` scales with it (`final_lr * lr_t / lr_0`).

    Args:
        learning_rate: float > 0 or a schedule (Adam's step size).
        final_lr: > 0, the SGD learning rate the bounds converge to.
        beta_1, beta_2: decay rates in [0, 1).
        gamma: > 0, speed of convergence of the bounds.
        epsilon: > 0.
        **kwargs: Keras' optimizer keywords.

    Example:

    ```python
    model.compile(optimizer=boost.AdaBound(1e-3, final_lr=0.1), loss="mse")
    ```
    """

    _second_name = "velocity"

    def __init__(self, learning_rate=0.001, final_lr=0.1, beta_1=0.9, beta_2=0.999, gamma=1e-3,
                 epsilon=1e-8, name="adabound", **kwargs):
        _check_learning_rate(learning_rate)
        _check_positive("final_lr", final_lr)
        _check_beta("beta_1", beta_1)
        _check_beta("beta_2", beta_2)
        _check_positive("gamma", gamma)
        _check_positive("epsilon", epsilon)
        super().__init__(learning_rate=learning_rate, name=name, **kwargs)
        self.final_lr, self.beta_1, self.beta_2 = final_lr, beta_1, beta_2
        self.gamma, self.epsilon = gamma, epsilon
        # The bounds follow a schedule: final_lr * lr_t / lr_0.
        initial = learning_rate(0) if callable(learning_rate) else learning_rate
        self._initial_lr = float(ops.convert_to_numpy(initial))

    def update_step(self, gradient, variable, learning_rate):
        lr, g, t, b1, b2, m, v = self._prepare(gradient, variable, learning_rate)
        self.assign(v, b2 * v + (1 - b2) * ops.square(g))
        step_size = lr * ops.sqrt(1 - ops.power(b2, t)) / (1 - ops.power(b1, t))
        final_lr = self.final_lr * lr / self._initial_lr
        lower = final_lr * (1 - 1 / (self.gamma * t + 1))
        upper = final_lr * (1 + 1 / (self.gamma * t))
        step = ops.clip(step_size / (ops.sqrt(v) + self.epsilon), lower, upper)
        self.assign_sub(variable, step * m)

    def get_config(self):
        config = super().get_config()
        config.update(final_lr=self.final_lr, beta_1=self.beta_1, beta_2=self.beta_2,
                      gamma=self.gamma, epsilon=self.epsilon)
        return config


@keras.saving.register_keras_serializable(package="keras_boost")
class LARS(keras.optimizers.Optimizer):
    """LARS (You et al. 2017): momentum SGD with a layer-wise trust ratio.

    For each variable w with gradient g:

        local_lr = eta * |w| / (|g| + wd * |w|)     (1 where |w| or |g| is 0)
        v = momentum * v + lr * local_lr * (g + wd * w)
        w -= v

    Biases and normalization parameters (variables with at most one
    dimension) are excluded, as in MindSpore's boosted ResNet-50 recipe:
    plain momentum SGD, no trust ratio, no weight decay
    (`exclude_1d=False` adapts them too).

    Args:
        learning_rate: float > 0 or a schedule (the global rate).
        momentum: in [0, 1).
        trust_coefficient: eta > 0 (the paper's 0.001).
        lars_weight_decay: wd >= 0, inside the trust ratio (Keras'
            own `weight_decay` keyword stays available and is decoupled).
        epsilon: >= 0, added to the denominator.
        exclude_1d: skip biases and normalization parameters.
        **kwargs: Keras' optimizer keywords.

    Example:

    ```python
    model.compile(optimizer=boost.LARS(0.1, momentum=0.9, lars_weight_decay=1e-4), loss=...)
    ```
    """

    def __init__(self, learning_rate=0.1, momentum=0.9, trust_coefficient=0.001,
                 lars_weight_decay=0.0, epsilon=0.0, exclude_1d=True, name="lars", **kwargs):
        _check_learning_rate(learning_rate)
        _check_beta("momentum", momentum)
        _check_positive("trust_coefficient", trust_coefficient)
        _check_positive("lars_weight_decay", lars_weight_decay, allow_zero=True)
        _check_positive("epsilon", epsilon, allow_zero=True)
        super().__init__(learning_rate=learning_rate, name=name, **kwargs)
        self.momentum, self.trust_coefficient = momentum, trust_coefficient
        self.lars_weight_decay, self.epsilon, self.exclude_1d = lars_weight_decay, epsilon, bool(exclude_1d)

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        self._velocities = self.add_optimizer_variables(var_list, "velocity")

    def adapts(self, variable):
        """Whether `variable` gets the trust ratio (and LARS' weight decay)."""
        return not (self.exclude_1d and len(variable.shape) <= 1)

    def update_step(self, gradient, variable, learning_rate):
        dtype = variable.dtype
        lr = ops.cast(learning_rate, dtype)
        g = ops.cast(gradient, dtype)
        v = self._velocities[keras_private.optimizer_variable_index(self, variable)]
        if self.adapts(variable):
            w_norm = ops.sqrt(ops.sum(ops.square(variable)))
            g_norm = ops.sqrt(ops.sum(ops.square(g)))
            wd = self.lars_weight_decay
            ratio = self.trust_coefficient * w_norm / (g_norm + wd * w_norm + self.epsilon)
            local_lr = ops.where((w_norm > 0) & (g_norm > 0), ratio, ops.ones_like(ratio))
            g = g + wd * variable
        else:
            local_lr = ops.cast(1.0, dtype)
        self.assign(v, self.momentum * v + lr * local_lr * g)
        self.assign_sub(variable, v)

    def get_config(self):
        config = super().get_config()
        config.update(momentum=self.momentum, trust_coefficient=self.trust_coefficient,
                      lars_weight_decay=self.lars_weight_decay, epsilon=self.epsilon,
                      exclude_1d=self.exclude_1d)
        return config
