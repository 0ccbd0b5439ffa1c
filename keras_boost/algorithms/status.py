"""`AlgorithmStatus`: whether an algorithm acts in a setting, and why."""

__all__ = ["AlgorithmStatus"]


class AlgorithmStatus:
    """Whether an algorithm acts in this setting (truthy when it does), and why.

    Returned by `BoostModel.check_adasum_enable()`, `AdaSum.status()` and
    `BoostModel.check_dim_reduce_enable()`.

    Example:

    ```python
    status = model.check_adasum_enable()
    if not status:
        print("AdaSum is idle:", status.reason)
    ```
    """

    def __init__(self, enabled, reason):
        self.enabled = bool(enabled)
        self.reason = reason

    def __bool__(self):
        return self.enabled

    def __repr__(self):
        return f"AlgorithmStatus(enabled={self.enabled}, reason={self.reason!r})"
