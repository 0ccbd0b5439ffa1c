"""Learning-rate schedules: the one-cycle policy (Smith & Topin 2019)."""

import math

import keras
from keras import ops

__all__ = ["OneCycle"]


@keras.saving.register_keras_serializable(package="keras_boost")
class OneCycle(keras.optimizers.schedules.LearningRateSchedule):
    """One-cycle learning rate: cosine warm-up from `max_lr / div_factor` to
    `max_lr` over the first `pct_start` of `total_steps`, then cosine
    annealing to `max_lr / (div_factor * final_div_factor)`; constant at the
    end value after `total_steps`.

    Args:
        max_lr: peak learning rate, > 0.
        total_steps: length of the cycle in optimizer steps, >= 2.
        pct_start: fraction of the cycle spent warming up, in (0, 1).
        div_factor: initial rate = max_lr / div_factor (> 0).
        final_div_factor: final rate = initial rate / final_div_factor (> 0).

    Example:

    ```python
    schedule = boost.schedules.OneCycle(max_lr=0.1, total_steps=epochs * steps_per_epoch)
    model.compile(optimizer=keras.optimizers.SGD(schedule, momentum=0.9), loss=...)
    ```
    """

    def __init__(self, max_lr, total_steps, pct_start=0.3, div_factor=25.0, final_div_factor=1e4, name=None):
        if not isinstance(max_lr, (int, float)) or isinstance(max_lr, bool) or max_lr <= 0:
            raise ValueError(f"max_lr must be a float > 0, got {max_lr!r}.")
        if not isinstance(total_steps, int) or isinstance(total_steps, bool) or total_steps < 2:
            raise ValueError(f"total_steps must be an int >= 2, got {total_steps!r}.")
        if not 0 < pct_start < 1:
            raise ValueError(f"pct_start must be in (0, 1), got {pct_start!r}.")
        for label, value in (("div_factor", div_factor), ("final_div_factor", final_div_factor)):
            if not value > 0:
                raise ValueError(f"{label} must be > 0, got {value!r}.")
        self.max_lr, self.total_steps, self.pct_start = float(max_lr), total_steps, float(pct_start)
        self.div_factor, self.final_div_factor = float(div_factor), float(final_div_factor)
        self.name = name

    def __call__(self, step):
        step = ops.cast(step, "float32")
        initial = self.max_lr / self.div_factor
        final = initial / self.final_div_factor
        warmup = max(1.0, math.floor(self.pct_start * self.total_steps))
        anneal = max(1.0, self.total_steps - 1 - warmup)

        def cosine(start, end, fraction):
            fraction = ops.clip(fraction, 0.0, 1.0)
            return end + (start - end) * 0.5 * (1.0 + ops.cos(math.pi * fraction))

        return ops.where(
            step < warmup,
            cosine(initial, self.max_lr, step / warmup),
            cosine(self.max_lr, final, (step - warmup) / anneal),
        )

    def get_config(self):
        return {
            "max_lr": self.max_lr, "total_steps": self.total_steps, "pct_start": self.pct_start,
            "div_factor": self.div_factor, "final_div_factor": self.final_div_factor, "name": self.name,
        }
