"""What a program is, and the fit procedures programs share."""

import dataclasses
from typing import Callable

import keras
import numpy as np


# Samples per program: two batches of 8 per epoch.
SAMPLES = 16


@dataclasses.dataclass(frozen=True)
class Data:
    """A program's training data: `x` (array or dict of arrays), `y` (or None)."""

    x: object
    y: object = None

    def head(self, n):
        """The first `n` inputs (for predictions)."""
        if isinstance(self.x, dict):
            return {k: v[:n] for k, v in self.x.items()}
        return self.x[:n]


def predict(model, x):
    """Inference-mode outputs as one flat NumPy vector, every output's values
    in turn (a direct call: no predict function to compile)."""
    outputs = keras.tree.flatten(model(x, training=False))
    return np.concatenate([np.ravel(keras.ops.convert_to_numpy(o)) for o in outputs])


def adam():
    return keras.optimizers.Adam(1e-3)


def compile_with(model, optimizer, *, loss, metrics=()):
    """`model.compile` as users write it: one optimizer, a loss, metric names."""
    model.compile(optimizer=optimizer, loss=loss, metrics=list(metrics))


def plain_fit(model, data, workdir, *, batch_size=8, epochs=2, **kwargs):
    """`model.fit` on arrays, in a fixed order; returns `History.history`."""
    history = model.fit(
        data.x, data.y, batch_size=batch_size, epochs=epochs, shuffle=False, verbose=0, **kwargs
    )
    return history.history


@dataclasses.dataclass(frozen=True)
class Program:
    """A model of a shape Keras users write, with its data and training code.

    Attributes:
        name: test id.
        build: `() -> (model, Data)`: a built, uncompiled model with
            deterministic initial weights once the global seed is set.
        compile: `compile(model, **optimizers)`, one keyword per name in
            `optimizers`.
        fit: `fit(model, data, workdir) -> History.history`; may assert what
            its callbacks must have done.
        optimizers: the optimizer keywords of `compile`.
        optimizer: factory of a fresh plain Keras optimizer.
        loss_keys: the logged losses that must be finite.
        custom_train_step: the model overrides `train_step`.
        subclassed: the model is a `keras.Model` subclass (no layer graph).
        less_bn_target: LessBN (level O1) must remove at least one BN.
        backends: the backends it runs on (None: all); `skip_reason` says
            why not the others.
        entry_points: the keras_boost entry points it is trained through
            (`wrap`, `auto_boost`, `boost_model`; None: all three).
        levels: the levels it is trained at.
        policy: global dtype policy for the whole test (restored after).
        rtol, atol: tolerance of "equals plain Keras" at O0.
    """

    name: str
    build: Callable
    compile: Callable
    fit: Callable = plain_fit
    optimizers: tuple = ("optimizer",)
    optimizer: Callable = adam
    loss_keys: tuple = ("loss",)
    custom_train_step: bool = False
    subclassed: bool = False
    less_bn_target: bool = False
    backends: frozenset = None
    skip_reason: str = ""
    entry_points: frozenset = None
    levels: tuple = ("O0", "O1")
    policy: str = None
    rtol: float = 1e-5
    atol: float = 1e-6


def rng(seed=0):
    return np.random.default_rng(seed)


def images(n, size, channels, classes, seed=0):
    """Random images and integer labels (learnable: the label shifts the mean)."""
    generator = rng(seed)
    y = generator.integers(0, classes, size=(n,)).astype("int32")
    x = generator.normal(size=(n, size, size, channels)).astype("float32")
    x += (y / classes).astype("float32")[:, None, None, None]
    return Data(x, y)
