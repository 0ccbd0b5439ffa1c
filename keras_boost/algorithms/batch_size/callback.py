"""`AdaptiveBatchSize`: grow the effective batch during training, memory flat.

The effective batch is micro-batch x k, where k is the accumulation steps of
the model's `boost.GradientAccumulation` optimizer; this callback raises k on a
schedule (Smith et al. 2018, "Don't decay the learning rate, increase the batch
size") or when the gradient noise scale says the batch is too small
(McCandlish et al. 2018), and rescales the learning rate by a rule:

- `lr_rule="linear"`: lr x (k_new / k_old) (Goyal et al. 2017, for SGD);
- `lr_rule="sqrt"`: lr x sqrt(k_new / k_old) (for adaptive optimizers such as
  Adam, whose update size does not grow with the gradient; Hoffer et al. 2017,
  Malladi et al. 2022);
- `lr_rule=None`: the learning rate is left alone.

The noise scale estimator (`simple_noise_scale`, `NoiseScale`) follows
McCandlish et al. 2018, appendix A: from squared gradient norms measured at two
batch sizes b_small < b_big,

    |G|^2 ~ (b_big |G_big|^2 - b_small |G_small|^2) / (b_big - b_small)
    S     ~ (|G_small|^2 - |G_big|^2) / (1 / b_small - 1 / b_big)
    B_simple = S / |G|^2

(both unbiased; their ratio is taken after smoothing each with an EMA).
`AdaptiveBatchSize(noise_scale=...)` feeds the estimator itself from the
accumulation windows of `boost.GradientAccumulation`: b_small is the `fit`
batch (one micro-batch), b_big the window's k micro-batches.
"""

import math
import numbers

import keras
import numpy as np
from keras import ops

from keras_boost import keras_private
from keras_boost.algorithms.accumulation import find_gradient_accumulation
from keras_boost.algorithms.optimizer_wrapper import optimizer_chain
from keras_boost.durations import parse_duration

__all__ = [
    "AdaptiveBatchSize",
    "lr_factor",
    "LR_RULES",
    "NOISE_SCALE_OPTIONS",
    "NoiseScale",
    "simple_noise_scale",
]

LR_RULES = ("linear", "sqrt", None)


def simple_noise_scale(sq_norm_small, sq_norm_big, b_small, b_big):
    """B_simple = tr(Sigma) / |G|^2 from squared gradient norms at two batch sizes.

    Args:
        sq_norm_small: |G_small|^2, the squared norm of a gradient averaged
            over `b_small` examples (a float, or an array of measurements,
            averaged first).
        sq_norm_big: |G_big|^2 for `b_big` > `b_small` examples.
        b_small, b_big: the two batch sizes.

    Returns:
        (b_simple, g2, trace): the noise scale and the unbiased estimates of
        |G|^2 and tr(Sigma). `b_simple` is `inf` when the |G|^2 estimate is
        <= 0 (noise dominates: a larger batch is warranted).

    Example:

    ```python
    simple_noise_scale(sq_norm_small=2.0, sq_norm_big=1.1, b_small=32, b_big=256)
    ```
    """
    b_small, b_big = float(b_small), float(b_big)
    if not 0 < b_small < b_big:
        raise ValueError(f"Need 0 < b_small < b_big, got b_small={b_small:g}, b_big={b_big:g}.")
    small = float(np.mean(sq_norm_small))
    big = float(np.mean(sq_norm_big))
    g2 = (b_big * big - b_small * small) / (b_big - b_small)
    trace = (small - big) / (1.0 / b_small - 1.0 / b_big)
    return (trace / g2 if g2 > 0 else math.inf), g2, trace


class NoiseScale:
    """EMA-smoothed simple noise scale (McCandlish et al. 2018, appendix A).

    Feed it squared gradient norms with `update(sq_norm_small, sq_norm_big)`
    (e.g. per-replica and all-reduced gradients, or one micro-batch and the
    accumulated window); `value` is B_simple from the smoothed |G|^2 and S.
    Each measurement may come with its own batch sizes
    (`update(..., b_small=, b_big=)`, e.g. when the accumulation steps
    change): the EMA smooths the unbiased estimates of |G|^2 and S, which do
    not depend on the sizes they were measured at. `AdaptiveBatchSize` feeds
    it this way.

    Args:
        b_small, b_big: the default batch sizes of `update` (0 < b_small < b_big).
        decay: the EMA decay in [0, 1) (0: the last measurement only).

    Example:

    ```python
    ns = NoiseScale(b_small=32, b_big=256)
    ns.update(2.0, 1.1)
    ns.update(2.1, 1.0, b_small=32, b_big=512)  # a window of 16 micro-batches
    ns.value
    ```
    """

    def __init__(self, b_small, b_big, decay=0.9):
        if not 0 <= decay < 1:
            raise ValueError(f"decay must be in [0, 1), got {decay!r}.")
        simple_noise_scale(1.0, 0.5, b_small, b_big)  # validates the sizes
        self.b_small, self.b_big, self.decay = b_small, b_big, decay
        self.g2 = self.trace = None
        self.count = 0

    def update(self, sq_norm_small, sq_norm_big, b_small=None, b_big=None):
        """Adds one measurement; returns the new `value`. `b_small` / `b_big`
        default to the constructor's."""
        b_small = self.b_small if b_small is None else b_small
        b_big = self.b_big if b_big is None else b_big
        _, g2, trace = simple_noise_scale(sq_norm_small, sq_norm_big, b_small, b_big)
        if self.count == 0:
            self.g2, self.trace = g2, trace
        else:
            self.g2 = self.decay * self.g2 + (1 - self.decay) * g2
            self.trace = self.decay * self.trace + (1 - self.decay) * trace
        self.count += 1
        return self.value

    @property
    def value(self):
        if self.count == 0:
            return None
        return self.trace / self.g2 if self.g2 > 0 else math.inf


def lr_factor(rule, k_old, k_new):
    """The learning-rate multiplier when the accumulation steps go k_old -> k_new.

    Example:

    ```python
    lr_factor("linear", 2, 8)  # 4.0
    lr_factor("sqrt", 2, 8)    # 2.0
    ```
    """
    if rule is None:
        return 1.0
    ratio = k_new / k_old
    if rule == "linear":
        return ratio
    if rule == "sqrt":
        return math.sqrt(ratio)
    raise ValueError(f"lr_rule must be one of {LR_RULES}, got {rule!r}.")


NOISE_SCALE_OPTIONS = ("None", "'auto'", "a NoiseScale")


def _check_k(value, where):
    if isinstance(value, np.integer):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{where} must be an int >= 1 (accumulation steps), got {value!r}.")
    return value


def _parse_when(when):
    """('epoch', int) or ('fraction', float) of a schedule key."""
    if isinstance(when, (int, np.integer)) and not isinstance(when, bool):
        if when < 0:
            raise ValueError(f"A schedule epoch must be >= 0, got {when!r}.")
        return "epoch", int(when)
    if isinstance(when, str) and when.strip().lower().endswith("ep"):
        text = when.strip().lower()[:-2]
        try:
            epoch = int(text)
        except ValueError:
            raise ValueError(f"Cannot parse the schedule epoch {when!r}: use e.g. '2ep' or 2.") from None
        return _parse_when(epoch)
    if isinstance(when, (numbers.Real, str)) and not isinstance(when, bool):
        return "fraction", parse_duration(when)
    raise ValueError(
        f"A schedule key must be an epoch (int, or '2ep') or a fraction of training ('0.5dur', 0.5, '50%'), "
        f"got {when!r}."
    )


class AdaptiveBatchSize(keras.callbacks.Callback):
    """Grows the effective batch by raising `GradientAccumulation`'s steps.

    The model must be compiled with a `boost.GradientAccumulation` optimizer
    (possibly wrapped); its `max_accumulation_step` k is the multiplier of the
    micro-batch given to `fit`, so the memory of a step stays that of one
    micro-batch while the batch of each update grows.

    How k changes after compile: `GradientAccumulation` compares its micro-step
    counter with the Python int `max_accumulation_step`, which the TensorFlow
    and JAX backends bake into the traced train step. A change therefore sets
    the attribute and rebuilds the step with `model.make_train_function(
    force=True)` (one retrace per change; a schedule has a few). This keeps
    `GradientAccumulation` unchanged, serializable and exactly as fast between
    changes; a k held in a variable would avoid the retrace but cost a
    variable read and a saved-state format change for every user. On JAX
    the callback reads `self.model` (which syncs the fit loop's state) only
    when it changes something, and the loop then picks up the new optimizer
    state.

    Changes apply at window boundaries only (never inside a partial window),
    so every update is still the exact mean over its own micro-batches: an
    epoch-keyed change whose epoch starts mid-window waits until the window
    closes.

    Noise-scale mode (`noise_scale="auto"` or a `NoiseScale`): the callback
    switches on the optimizer's `measure_gradient_norms` (one retrace at the
    start of `fit` if it was off; it stays on) and, at the end of every
    window, feeds the estimator with the window's two squared norms
    (`GradientAccumulation.gradient_norms()`): b_small = `micro_batch`,
    b_big = the k of *that* window times `micro_batch` (so a change of k
    changes b_big from the next window on). Under `tf.distribute` both sizes
    are divided by the replica count (the norms are replica 0's, of its
    local share of each micro-batch). Non-finite measurements are skipped.
    Then k grows (never shrinks) to `ceil(B_simple / micro_batch)`, capped
    by `max_steps`. A window of one micro-batch has no second batch size,
    so the mode never runs with k = 1: if k is 1 at a window boundary, it is
    raised to 2 (recorded in `history`, learning rate rescaled by `lr_rule`)
    and measuring starts there. On JAX reading the norms syncs the fit
    loop's state once per window (`callback.model`).

    Args:
        schedule: dict (or list of pairs) `when -> k`. `when` is an epoch
            (an int or "2ep": from the start of that 0-based epoch) or a
            fraction of the run ("0.5dur", 0.5, "50%": from that share of
            `epochs * steps` micro-batches of this `fit`). The k of the
            latest passed key applies; before the first key, k is the
            optimizer's own.
        noise_scale: None; "auto" (a `NoiseScale(micro_batch,
            2 * micro_batch)` with the default decay 0.9, then in
            `self.noise_scale`); or a `NoiseScale`, which the callback feeds
            (with each window's own batch sizes, see above). `micro_batch`
            and `max_steps` must then be given.
        max_steps: cap for k (required with `noise_scale`, then >= 2); a
            schedule value above it is an error.
        lr_rule: "linear", "sqrt" or None (see the module docstring). The
            learning rate must be a float (not a schedule) unless None.
        micro_batch: the `fit` batch size (for the noise-scale rule).
        verbose: print each change.

    `history` lists (micro-batch index, epoch, k, learning rate) per change;
    `measurements` lists (micro-batch index, window k, sq_norm_small,
    sq_norm_big, B_simple after the update) per measurement fed.

    Example:

    ```python
    opt = boost.GradientAccumulation(keras.optimizers.SGD(0.05), max_accumulation_step=1)
    model.compile(optimizer=opt, loss="mse")
    grow = boost.callbacks.AdaptiveBatchSize({"0.5dur": 2, "0.75dur": 4}, lr_rule="linear")
    model.fit(x, y, batch_size=32, epochs=8, callbacks=[grow])
    grow.history   # [(step, epoch, 2, 0.1), (step, epoch, 4, 0.2)]

    # Grow k from the measured gradient noise scale, up to 16 micro-batches:
    opt = boost.GradientAccumulation(keras.optimizers.SGD(0.05), max_accumulation_step=2)
    model.compile(optimizer=opt, loss="mse")
    grow = boost.callbacks.AdaptiveBatchSize(noise_scale="auto", max_steps=16, micro_batch=32)
    model.fit(x, y, batch_size=32, epochs=8, callbacks=[grow])
    grow.noise_scale.value   # B_simple, in examples
    grow.measurements        # [(step, k, sq_norm_small, sq_norm_big, B_simple), ...]
    ```
    """

    def __init__(self, schedule=None, noise_scale=None, max_steps=None, lr_rule="linear", micro_batch=None,
                 verbose=0):
        super().__init__()
        if lr_rule not in LR_RULES:
            raise ValueError(f"lr_rule must be one of {LR_RULES}, got {lr_rule!r}.")
        if max_steps is not None:
            max_steps = _check_k(max_steps, "max_steps")
        items = list(schedule.items()) if isinstance(schedule, dict) else list(schedule or [])
        self.schedule = []
        for entry in items:
            when, k = entry
            kind, at = _parse_when(when)
            k = _check_k(k, f"The schedule value for {when!r}")
            if max_steps is not None and k > max_steps:
                raise ValueError(f"The schedule sets k={k} at {when!r}, above max_steps={max_steps}.")
            self.schedule.append((kind, at, k))
        if micro_batch is not None:
            if isinstance(micro_batch, np.integer):
                micro_batch = int(micro_batch)
            if isinstance(micro_batch, bool) or not isinstance(micro_batch, int) or micro_batch < 1:
                raise ValueError(f"micro_batch must be an int >= 1 (the fit batch size), got {micro_batch!r}.")
        if noise_scale is not None:
            if isinstance(noise_scale, str) and noise_scale == "auto":
                pass
            elif not isinstance(noise_scale, NoiseScale):
                raise TypeError(
                    f"noise_scale must be one of {', '.join(NOISE_SCALE_OPTIONS)}, got {noise_scale!r}."
                )
            if max_steps is None or micro_batch is None:
                raise ValueError(
                    "noise_scale needs max_steps (a cap for k) and micro_batch (the fit batch size), got "
                    f"max_steps={max_steps!r}, micro_batch={micro_batch!r}."
                )
            if max_steps < 2:
                raise ValueError(
                    "noise_scale needs max_steps >= 2 (the noise scale is measured from windows of k >= 2 "
                    f"micro-batches), got max_steps={max_steps}."
                )
            if isinstance(noise_scale, str):
                noise_scale = NoiseScale(micro_batch, 2 * micro_batch)
        if not self.schedule and noise_scale is None:
            raise ValueError("AdaptiveBatchSize needs a schedule or a noise_scale.")
        self.noise_scale = noise_scale
        self.max_steps = max_steps
        self.lr_rule = lr_rule
        self.micro_batch = micro_batch
        self.verbose = verbose
        self.history = []
        self.measurements = []

    # --- helpers -------------------------------------------------------------

    def _optimizer(self, model):
        opt = find_gradient_accumulation(model.optimizer)
        if opt is None:
            raise ValueError(
                "AdaptiveBatchSize needs a model compiled with a boost.GradientAccumulation optimizer (the "
                f"effective batch grows through its accumulation steps), got {type(model.optimizer).__name__}."
            )
        return opt

    def _target(self):
        k = self._base_k
        passed = []
        for kind, at, value in self.schedule:
            if kind == "epoch":
                if self._epoch >= at:
                    passed.append((at * (self._steps_per_epoch or 1), value))
            else:
                step = int(round(at * self._total)) if self._total else None
                if step is not None and self._batches >= step:
                    passed.append((step, value))
        if passed:
            k = max(passed, key=lambda p: p[0])[1]
        if self.noise_scale is not None:
            k = max(k, 2)  # a window of one micro-batch measures nothing
            if self.noise_scale.value is not None:
                wanted = self.noise_scale.value
                want = self.max_steps if math.isinf(wanted) else math.ceil(wanted / self.micro_batch)
                k = max(k, self._opt.max_accumulation_step, min(want, self.max_steps))
        return k

    def _feed(self):
        """Feeds the estimator with the window that just closed, if measured."""
        self.model  # on JAX: syncs the fit loop's state into the variables
        norms = self._opt.gradient_norms()
        if norms is None or norms.windows == self._seen_windows:
            return
        self._seen_windows = norms.windows
        if not (math.isfinite(norms.sq_norm_small) and math.isfinite(norms.sq_norm_big)):
            return
        b_small = self.micro_batch / norms.replicas
        value = self.noise_scale.update(norms.sq_norm_small, norms.sq_norm_big, b_small, norms.steps * b_small)
        self.measurements.append((self._batches, norms.steps, norms.sq_norm_small, norms.sq_norm_big, value))

    # --- callback hooks ------------------------------------------------------

    def on_train_begin(self, logs=None):
        model = self.model
        self._opt = self._optimizer(model)
        if self.lr_rule is not None:
            inner = optimizer_chain(model.optimizer)[-1]
            schedule = keras_private.optimizer_raw_learning_rate(inner)
            if isinstance(schedule, keras.optimizers.schedules.LearningRateSchedule):
                raise ValueError(
                    f"AdaptiveBatchSize(lr_rule={self.lr_rule!r}) needs a float learning rate to rescale, but "
                    f"{inner.name!r} uses the schedule {type(schedule).__name__}: use lr_rule=None "
                    "(and scale the schedule yourself) or a float learning rate."
                )
        if not hasattr(self, "_base_k"):
            self._base_k = self._opt.max_accumulation_step
        steps = self.params.get("steps") if self.params else None
        epochs = self.params.get("epochs") if self.params else None
        self._steps_per_epoch = steps
        self._total = steps * epochs if steps and epochs else None
        if self._total is None and any(kind == "fraction" for kind, _, _ in self.schedule):
            raise ValueError(
                "A schedule keyed on fractions of training needs the run length, but fit's steps per epoch "
                f"is unknown (params={self.params}); pass steps_per_epoch or key the schedule on epochs."
            )
        self._batches = 0
        self._epoch = 0
        self._window = int(ops.convert_to_numpy(self._opt.micro_step.value)) if self._opt.built else 0
        if self.noise_scale is not None:
            norms = self._opt.gradient_norms()
            self._seen_windows = norms.windows if norms is not None else 0  # fed before, or stale
            if not self._opt.measure_gradient_norms:
                self._opt.measure_gradient_norms = True
                model.make_train_function(force=True)  # the flag is read when the step is traced

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch

    def on_train_batch_begin(self, batch, logs=None):
        if self._window != 0:
            return
        k_new = self._target()
        k_old = self._opt.max_accumulation_step
        if k_new != k_old:
            self._change(k_old, k_new)

    def on_train_batch_end(self, batch, logs=None):
        self._batches += 1
        self._window += 1
        if self._window >= self._opt.max_accumulation_step:
            self._window = 0
            if self.noise_scale is not None:
                self._feed()

    def _change(self, k_old, k_new):
        model = self.model  # on JAX: syncs the fit loop's state into the variables
        opt = self._opt
        opt.max_accumulation_step = k_new
        lr = None
        if self.lr_rule is not None:
            lr = float(ops.convert_to_numpy(model.optimizer.learning_rate)) * lr_factor(self.lr_rule, k_old, k_new)
            model.optimizer.learning_rate = lr
        # k is a Python int in the traced step (TF, JAX): retrace.
        model.make_train_function(force=True)
        self.history.append((self._batches, self._epoch, k_new, lr))
        if self.verbose:
            noise = self.noise_scale.value if self.noise_scale is not None else None
            print(f"AdaptiveBatchSize: micro-batch {self._batches} (epoch {self._epoch}): accumulation steps "
                  f"{k_old} -> {k_new}" + ("" if lr is None else f", learning rate {lr:.6g}")
                  + ("" if noise is None else f", noise scale {noise:.4g}"))
