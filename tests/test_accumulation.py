"""`boost.GradientAccumulation`: k micro-batches equal one batch of k*b.

Run on every backend (KERAS_BACKEND=tensorflow|jax|torch): TF takes the
stateful path with a `tf.cond`, torch a Python branch, JAX `stateless_apply`
with `lax.cond`. The model has no BatchNormalization and the loss is a mean
("sum_over_batch_size"), so averaging micro-batch gradients is exactly the
big-batch gradient; the tolerance (1e-5 relative) only absorbs float32
summation order. The multi-replica tests are in
`tests/test_accumulation_distributed.py`.
"""

import keras
import numpy as np
import pytest

import keras_boost as boost
from conftest import dense_graph
from conftest import regression_data
from conftest import to_numpy
from keras_boost.optimizers.accumulation import find_gradient_accumulation
from keras_boost.optimizers.boost_optimizer import build_optimizer_chain

K = 4  # micro-batches per update
B = 8  # micro-batch size
RTOL, ATOL = 1e-5, 1e-7


def sgd_schedule():
    # The schedule boundary (2 updates) is crossed: Keras' own
    # gradient_accumulation_steps would switch after 2 *micro*-steps.
    return keras.optimizers.SGD(
        keras.optimizers.schedules.PiecewiseConstantDecay([2], [0.1, 0.02]),
        momentum=0.9,
        weight_decay=1e-2,
    )


def adam_ema():
    return keras.optimizers.Adam(1e-2, use_ema=True, ema_momentum=0.5)


OPTIMIZERS = {"sgd+momentum+schedule+wd": sgd_schedule, "adam+ema": adam_ema}


def make_model(optimizer, model_cls=keras.Model, **kwargs):
    model = model_cls(*dense_graph(batch_norm=False), **kwargs)
    model.compile(optimizer=optimizer, loss="mse")  # mean over the batch
    return model


def fit(model, x, y, batch_size, epochs=1, **kwargs):
    return model.fit(
        x, y, batch_size=batch_size, epochs=epochs, shuffle=False, verbose=0, **kwargs
    )


def assert_close(actual, expected):
    assert len(actual) == len(expected)
    for a, b in zip(to_numpy(actual), to_numpy(expected)):
        np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL)


def big_batch_reference(make_opt, x, y, batch_size=K * B):
    reference = make_model(make_opt())
    fit(reference, x, y, batch_size)
    return reference


# --- exact big-batch semantics ---------------------------------------------


@pytest.mark.parametrize("make_opt", OPTIMIZERS.values(), ids=OPTIMIZERS.keys())
def test_micro_batches_equal_one_big_batch(make_opt):
    updates = 4
    x, y = regression_data(n=updates * K * B)
    reference = big_batch_reference(make_opt, x, y)

    opt = boost.GradientAccumulation(make_opt(), max_accumulation_step=K)
    model = make_model(opt)
    history = fit(model, x, y, batch_size=B)

    assert int(reference.optimizer.iterations) == updates
    assert int(opt.iterations) == updates  # real updates, not micro-steps
    assert int(opt.micro_step) == 0
    assert len(history.history["loss"]) == 1
    # Weights (with EMA: the averages, written back by finalize at the end
    # of fit) and the inner optimizer state (slots, EMA, iterations).
    assert_close(model.weights, reference.weights)
    assert_close(opt.inner_optimizer.variables, reference.optimizer.variables)
    moved = [not np.allclose(a, b) for a, b in zip(
        to_numpy(model.weights), to_numpy(make_model(make_opt()).weights))]
    assert any(moved)


def test_keras_own_accumulation_is_not_the_big_batch_control():
    """Informative: Keras 3.15's `gradient_accumulation_steps` steps the
    schedule per micro-step (peers.md, probe e1), so it misses the reference
    that GradientAccumulation matches. If Keras fixes it, drop this test."""
    x, y = regression_data(n=4 * K * B)
    reference = big_batch_reference(sgd_schedule, x, y)
    keras_opt = keras.optimizers.SGD(
        keras.optimizers.schedules.PiecewiseConstantDecay([2], [0.1, 0.02]),
        momentum=0.9, weight_decay=1e-2, gradient_accumulation_steps=K,
    )
    model = make_model(keras_opt)
    fit(model, x, y, batch_size=B)
    assert int(keras_opt.iterations) == 4
    differs = [not np.allclose(a, b, rtol=RTOL, atol=ATOL)
               for a, b in zip(to_numpy(model.weights), to_numpy(reference.weights))]
    assert any(differs)


def test_schedule_and_weight_decay_count_updates_not_micro_steps():
    x, y = regression_data(n=3 * K * B)
    opt = boost.GradientAccumulation(sgd_schedule(), K)
    model = make_model(opt)
    fit(model, x, y, batch_size=B, epochs=1)
    assert int(opt.iterations) == 3
    # PiecewiseConstantDecay([2], ...) reads the inner iterations: 0.02 after
    # two updates (with Keras' own accumulation it would after 2 micro-steps).
    assert float(opt.learning_rate) == pytest.approx(0.02)


def test_window_carries_over_epochs():
    """6 micro-batches per epoch, k=4: windows straddle the epoch boundary."""
    x, y = regression_data(n=6 * B)
    opt = boost.GradientAccumulation(sgd_schedule(), K)
    model = make_model(opt)
    fit(model, x, y, batch_size=B, epochs=2)
    assert int(opt.iterations) == 3 and int(opt.micro_step) == 0
    reference = big_batch_reference(sgd_schedule, np.concatenate([x, x]), np.concatenate([y, y]))
    assert_close(model.weights, reference.weights)


def test_partial_window_is_carried_then_flushed_with_its_own_divisor():
    """10 micro-batches, k=4: 2 updates, 2 micro-batches left in the window.

    The flush applies their mean (divisor 2, never 4), which is exactly what
    Keras does with the last, smaller batch of the big-batch run (16 rows).
    """
    x, y = regression_data(n=10 * B)
    opt = boost.GradientAccumulation(sgd_schedule(), K)
    model = make_model(opt)
    fit(model, x, y, batch_size=B)
    assert int(opt.iterations) == 2 and int(opt.micro_step) == 2
    assert any(np.any(a != 0) for a in to_numpy(opt.accumulators))

    model2 = make_model(boost.GradientAccumulation(sgd_schedule(), K))
    fit(model2, x, y, batch_size=B, callbacks=[boost.FlushGradientAccumulation()])
    opt2 = model2.optimizer
    assert int(opt2.iterations) == 3 and int(opt2.micro_step) == 0
    assert all(np.all(a == 0) for a in to_numpy(opt2.accumulators))
    reference = big_batch_reference(sgd_schedule, x, y)  # batches 32, 32, 16
    assert int(reference.optimizer.iterations) == 3
    assert_close(model2.weights, reference.weights)

    assert opt.flush() is True  # the same, by hand
    assert_close(model.weights, reference.weights)
    assert opt.flush() is False  # empty window: nothing to do


def test_k_equal_one_is_the_plain_optimizer():
    x, y = regression_data(n=4 * B)
    reference = big_batch_reference(sgd_schedule, x, y, batch_size=B)
    model = make_model(boost.GradientAccumulation(sgd_schedule(), 1))
    fit(model, x, y, batch_size=B)
    assert int(model.optimizer.iterations) == 4
    assert_close(model.weights, reference.weights)


# --- save / load in the middle of a window ----------------------------------


def test_save_load_mid_window_resumes_exactly(tmp_path):
    x, y = regression_data(n=12 * B)
    first, second = (x[: 6 * B], y[: 6 * B]), (x[6 * B :], y[6 * B :])

    uninterrupted = make_model(boost.GradientAccumulation(adam_ema(), K))
    fit(uninterrupted, x, y, batch_size=B)

    model = make_model(boost.GradientAccumulation(adam_ema(), K))
    fit(model, *first, batch_size=B)
    assert int(model.optimizer.micro_step) == 2  # mid-window
    path = tmp_path / "m.keras"
    model.save(path)
    restored = keras.saving.load_model(path)  # no custom_objects

    opt = restored.optimizer
    assert isinstance(opt, boost.GradientAccumulation)
    assert opt.max_accumulation_step == K
    assert int(opt.micro_step) == 2 and int(opt.iterations) == 1
    for a, b in zip(to_numpy(model.optimizer.variables), to_numpy(opt.variables)):
        np.testing.assert_array_equal(a, b)
    # The EMA was written into the weights at the end of the first fit
    # (finalize_variable_values), in both runs alike: compare against a run
    # interrupted the same way without saving.
    control = make_model(boost.GradientAccumulation(adam_ema(), K))
    fit(control, *first, batch_size=B)
    # Stock Keras 3.15 on JAX: finalize_variable_values aliases each weight's
    # buffer with its EMA variable, and the next fit fails ("donate the same
    # buffer twice"), also with a plain Adam(use_ema=True). Copy to unalias.
    for w in control.weights:
        w.assign(np.array(keras.ops.convert_to_numpy(w)))
    fit(control, *second, batch_size=B)
    fit(restored, *second, batch_size=B)
    assert int(opt.iterations) == 3
    assert_close(restored.weights, control.weights)
    assert_close(opt.variables, control.optimizer.variables)


def test_save_load_mid_window_resumes_exactly_without_ema(tmp_path):
    """Without EMA the interrupted run equals the uninterrupted one."""
    x, y = regression_data(n=12 * B)
    uninterrupted = make_model(boost.GradientAccumulation(sgd_schedule(), K))
    fit(uninterrupted, x, y, batch_size=B)
    reference = big_batch_reference(sgd_schedule, x, y)
    assert_close(uninterrupted.weights, reference.weights)

    model = make_model(boost.GradientAccumulation(sgd_schedule(), K))
    fit(model, x[: 6 * B], y[: 6 * B], batch_size=B)
    model.save(tmp_path / "m.keras")
    restored = keras.saving.load_model(tmp_path / "m.keras")
    fit(restored, x[6 * B :], y[6 * B :], batch_size=B)
    assert int(restored.optimizer.iterations) == 3
    assert_close(restored.weights, uninterrupted.weights)


# --- composition: wrap / AutoBoost / BoostModel ------------------------------


ACCUMULATE = {
    "boost": {"mode": "manual", "grad_accumulation": True},
    "grad_accumulation": {"grad_accumulation_step": K},
}


def test_wrap_with_grad_accumulation_config():
    x, y = regression_data(n=2 * K * B)
    opt = boost.wrap(sgd_schedule(), "O0", ACCUMULATE)
    ga = find_gradient_accumulation(opt)
    assert isinstance(ga, boost.GradientAccumulation) and ga.max_accumulation_step == K
    model = make_model(opt)
    fit(model, x, y, batch_size=B)
    assert int(opt.iterations) == 2
    assert_close(model.weights, big_batch_reference(sgd_schedule, x, y).weights)
    clone = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(opt))
    assert find_gradient_accumulation(clone).max_accumulation_step == K


def test_chain_with_every_other_chain_algorithm():
    flags = dict.fromkeys(["less_bn", "grad_freeze", "adasum", "grad_accumulation"], True)
    cfg = boost.config.resolve_config(
        "O0", {"boost": {"mode": "manual", **flags}, "grad_accumulation": {"grad_accumulation_step": 3}}
    )
    ga = find_gradient_accumulation(build_optimizer_chain(keras.optimizers.SGD(), cfg))
    assert ga is not None and ga.max_accumulation_step == 3


def test_enable_all_stops_at_dim_reduce_with_accumulation(monkeypatch):
    # enable_all switches dim_reduce on, which is exclusive and refuses
    # accumulation in this version: a clear error, not a silent drop.
    monkeypatch.setattr(boost.config, "IMPLEMENTED", frozenset(boost.config.ALGORITHMS))
    with pytest.warns(boost.config.BoostConfigWarning):
        cfg = boost.config.resolve_config("O0", {"boost": {"mode": "enable_all"}})
    with pytest.raises(ValueError, match="dim_reduce does not combine with grad_accumulation"):
        build_optimizer_chain(keras.optimizers.SGD(), cfg)


def test_step_one_in_config_is_reported_not_wrapped():
    with pytest.warns(boost.NoEffectWarning, match="grad_accumulation_step=1"):
        opt = boost.wrap(keras.optimizers.SGD(), "O0", {"boost": {"mode": "manual", "grad_accumulation": True}})
    assert find_gradient_accumulation(opt) is None


def test_network_auto_process_train_accumulates():
    model = keras.Model(*dense_graph(batch_norm=False))
    _, opt = boost.AutoBoost("O0", ACCUMULATE).network_auto_process_train(model, keras.optimizers.SGD())
    assert find_gradient_accumulation(opt).max_accumulation_step == K


@pytest.mark.parametrize("loss_scale", [None, "dynamic"])
def test_boost_model_equals_big_batch(loss_scale):
    x, y = regression_data(n=2 * K * B)
    model = make_model(
        boost.wrap(adam_ema(), "O0", ACCUMULATE), boost.BoostModel,
        boost_config_dict=ACCUMULATE, loss_scale=loss_scale,
    )
    fit(model, x, y, batch_size=B)
    assert int(model.optimizer.iterations) == 2
    reference = big_batch_reference(adam_ema, x, y)
    trainable = [w for w in model.weights if w.trainable]
    assert_close(trainable, reference.weights)


def test_overflowing_micro_step_does_not_enter_the_window():
    """BoostModel skips the apply of a non-finite micro-step; the window
    then holds the next k finite micro-batches."""
    x, y = regression_data(n=2 * K * B)
    bad = np.full((B, x.shape[1]), np.inf, dtype="float32")
    # Micro-batches: 2 clean, 1 non-finite, 6 clean.
    x_run = np.concatenate([x[: 2 * B], bad, x[2 * B :]])
    y_run = np.concatenate([y[: 2 * B], y[:B], y[2 * B :]])
    model = make_model(
        boost.GradientAccumulation(sgd_schedule(), K), boost.BoostModel,
        loss_scale=boost.DynamicLossScale(initial_scale=2.0**10),
    )
    history = model.fit(x_run, y_run, batch_size=B, epochs=1, shuffle=False, verbose=0)
    assert history.history["overflow"] == [0.0]  # the last micro-step's flag
    assert int(model.optimizer.iterations) == 2
    assert int(find_gradient_accumulation(model.optimizer).micro_step) == 0
    trainable = [w for w in model.weights if w.trainable]
    assert_close(trainable, big_batch_reference(sgd_schedule, x, y).weights)
    # The one overflow halved the scale (exact in float32: powers of two).
    assert float(keras.ops.convert_to_numpy(model._boost_scaler().dynamic_scale)) == 2.0**9


# --- stateless_apply (JAX) / apply, directly ---------------------------------


def test_direct_apply_and_stateless_apply():
    variable = keras.Variable(np.ones((2,), "float32"))
    opt = boost.GradientAccumulation(keras.optimizers.SGD(1.0), 2)
    opt.build([variable])
    if keras.backend.backend() == "jax":
        values = [v.value for v in opt.variables]
        t = [variable.value]
        t, values = opt.stateless_apply(values, [np.full((2,), 2.0, "float32")], t)
        np.testing.assert_array_equal(t[0], [1.0, 1.0])
        t, values = opt.stateless_apply(values, [np.full((2,), 4.0, "float32")], t)
        np.testing.assert_array_equal(t[0], [-2.0, -2.0])  # 1 - mean(2, 4)
        for v, value in zip(opt.variables, values):
            v.assign(value)
        variable.assign(t[0])
    else:
        opt.apply([keras.ops.full((2,), 2.0)], [variable])
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(variable), [1.0, 1.0])
        opt.apply([keras.ops.full((2,), 4.0)], [variable])
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(variable), [-2.0, -2.0])
    assert int(opt.iterations) == 1 and int(opt.micro_step) == 0
    # JAX: the eager stateful apply goes through stateless_apply too.
    opt.apply([keras.ops.full((2,), 1.0)], [variable])
    assert int(opt.micro_step) == 1
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(variable), [-2.0, -2.0])


# --- bad input ---------------------------------------------------------------


@pytest.mark.parametrize("bad", [0, -3])
def test_rejects_step_below_one(bad):
    with pytest.raises(ValueError, match=rf"max_accumulation_step must be an int >= 1.*got {bad}"):
        boost.GradientAccumulation(keras.optimizers.SGD(), bad)


@pytest.mark.parametrize("bad", [2.0, "4", None, True])
def test_rejects_non_int_step(bad):
    with pytest.raises(TypeError, match=r"max_accumulation_step must be an int >= 1.*got"):
        boost.GradientAccumulation(keras.optimizers.SGD(), bad)


def test_accepts_numpy_int():
    assert boost.GradientAccumulation(keras.optimizers.SGD(), np.int64(3)).max_accumulation_step == 3


@pytest.mark.parametrize("bad", ["adam", object(), None])
def test_rejects_non_keras_optimizer(bad):
    with pytest.raises(TypeError, match="keras.optimizers.Optimizer"):
        boost.GradientAccumulation(bad, 2)


def test_rejects_keras_own_gradient_accumulation():
    inner = keras.optimizers.SGD(gradient_accumulation_steps=2)
    with pytest.raises(ValueError, match="gradient_accumulation_steps=2"):
        boost.GradientAccumulation(inner, 4)
    with pytest.raises(ValueError, match="gradient_accumulation_steps=2"):
        boost.GradientAccumulation(boost.wrap(inner), 4)


def test_rejects_base_optimizer_kwargs():
    with pytest.raises(ValueError, match="clipnorm"):
        boost.GradientAccumulation(keras.optimizers.SGD(), 2, clipnorm=1.0)


def test_config_round_trip():
    opt = boost.GradientAccumulation(keras.optimizers.Adam(3e-4), 6, name="acc")
    config = opt.get_config()
    assert config["max_accumulation_step"] == 6 and config["name"] == "acc"
    clone = boost.GradientAccumulation.from_config(config)
    assert clone.max_accumulation_step == 6
    assert clone.inner_optimizer.get_config() == opt.inner_optimizer.get_config()
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(opt))
    assert isinstance(restored, boost.GradientAccumulation)


def test_flush_callback_needs_accumulation():
    model = make_model(keras.optimizers.SGD())
    x, y = regression_data(n=B)
    with pytest.raises(ValueError, match="FlushGradientAccumulation needs"):
        fit(model, x, y, batch_size=B, callbacks=[boost.FlushGradientAccumulation()])
