"""The recipe of a benchmark workload: model factory, data and training schedule.

`Workload` is the unit `keras-boost bench` runs (`keras_boost.bench.harness`);
the workloads themselves live in `harness` (the MNIST CNNs) and in
`keras_boost.bench.zoo` (the models users bring).
"""

import dataclasses

__all__ = ["OPTIMIZERS", "Workload"]

OPTIMIZERS = ("sgd", "adamw")


@dataclasses.dataclass
class Workload:
    """A named model factory and dataset with its training recipe.

    Args:
        name: short name used in reports.
        build: `build(seed) -> keras.Model`, a built functional model that
            outputs logits.
        data: `data() -> ((x, y), (x_test, y_test))`, integer labels.
        epochs: epochs of the baseline run.
        batch_size: batch size.
        learning_rate: peak learning rate of SGD with momentum and cosine
            decay to 0 at the end of the run.
        target: target test accuracy for "time to accuracy".
        warmup_epochs: length of a linear warmup from 0 to `learning_rate`
            before the cosine decay, in epochs (may be fractional; 0: none).
            `baseline-short` rescales it with the rest of the schedule.
        momentum: SGD momentum.
        weight_decay: the optimizer's `weight_decay` (None: none).
        optimizer: `"sgd"` (SGD with `momentum`, the CNN recipes) or
            `"adamw"` (AdamW with `beta_1=momentum`, as transformers are
            trained); both follow the warmup and cosine schedule.

    Example:

    ```python
    def build(seed):
        return keras.Sequential([keras.Input((8,)), keras.layers.Dense(3)])
    Workload("mine", build, my_data, epochs=3, target=0.8)
    ```
    """

    name: str
    build: object
    data: object
    epochs: int = 5
    batch_size: int = 64
    learning_rate: float = 0.05
    target: float = 0.9
    warmup_epochs: float = 0.0
    momentum: float = 0.9
    weight_decay: float = None
    optimizer: str = "sgd"

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"Workload name must be a non-empty string, got {self.name!r}.")
        for field in ("build", "data"):
            if not callable(getattr(self, field)):
                raise TypeError(f"Workload {field} must be callable, got {getattr(self, field)!r}.")
        for field in ("epochs", "batch_size"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"Workload {field} must be an int >= 1, got {value!r}.")
        if not self.learning_rate > 0:
            raise ValueError(f"Workload learning_rate must be > 0, got {self.learning_rate!r}.")
        if not 0.0 <= self.target <= 1.0:
            raise ValueError(f"Workload target must be an accuracy in [0, 1], got {self.target!r}.")
        if not 0.0 <= self.warmup_epochs < self.epochs:
            raise ValueError(
                f"Workload warmup_epochs must be in [0, epochs={self.epochs}), got {self.warmup_epochs!r}."
            )
        if not 0.0 <= self.momentum < 1.0:
            raise ValueError(f"Workload momentum must be in [0, 1), got {self.momentum!r}.")
        if self.weight_decay is not None and not self.weight_decay >= 0:
            raise ValueError(f"Workload weight_decay must be None or >= 0, got {self.weight_decay!r}.")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"Workload optimizer must be one of {list(OPTIMIZERS)}, got {self.optimizer!r}.")
