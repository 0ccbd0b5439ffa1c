"""`GroupLossScaleManager`: a per-group (layer-wise) dynamic loss scale.

The Keras port of MindSpore's "enhanced AMP". With one loss scale, the
gradients of the last layers may overflow float16 while those of the first
layers still underflow; a scale per group of layers gives each the range it
needs. The manager is a layer placed at the group boundaries of a model:
`x = manager(x, k, k + 1)` is the identity forward, and multiplies the
gradient flowing back through it by `S[k] / S[k+1]`, so the gradients of
group `k`'s variables (between boundaries `(k, k+1)` and `(k+1, k+2)`)
carry the factor `S[k+1]` and the input gradient is unscaled (`S[0] =
S[n+1] = 1`). `BoostModel` with `"loss_scale_group": True` activates it
(elsewhere the manager is the identity and warns once), unscales
each gradient by its group's scale, skips the step when any group
overflowed, and updates the scales (MindSpore's rule: x2^-0.5 for a group
that overflowed, x2^(1/1000) otherwise, every step; floor 1).

A fix of MindSpore: the gradients are unscaled by the scale the step
*used*, not by the already-updated one (MindSpore's order biases every
update by about 0.07%).
"""

import warnings

import keras
from keras import ops

from keras_boost.errors import NoEffectWarning

from keras_boost.algorithms.loss_scaling.arithmetic import scale_gradient

__all__ = ["GroupLossScaleManager"]


@keras.saving.register_keras_serializable(package="keras_boost")
class GroupLossScaleManager(keras.layers.Layer):
    """Per-group loss scales, applied at the group boundaries of a model.

    Args:
        init_loss_scale: initial scale of every group (a number), or a list
            with one initial scale per group.
        num_groups: number of groups n (the scales are `S[0..n+1]`).
        loss_scale_groups: optional; the groups (lists of layers, layer
            names or variables), also settable later as an attribute.
        **kwargs: `keras.layers.Layer` arguments (`name`, ...).

    Call: `manager(x, l1, l2)` with int boundary indices; `(0, 1)` at the
    input, `(k, k+1)` between groups `k-1` and `k`, `(n, n+1)` at the
    output. Then list each group's layers (or variables), in order, in
    `manager.loss_scale_groups`.

    Example:

    ```python
    manager = boost.layers.GroupLossScaleManager(2.0**10, num_groups=2)
    inputs = keras.Input((28, 28, 1))
    x = manager(inputs, 0, 1)
    conv = keras.layers.Conv2D(8, 3, activation="relu")
    x = manager(keras.layers.GlobalAveragePooling2D()(conv(x)), 1, 2)
    head = keras.layers.Dense(10)
    outputs = manager(head(x), 2, 3)
    model = boost.BoostModel(inputs, outputs, boost_level="O0", boost_config_dict={
        "boost": {"mode": "manual", "loss_scale_group": True}})
    manager.loss_scale_groups = [[conv], [head]]
    ```
    """

    # The scales and ratios stay float32 under any policy (a float16 ratio of
    # 2**16 is inf); keras_boost.precision.with_precision respects this.
    keeps_float32 = True

    def __init__(self, init_loss_scale=2.0**15, num_groups=1, loss_scale_groups=None, **kwargs):
        kwargs.setdefault("dtype", "float32")  # the scales and the ratio stay float32
        super().__init__(**kwargs)
        if isinstance(num_groups, bool) or not isinstance(num_groups, int) or num_groups < 1:
            raise ValueError(f"num_groups must be an int >= 1, got {num_groups!r}.")
        initial = list(init_loss_scale) if isinstance(init_loss_scale, (list, tuple)) else (
            [init_loss_scale] * num_groups)
        if len(initial) != num_groups or not all(float(s) >= 1.0 for s in initial):
            raise ValueError(
                f"init_loss_scale must be a number >= 1 or a list of {num_groups} numbers >= 1, "
                f"got {init_loss_scale!r}."
            )
        self.init_loss_scale = init_loss_scale
        self.num_groups = num_groups
        self._initial = [1.0, *map(float, initial), 1.0]
        self.loss_scale_groups = loss_scale_groups
        # Set by the BoostModel whose step divides the scales out again.
        self.active = False
        self._warned_inactive = False
        self.scales = self.add_weight(
            shape=(num_groups + 2,), initializer=keras.initializers.Constant(self._initial),
            trainable=False, name="group_loss_scales",
        )
        self.built = True

    def __call__(self, x, l1, l2, **kwargs):
        # MindSpore's positional form; Keras wants non-tensor arguments by keyword.
        return super().__call__(x, l1=l1, l2=l2, **kwargs)

    def call(self, x, l1, l2):
        for index in (l1, l2):
            if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index <= self.num_groups + 1:
                raise ValueError(
                    f"GroupLossScaleManager boundaries must be ints in [0, {self.num_groups + 1}], "
                    f"got ({l1!r}, {l2!r})."
                )
        if not self.active:
            if not self._warned_inactive:
                self._warned_inactive = True
                warnings.warn(
                    f"GroupLossScaleManager {self.name!r} is the identity here: only a BoostModel "
                    "with {'boost': {'mode': 'manual', 'loss_scale_group': True}} scales and "
                    "unscales the gradients per group (anything else would leave them scaled).",
                    NoEffectWarning,
                    stacklevel=2,
                )
            return x
        ratio = ops.divide(self.scales[l1], self.scales[l2])
        return keras.tree.map_structure(lambda t: scale_gradient(t, ratio), x)

    def compute_output_spec(self, x, l1, l2):
        return keras.tree.map_structure(lambda t: keras.KerasTensor(t.shape, t.dtype), x)

    def group_of(self, variables, model=None):
        """Per variable of `variables`, its group index (0-based).

        Members of `loss_scale_groups` may be layers, variables or layer
        names (looked up in `model`). Raises `ValueError` if the groups are
        unset or a variable is in no group (its gradient would keep a scale
        nobody divides out).
        """
        if not self.loss_scale_groups:
            raise ValueError(
                f"GroupLossScaleManager {self.name!r}: set manager.loss_scale_groups to a list of "
                "lists of layers (or variables, or layer names), one list per group, before training."
            )
        if len(self.loss_scale_groups) != self.num_groups:
            raise ValueError(
                f"GroupLossScaleManager {self.name!r} has num_groups={self.num_groups} but "
                f"loss_scale_groups lists {len(self.loss_scale_groups)} group(s)."
            )
        index = {}
        for group, members in enumerate(self.loss_scale_groups):
            for member in members:
                if isinstance(member, str):
                    if model is None:
                        raise ValueError(f"Layer name {member!r} in loss_scale_groups needs the model.")
                    member = model.get_layer(member)
                for variable in getattr(member, "trainable_variables", None) or [member]:
                    index[id(variable)] = group
        missing = [v.path for v in variables if id(v) not in index]
        if missing:
            raise ValueError(
                f"GroupLossScaleManager {self.name!r}: these trained variables are in no group of "
                f"loss_scale_groups: {missing[:5]}{' ...' if len(missing) > 5 else ''}."
            )
        return [index[id(v)] for v in variables]

    def get_config(self):
        config = super().get_config()
        groups = None
        if self.loss_scale_groups:
            # Saved as layer names; plain variables cannot be named reliably.
            groups = [[m if isinstance(m, str) else m.name for m in members
                       if isinstance(m, (str, keras.layers.Layer))] for members in self.loss_scale_groups]
        config.update(init_loss_scale=self.init_loss_scale, num_groups=self.num_groups,
                      loss_scale_groups=groups)
        return config
