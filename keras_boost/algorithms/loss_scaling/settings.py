"""`DynamicLossScale`: the settings of BoostModel's dynamic loss scaling."""

import math

import keras

__all__ = ["DynamicLossScale", "resolve_loss_scale"]


@keras.saving.register_keras_serializable(package="keras_boost")
class DynamicLossScale:
    """Dynamic loss-scale settings (the state lives in the optimizer chain's
    `DynamicLossScaleOptimizer`).

    The loss is multiplied by `scale` before differentiation and the gradients
    divided by it afterwards. A step whose gradients are not finite on any
    replica is skipped (weights and optimizer state untouched), and the scale
    is divided by `growth_factor`, never below `min_scale`. After
    `scale_window` consecutive finite steps it is multiplied by
    `growth_factor`.

    Args:
        initial_scale: starting scale, `2**15` as in Keras and MindSpore.
        growth_factor: factor for growth and back-off (MindSpore's
            `scale_factor`), > 1.
        scale_window: finite steps between two growths, >= 1.
        min_scale: floor of the scale (Keras 3 has none), > 0.

    Example:

    ```python
    model = boost.BoostModel(inputs, outputs,
                             loss_scale=boost.DynamicLossScale(scale_window=500))
    ```
    """

    def __init__(
        self, initial_scale=2.0**15, growth_factor=2.0, scale_window=2000, min_scale=1.0
    ):
        def number(name, value, low):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"{name} must be a number, got {value!r}.")
            if not math.isfinite(value) or value <= low:
                raise ValueError(f"{name} must be finite and > {low}, got {value!r}.")
            return float(value)

        self.initial_scale = number("initial_scale", initial_scale, 0)
        self.growth_factor = number("growth_factor", growth_factor, 1)
        self.min_scale = number("min_scale", min_scale, 0)
        if isinstance(scale_window, bool) or not isinstance(scale_window, int):
            raise TypeError(f"scale_window must be an int, got {scale_window!r}.")
        if scale_window < 1:
            raise ValueError(f"scale_window must be >= 1, got {scale_window!r}.")
        self.scale_window = scale_window
        if self.initial_scale < self.min_scale:
            raise ValueError(
                f"initial_scale ({initial_scale}) must be >= min_scale ({min_scale})."
            )

    def get_config(self):
        return {
            "initial_scale": self.initial_scale,
            "growth_factor": self.growth_factor,
            "scale_window": self.scale_window,
            "min_scale": self.min_scale,
        }

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    def __eq__(self, other):
        return isinstance(other, DynamicLossScale) and self.get_config() == other.get_config()

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_config().items())
        return f"DynamicLossScale({args})"


def resolve_loss_scale(loss_scale, uses_float16):
    """Maps BoostModel's `loss_scale` argument to a `DynamicLossScale` or None.

    `"auto"` turns dynamic scaling on exactly when the model computes in
    float16 (bfloat16 has float32's range and needs none).
    """
    if isinstance(loss_scale, DynamicLossScale):
        return loss_scale
    if isinstance(loss_scale, dict):
        return DynamicLossScale.from_config(loss_scale)
    if loss_scale is None or loss_scale is False:
        return None
    if loss_scale == "dynamic":
        return DynamicLossScale()
    if loss_scale == "auto":
        return DynamicLossScale() if uses_float16 else None
    raise ValueError(
        f"loss_scale must be 'auto', 'dynamic', None, a DynamicLossScale or its "
        f"config dict, got {loss_scale!r}."
    )
