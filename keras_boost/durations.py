"""Durations as fractions of training ("0.6dur"), shared by keras_boost's schedules.

A duration says *when* in training something happens without a magic step
count: `0.6` or `"0.6dur"` both mean "60% of the way through training"
(Composer's "dur" time unit). Callbacks turn it into steps once they know
the length of the run (`epochs * steps_per_epoch`).

Example:

```python
from keras_boost.durations import parse_duration

parse_duration("0.6dur")  # 0.6
parse_duration(0.25)      # 0.25
parse_duration("60%")     # 0.6
```
"""

import math
import numbers

__all__ = ["parse_duration", "VALID_FORMS"]

VALID_FORMS = ("a float in (0, 1] such as 0.6", "a string such as '0.6dur'", "a percentage such as '60%'")


def parse_duration(value):
    """Parses a duration into a fraction of training in (0, 1].

    Args:
        value: a number in (0, 1] (`0.6`), a string with the `dur` unit
            (`"0.6dur"`, spaces and case ignored), a percentage string
            (`"60%"`), or a plain number string (`"0.6"`).

    Returns:
        The fraction of training, a Python float in (0, 1].

    Raises:
        ValueError: naming the bad value and the valid forms, for anything
            else (steps like `"100ba"`, epochs like `"2ep"`, 0, negative
            numbers, numbers above 1, NaN, booleans).

    Example:

    ```python
    parse_duration("0.6dur")  # 0.6
    parse_duration(1)         # 1.0
    parse_duration("1.5dur")  # ValueError: ... must be in (0, 1] ...
    ```
    """
    fraction = None
    if isinstance(value, bool):
        fraction = None
    elif isinstance(value, numbers.Real):
        fraction = float(value)
    elif isinstance(value, str):
        text = value.strip().lower().replace(" ", "")
        scale = 1.0
        if text.endswith("dur"):
            text = text[:-3]
        elif text.endswith("%"):
            text, scale = text[:-1], 0.01
        try:
            fraction = float(text) * scale
        except ValueError:
            fraction = None
    if fraction is None or math.isnan(fraction):
        raise ValueError(
            f"Cannot parse the duration {value!r}: expected {', '.join(VALID_FORMS)} "
            "(a fraction of training)."
        )
    if not 0.0 < fraction <= 1.0:
        raise ValueError(
            f"The duration {value!r} is {fraction:g} of training, but durations must be in (0, 1]: "
            f"use {', '.join(VALID_FORMS)}."
        )
    return fraction
