"""`CurriculumSampler`: loss-based curriculum over NumPy data, annealed to uniform.

A `keras.utils.PyDataset` (so it works with `fit` on every backend) that
draws each epoch's examples with probabilities from their last-seen loss,
plus the callback (`sampler.callback()`) that rescores the examples and
tells the sampler how far training is. The curriculum's weight against
uniform sampling goes linearly from 1 to 0 at `anneal` ("0.6dur"); from
then on every epoch is a plain shuffled pass over the data.

Scoring costs one forward pass over the data per rescoring (every
`rescore_every` epochs, in inference mode); pass `difficulty=` (e.g. a
teacher's losses) and `rescore_every=0` to skip it.
"""

import math

import keras
import numpy as np

from keras_boost.algorithms.curriculum.schedule import anneal_weight
from keras_boost.algorithms.curriculum.schedule import curriculum_probabilities
from keras_boost.algorithms.curriculum.schedule import MODES
from keras_boost.durations import parse_duration

__all__ = ["CurriculumCallback", "CurriculumSampler", "per_example_loss"]


def per_example_loss(loss, y_true, y_pred):
    """Unreduced loss per example (a NumPy vector) for a Keras loss or its name.

    Example:

    ```python
    per_example_loss("sparse_categorical_crossentropy", y, model.predict(x))  # shape (len(x),)
    ```
    """
    if isinstance(loss, keras.losses.Loss):
        values = loss.call(keras.ops.convert_to_tensor(y_true), keras.ops.convert_to_tensor(y_pred))
    else:
        values = keras.losses.get(loss)(y_true, y_pred)
    values = keras.ops.convert_to_numpy(values).astype(np.float64)
    return values.reshape(values.shape[0], -1).mean(axis=1) if values.ndim > 1 else values


class CurriculumSampler(keras.utils.PyDataset):
    """Batches of `(x, y)` drawn by a loss-based curriculum that anneals to uniform.

    Each epoch draws `len(x)` examples: with replacement, from
    `curriculum_probabilities(losses, weight, mode, pressure)` while the
    curriculum weight (1 at the start, 0 at `anneal`) is positive; a
    shuffled permutation (every example once, uniform) once it is 0.
    `mode="easy"` favours low-loss examples (curriculum learning),
    `mode="hard"` high-loss ones (online batch selection). Drive it with
    `callbacks=[sampler.callback()]`, which scores the examples with the
    model's compiled loss (or `loss`) and sets the training fraction at
    each epoch; the plan of an epoch is drawn when the epoch begins.

    Args:
        x, y: NumPy arrays (same first dimension).
        batch_size: examples per batch.
        anneal: duration at which sampling is uniform: `"0.6dur"` or a
            float in (0, 1].
        mode: `"easy"` or `"hard"`.
        pressure: ratio of the largest to the smallest probability at the
            start (>= 1).
        difficulty: initial per-example scores (default: all equal, until
            the callback's first scoring).
        loss: loss used to score examples (default: the model's compiled
            loss).
        rescore_every: rescore every this many epochs (0: never).
        score_batch_size: batch size of the scoring pass.
        seed: seed of the draws.
        **kwargs: `keras.utils.PyDataset` arguments (`workers`, ...).

    Attributes:
        weights: `(epoch, curriculum weight)` of each epoch's plan.

    Example:

    ```python
    sampler = boost.callbacks.CurriculumSampler(x_train, y_train, batch_size=64, anneal="0.6dur")
    model.fit(sampler, epochs=10, callbacks=[sampler.callback()])
    sampler.weights  # [(0, 1.0), (1, 0.833), ..., (6, 0.0), ...]
    ```
    """

    def __init__(self, x, y, batch_size=32, anneal=0.6, mode="easy", pressure=10.0,
                 difficulty=None, loss=None, rescore_every=1, score_batch_size=256, seed=None,
                 **kwargs):
        super().__init__(**kwargs)
        self.x, self.y = np.asarray(x), np.asarray(y)
        if len(self.x) != len(self.y) or len(self.x) == 0:
            raise ValueError(
                f"x and y must hold the same, non-zero number of examples, got {len(self.x)} and {len(self.y)}."
            )
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be an int >= 1, got {batch_size!r}.")
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}.")
        if not float(pressure) >= 1.0:
            raise ValueError(f"pressure must be >= 1 (a ratio of probabilities), got {pressure!r}.")
        self.batch_size = batch_size
        self.anneal = parse_duration(anneal)
        self.mode = mode
        self.pressure = float(pressure)
        self.loss = loss
        self.rescore_every = int(rescore_every)
        self.score_batch_size = int(score_batch_size)
        self.seed = seed
        n = len(self.x)
        self.losses = np.zeros(n) if difficulty is None else np.asarray(difficulty, np.float64).reshape(-1)
        if self.losses.size != n:
            raise ValueError(f"difficulty must hold one score per example ({n}), got {self.losses.size}.")
        self.fraction = 0.0
        self.epoch = 0
        self.weights = []
        self._rng = np.random.default_rng(seed)
        self._plan = self._rng.permutation(n)

    def __len__(self):
        return math.ceil(len(self.x) / self.batch_size)

    def __getitem__(self, index):
        rows = self._plan[index * self.batch_size:(index + 1) * self.batch_size]
        return self.x[rows], self.y[rows]

    def weight(self):
        """The curriculum's weight against uniform sampling now."""
        return anneal_weight(self.fraction, self.anneal)

    def probabilities(self):
        """Per-example sampling probabilities now."""
        return curriculum_probabilities(self.losses, self.weight(), self.mode, self.pressure)

    def set_losses(self, losses):
        """Records the last-seen per-example losses."""
        losses = np.asarray(losses, np.float64).reshape(-1)
        if losses.size != len(self.x):
            raise ValueError(f"Expected {len(self.x)} losses, got {losses.size}.")
        self.losses = losses

    def on_epoch_begin(self):
        n, weight = len(self.x), self.weight()
        if weight > 0.0:
            self._plan = self._rng.choice(n, size=n, replace=True, p=self.probabilities())
        else:
            self._plan = self._rng.permutation(n)
        if self.weights and self.weights[-1][0] == self.epoch:
            self.weights.pop()  # redrawn (Keras may open an epoch early to inspect the data)
        self.weights.append((self.epoch, weight))

    def callback(self):
        """The callback that rescores examples and reports progress to this sampler."""
        return CurriculumCallback(self)

    def get_config(self):
        """Hyperparameters (not the data: pass `x` and `y` to `from_config`)."""
        return {
            "batch_size": self.batch_size, "anneal": self.anneal, "mode": self.mode,
            "pressure": self.pressure, "rescore_every": self.rescore_every,
            "score_batch_size": self.score_batch_size, "seed": self.seed,
        }

    @classmethod
    def from_config(cls, config, x=None, y=None):
        config = dict(config)
        x = config.pop("x", x)
        y = config.pop("y", y)
        return cls(x, y, **config)


class CurriculumCallback(keras.callbacks.Callback):
    """Feeds a `CurriculumSampler`: training fraction and per-example losses.

    Made by `CurriculumSampler.callback()`. At each epoch's start it sets
    the sampler's fraction (`epoch / epochs`) and, every
    `rescore_every` epochs while the curriculum is active, rescores all
    examples with the model in inference mode.

    Example:

    ```python
    model.fit(sampler, epochs=10, callbacks=[sampler.callback()])
    ```
    """

    def __init__(self, sampler):
        super().__init__()
        self.sampler = sampler

    def on_train_begin(self, logs=None):
        self._epochs = int(self.params.get("epochs") or 1)

    def on_epoch_begin(self, epoch, logs=None):
        sampler = self.sampler
        sampler.epoch = epoch
        sampler.fraction = epoch / self._epochs
        if sampler.rescore_every and epoch % sampler.rescore_every == 0 and sampler.weight() > 0:
            sampler.set_losses(self.score())

    def score(self):
        """Per-example losses of the sampler's data under the current model."""
        sampler = self.sampler
        loss = sampler.loss if sampler.loss is not None else self.model.loss
        if loss is None:
            raise ValueError("CurriculumSampler needs a loss: compile the model with one or pass loss=.")
        pred = self.model.predict(sampler.x, batch_size=sampler.score_batch_size, verbose=0)
        return per_example_loss(loss, sampler.y, pred)

    def get_config(self):
        """The sampler's hyperparameters (the callback is rebuilt from its sampler)."""
        return {"sampler": self.sampler.get_config()}
