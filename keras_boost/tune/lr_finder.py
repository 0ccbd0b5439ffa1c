"""`find_lr`: the learning-rate range test (Smith 2017), on a copy of the model."""

import math

import keras
import numpy as np

__all__ = ["find_lr", "LRFinderResult", "suggest_learning_rate"]


class LRFinderResult:
    """The range test's curve and its suggestion.

    Attributes:
        learning_rates, losses: per step (the raw batch losses).
        smoothed: the losses under a centered running median (see
            `suggest_learning_rate`): the curve the suggestion is read from.
        suggestion: `suggest_learning_rate(learning_rates, losses)`.
        diverged: whether the test stopped early on a blown-up loss.
    """

    def __init__(self, learning_rates, losses, smoothed, suggestion, diverged):
        self.learning_rates, self.losses, self.smoothed = learning_rates, losses, smoothed
        self.suggestion, self.diverged = suggestion, diverged

    def __repr__(self):
        return (f"LRFinderResult(suggestion={self.suggestion:.3g}, steps={len(self.losses)}, "
                f"diverged={self.diverged})")

    def plot(self, path):
        """Writes the loss-vs-learning-rate curve to `path` (PNG; needs matplotlib)."""
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError as error:
            raise ImportError(
                "LRFinderResult.plot needs matplotlib: pip install 'keras-boost[plot]'."
            ) from error
        fig, ax = plt.subplots(figsize=(6, 4))
        ax.plot(self.learning_rates, self.losses, alpha=0.3, label="batch loss")
        ax.plot(self.learning_rates, self.smoothed, label="running median")
        ax.axvline(self.suggestion, color="k", linestyle="--", label=f"suggestion {self.suggestion:.2g}")
        ax.set_xscale("log")
        ax.set_xlabel("learning rate")
        ax.set_ylabel("loss")
        ax.legend()
        fig.tight_layout()
        fig.savefig(path)
        plt.close(fig)
        return path


def _batches(data, batch_size, seed):
    """Endless batches from `(x, y)` arrays (reshuffled per pass) or an iterable."""
    if isinstance(data, tuple) and len(data) == 2:
        x, y = data
        n = len(x)
        if n < batch_size:
            raise ValueError(f"find_lr got {n} samples, fewer than batch_size={batch_size}.")
        rng = np.random.default_rng(seed)
        while True:
            order = rng.permutation(n)
            for start in range(0, n - batch_size + 1, batch_size):
                idx = order[start:start + batch_size]
                yield x[idx], y[idx]
    while True:
        empty = True
        for batch in data:
            empty = False
            yield batch
        if empty:
            raise ValueError("find_lr got an empty data iterable.")


def find_lr(model, data, batch_size=32, start_lr=1e-7, end_lr=10.0, steps=100, optimizer=None,
            loss=None, smoothing=0.98, diverge_factor=4.0, seed=0, verbose=1):
    """Learning-rate range test: trains a copy of `model` for `steps` batches
    with the learning rate growing exponentially from `start_lr` to
    `end_lr`, and records the loss. `model` itself is not changed.

    Args:
        model: a built Keras model (functional, Sequential or subclassed);
            if compiled, its loss is used.
        data: `(x, y)` arrays, or an iterable of `(x, y)` batches (e.g. a
            `tf.data.Dataset`), cycled as needed.
        batch_size: for arrays.
        start_lr, end_lr: the range (0 < start_lr < end_lr).
        steps: number of batches (>= 5).
        optimizer: a fresh Keras optimizer to test (default SGD with momentum
            0.9); its learning rate is overwritten each step.
        loss: the loss, when `model` is not compiled.
        smoothing: exponential smoothing of the loss that the divergence
            test watches, in [0, 1).
        diverge_factor: stops once that smoothed loss exceeds this multiple
            of its minimum (or is not finite).
        seed: shuffling seed.
        verbose: 1 shows a progress bar.

    Returns:
        An `LRFinderResult` (`.suggestion`, see `suggest_learning_rate`;
        `.plot(path)`).

    Example:

    ```python
    result = boost.tune.find_lr(model, (x_train, y_train), batch_size=64)
    model.compile(optimizer=keras.optimizers.SGD(result.suggestion, momentum=0.9), loss=...)
    ```
    """
    if not 0 < start_lr < end_lr:
        raise ValueError(f"find_lr needs 0 < start_lr < end_lr, got start_lr={start_lr!r}, end_lr={end_lr!r}.")
    if not isinstance(steps, int) or steps < 5:
        raise ValueError(f"steps must be an int >= 5, got {steps!r}.")
    if not 0 <= smoothing < 1:
        raise ValueError(f"smoothing must be in [0, 1), got {smoothing!r}.")
    if not diverge_factor > 1:
        raise ValueError(f"diverge_factor must be > 1, got {diverge_factor!r}.")
    loss = loss if loss is not None else getattr(model, "loss", None)
    if loss is None:
        raise ValueError("find_lr needs a loss: compile the model first or pass loss=...")
    if not model.built:
        raise ValueError("find_lr needs a built model (call it on a batch, or give it an Input).")
    copy = keras.models.clone_model(model)
    copy.set_weights(model.get_weights())
    optimizer = optimizer if optimizer is not None else keras.optimizers.SGD(start_lr, momentum=0.9)
    copy.compile(optimizer=optimizer, loss=loss)

    growth = (end_lr / start_lr) ** (1.0 / (steps - 1))
    learning_rates, losses = [], []
    average, best, diverged = 0.0, math.inf, False
    progress = keras.utils.Progbar(steps, verbose=verbose, stateful_metrics=["lr"])
    batches = _batches(data, batch_size, seed)
    for step in range(steps):
        lr = start_lr * growth**step
        copy.optimizer.learning_rate = lr
        x, y = next(batches)
        value = float(np.asarray(copy.train_on_batch(x, y)).reshape(-1)[0])
        learning_rates.append(lr)
        losses.append(value)
        progress.update(step + 1, [("loss", value), ("lr", lr)])
        # Divergence is decided online, on a bias-corrected exponential average.
        average = smoothing * average + (1 - smoothing) * value
        smooth = average / (1 - smoothing ** (step + 1))
        best = min(best, smooth)
        if not math.isfinite(smooth) or smooth > diverge_factor * best:
            diverged = True
            break
    return LRFinderResult(learning_rates, losses, list(_running_median(losses)),
                          suggest_learning_rate(learning_rates, losses), diverged)


def _half_window(n):
    """Half the running median's window, which spans about a tenth of the steps."""
    return max(1, n // 20)


def _running_median(losses):
    """Centered running median of `losses` (windows shrink at both ends; a
    non-finite loss counts as +inf)."""
    values = np.asarray(losses, dtype=np.float64)
    values = np.where(np.isfinite(values), values, np.inf)
    half = _half_window(len(values))
    padded = np.pad(values, half, constant_values=np.nan)
    windows = np.lib.stride_tricks.sliding_window_view(padded, 2 * half + 1)
    return np.nanmedian(windows, axis=1)


def suggest_learning_rate(learning_rates, losses):
    """The learning rate where the loss falls fastest, before its minimum.

    The rule reads a centered running median of the batch losses (a window
    of about a tenth of the steps): the range test's exponential
    average would lag the loss by tens of steps, which moves its steepest
    descent towards the divergence, and, bias-corrected, it follows the
    first batches so closely that a lucky early batch can stay its minimum
    (the descent is then looked for in the first steps' noise). A median
    does neither, and keeps the blow-up at the end out of the curve before
    it. The slope is taken across one window, per unit of log(learning
    rate); the suggestion is the centre of the steepest one that ends by
    the curve's minimum. With too few steps before the minimum for one
    window, it is a tenth of the learning rate at the minimum (fastai's
    `minimum` rule).

    Args:
        learning_rates: increasing learning rates, one per step.
        losses: the batch loss at each of them.

    Returns:
        The suggested learning rate (a float).

    Example:

    ```python
    from keras_boost.tune.lr_finder import suggest_learning_rate

    result = boost.tune.find_lr(model, (x, y), verbose=0)
    suggest_learning_rate(result.learning_rates, result.losses) == result.suggestion  # True
    ```
    """
    rates = np.asarray(learning_rates, dtype=np.float64)
    if rates.ndim != 1 or len(rates) != len(losses) or not len(rates):
        raise ValueError(f"suggest_learning_rate needs one loss per learning rate, got "
                         f"{len(rates)} learning rates and {len(losses)} losses.")
    curve = _running_median(losses)
    half = _half_window(len(curve))
    end = int(np.argmin(curve))
    centers = np.arange(half, end - half + 1)
    if not len(centers):
        return float(rates[end] / 10)
    logs = np.log(rates)
    slopes = (curve[centers + half] - curve[centers - half]) / (logs[centers + half] - logs[centers - half])
    return float(rates[centers[int(np.argmin(slopes))]])
