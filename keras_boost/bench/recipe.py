"""The recipe of a benchmark workload: model factory, data and training schedule.

`Workload` is the unit `keras-boost bench` runs (`keras_boost.bench.training`);
the workloads themselves live in `keras_boost.bench.catalog` (the MNIST CNNs) and in
`keras_boost.bench.zoo` (the models users bring). A `FineTune` makes a
workload a two-phase transfer-learning run (keras.io's flow: train a new
head on a frozen base, then unfreeze the top of the base and fine-tune).
"""

import dataclasses

__all__ = ["FineTune", "METRICS", "OPTIMIZERS", "Workload"]

OPTIMIZERS = ("sgd", "adamw")
# What the bench measures after every epoch: test accuracy (higher is
# better) or the mean cross-entropy of the test split (lower is better).
METRICS = ("accuracy", "loss")


@dataclasses.dataclass
class FineTune:
    """The second phase of a transfer-learning workload.

    keras.io's transfer-learning flow: the model the workload builds holds
    a pretrained base (a nested `keras.Model` named `base`, frozen and
    called with `training=False`) under a new head. Phase 1 trains the head
    (`Workload.epochs - epochs` epochs at `Workload.learning_rate`); then
    `unfreeze(model)` makes the named layers of the base trainable, the
    model is recompiled with a fresh optimizer and phase 2 trains `epochs`
    epochs at the lower peak `learning_rate` (the same optimizer kind,
    momentum and weight decay, its own warmup and cosine decay to 0).

    The layers are found by name at the time of the call, so `unfreeze`
    works on any copy of the model with the same names (e.g. the one
    `BoostModel.from_model` makes when a surgery copies the graph). Every
    other layer of the base stays frozen; keep BatchNormalization layers
    out of `layers`: a frozen BN runs in inference mode (keras.io's
    advice), a trainable one would move its statistics in phase 2.

    Args:
        epochs: epochs of phase 2 (part of `Workload.epochs`; phase 1 gets
            the others).
        learning_rate: peak learning rate of phase 2.
        layers: names of the base's layers that phase 2 trains (the top
            block(s)).
        base: name of the nested base model in the model.
        warmup_epochs: linear warmup of phase 2's learning rate, in epochs
            (0: none).

    Example:

    ```python
    fine_tune = FineTune(epochs=2, learning_rate=0.005, layers=("top_conv1", "top_conv2"))
    Workload("mine", build, my_data, epochs=5, fine_tune=fine_tune)
    ```
    """

    epochs: int
    learning_rate: float
    layers: tuple
    base: str = "base"
    warmup_epochs: float = 0.0

    def __post_init__(self):
        if isinstance(self.epochs, bool) or not isinstance(self.epochs, int) or self.epochs < 1:
            raise ValueError(f"FineTune epochs must be an int >= 1, got {self.epochs!r}.")
        if not self.learning_rate > 0:
            raise ValueError(f"FineTune learning_rate must be > 0, got {self.learning_rate!r}.")
        if isinstance(self.layers, str) or not self.layers or not all(
            isinstance(name, str) and name for name in self.layers
        ):
            raise ValueError(f"FineTune layers must be a non-empty sequence of layer names, got {self.layers!r}.")
        self.layers = tuple(self.layers)
        if not isinstance(self.base, str) or not self.base:
            raise ValueError(f"FineTune base must be a non-empty layer name, got {self.base!r}.")
        if not 0.0 <= self.warmup_epochs < self.epochs:
            raise ValueError(
                f"FineTune warmup_epochs must be in [0, epochs={self.epochs}), got {self.warmup_epochs!r}."
            )

    def rescaled_epochs(self, ratio, run_epochs):
        """This phase's epochs in a run rescaled by `ratio` to `run_epochs`
        epochs: `round(epochs * ratio)`, at least 1 and leaving the first
        phase at least 1.

        Example:

        ```python
        FineTune(epochs=8, learning_rate=0.01, layers=("conv",)).rescaled_epochs(0.75, 9)   # 6
        ```
        """
        return min(max(1, int(round(self.epochs * ratio))), run_epochs - 1)

    def unfreeze(self, model):
        """Makes `layers` of `model`'s base trainable, and only those.

        Raises `ValueError` naming what is missing: a model without the
        base, or a base without one of the layers.

        Example:

        ```python
        fine_tune.unfreeze(model)   # model.get_layer("base").get_layer("top_conv1").trainable: True
        ```
        """
        names = [layer.name for layer in model.layers]
        if self.base not in names:
            raise ValueError(
                f"FineTune base {self.base!r} is not a layer of model {model.name!r}; its layers: {names}."
            )
        base = model.get_layer(self.base)
        inner = {layer.name for layer in getattr(base, "layers", ())}
        missing = [name for name in self.layers if name not in inner]
        if missing:
            raise ValueError(
                f"FineTune layers {missing} are not layers of base {self.base!r}; its layers: {sorted(inner)}."
            )
        base.trainable = True  # sets every nested layer; the loop below keeps only `layers`
        for layer in base.layers:
            layer.trainable = layer.name in self.layers


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
        target: the target of "time to target": a test accuracy in [0, 1]
            (`metric="accuracy"`), or a test loss > 0 (`metric="loss"`).
        warmup_epochs: length of a linear warmup from 0 to `learning_rate`
            before the cosine decay, in epochs (may be fractional; 0: none).
            `baseline-short` rescales it with the rest of the schedule.
        momentum: SGD momentum.
        weight_decay: the optimizer's `weight_decay` (None: none).
        optimizer: `"sgd"` (SGD with `momentum`, the CNN recipes) or
            `"adamw"` (AdamW with `beta_1=momentum`, as transformers are
            trained); both follow the warmup and cosine schedule.
        fine_tune: None (one phase), or a `FineTune`: the run is then two
            phases, the first `epochs - fine_tune.epochs` epochs training
            what `build` leaves trainable (the new head) with the
            schedule above (its warmup in the first phase), the others
            after `fine_tune.unfreeze` with the schedule of `fine_tune`.
        metric: what the run measures on the test split after every epoch:
            `"accuracy"` (of the argmax of the logits; higher is better) or
            `"loss"` (the mean sparse cross-entropy of the logits in nats,
            over every label: every position of a language model; lower
            is better). A target is reached at the first epoch at or
            above it (accuracy) or at or below it (loss).

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
    fine_tune: FineTune = None
    metric: str = "accuracy"

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
        if self.metric not in METRICS:
            raise ValueError(f"Workload metric must be one of {list(METRICS)}, got {self.metric!r}.")
        if self.metric == "accuracy" and not 0.0 <= self.target <= 1.0:
            raise ValueError(f"Workload target must be an accuracy in [0, 1], got {self.target!r}.")
        if self.metric == "loss" and not self.target > 0.0:
            raise ValueError(f"Workload target must be a loss > 0 (metric 'loss'), got {self.target!r}.")
        if self.fine_tune is not None and not isinstance(self.fine_tune, FineTune):
            raise TypeError(f"Workload fine_tune must be None or a FineTune, got {self.fine_tune!r}.")
        if self.fine_tune is not None and not self.fine_tune.epochs < self.epochs:
            raise ValueError(
                f"Workload epochs={self.epochs} must exceed fine_tune.epochs={self.fine_tune.epochs}: "
                "the first phase (the new head on the frozen base) needs at least one epoch."
            )
        first = self.epochs - (self.fine_tune.epochs if self.fine_tune else 0)
        if not 0.0 <= self.warmup_epochs < first:
            where = f"epochs={self.epochs}" if self.fine_tune is None else f"the first phase's {first} epochs"
            raise ValueError(f"Workload warmup_epochs must be in [0, {where}), got {self.warmup_epochs!r}.")
        if not 0.0 <= self.momentum < 1.0:
            raise ValueError(f"Workload momentum must be in [0, 1), got {self.momentum!r}.")
        if self.weight_decay is not None and not self.weight_decay >= 0:
            raise ValueError(f"Workload weight_decay must be None or >= 0, got {self.weight_decay!r}.")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"Workload optimizer must be one of {list(OPTIMIZERS)}, got {self.optimizer!r}.")

    @property
    def lower_is_better(self):
        """Whether a lower value of the metric is better (`metric="loss"`)."""
        return self.metric == "loss"

    def with_epochs(self, epochs):
        """This recipe over `epochs` epochs (`keras-boost bench --epochs`, `--quick`).

        Warmups are kept under half of their phase (a warmup as long as the
        run would leave no decay); a fine-tuning workload keeps its phases'
        proportions, each at least one epoch.

        Example:

        ```python
        finetune_workload().with_epochs(6).fine_tune.epochs   # 4 of 6 (8 of 12)
        ```
        """
        if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 1:
            raise ValueError(f"epochs must be an int >= 1, got {epochs!r}.")
        if epochs == self.epochs:
            return self
        fine_tune = self.fine_tune
        first = epochs
        if fine_tune is not None:
            if epochs < 2:
                raise ValueError(f"Workload {self.name!r} trains in two phases: it needs epochs >= 2, got {epochs}.")
            second = fine_tune.rescaled_epochs(epochs / self.epochs, epochs)
            fine_tune = dataclasses.replace(
                fine_tune, epochs=second, warmup_epochs=min(fine_tune.warmup_epochs, second / 2))
            first = epochs - second
        return dataclasses.replace(self, epochs=epochs, fine_tune=fine_tune,
                                   warmup_epochs=min(self.warmup_epochs, first / 2))

