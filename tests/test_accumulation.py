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
from keras_boost.algorithms.accumulation import find_gradient_accumulation
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


def test_enable_all_is_dim_reduce_alone():
    # enable_all switches dim_reduce on, which is exclusive (as in MindSpore):
    # accumulation is switched off with a warning naming it, nothing raises.
    with pytest.warns(boost.NoEffectWarning, match="'grad_accumulation'"):
        cfg = boost.config.resolve_config("O0", {"boost": {"mode": "enable_all"}})
    chain = build_optimizer_chain(keras.optimizers.SGD(), cfg)
    assert isinstance(chain, boost.DimReduce) and find_gradient_accumulation(chain) is None


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
    assert float(keras.ops.convert_to_numpy(boost.optimizers.find_in_chain(model.optimizer, boost.optimizers.DynamicLossScaleOptimizer).dynamic_scale)) == 2.0**9


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


# --- gradient norms (the inputs of the gradient noise scale) -----------------


def linear_model(optimizer):
    keras.utils.set_random_seed(0)
    inputs = keras.Input((5,))
    outputs = keras.layers.Dense(3, kernel_initializer=keras.initializers.GlorotUniform(seed=0))(inputs)
    model = keras.Model(inputs, outputs)
    model.compile(optimizer=optimizer, loss="mse")
    return model


def micro_gradients(w, b, x, y):
    """NumPy gradients of Keras' mse (mean over rows and outputs) of x @ w + b."""
    r = x @ w + b - y
    return np.concatenate([(2 * x.T @ r / r.size).ravel(), 2 * r.sum(0) / r.size])


def numpy_windows(w, b, x, y, windows, lr):
    """Per window of micro-batches (lists of row slices): the two squared
    norms from the per-micro-batch gradients, then the SGD update."""
    out = []
    for window in windows:
        g = np.array([micro_gradients(w, b, x[s], y[s]) for s in window], dtype="float64")
        out.append((np.mean(np.sum(g**2, axis=1)), np.sum(g.mean(axis=0) ** 2)))
        mean = g.mean(axis=0)
        w = w - lr * mean[: w.size].reshape(w.shape)
        b = b - lr * mean[w.size :]
    return out


def rows(first, count):
    return [slice(i * B, (i + 1) * B) for i in range(first, first + count)]


def test_gradient_norms_equal_the_numpy_reference_windows_and_flush():
    """10 micro-batches, k=4: windows 1 and 2 through fit (JAX: stateless_apply
    under jit), then a flushed window of 2 (eager, divisor and b_big of 2)."""
    x, y = regression_data(n=10 * B)
    opt = boost.GradientAccumulation(keras.optimizers.SGD(0.1), K, measure_gradient_norms=True)
    model = linear_model(opt)
    w, b = (np.array(v, dtype="float64") for v in model.get_weights())
    assert opt.gradient_norms() is None  # not built
    reference = numpy_windows(w, b, x, y, [rows(0, 4), rows(4, 4), rows(8, 2)], lr=0.1)
    assert reference[0][0] > 1.5 * reference[0][1]  # the micro-batches differ

    fit(model, x[: 8 * B], y[: 8 * B], batch_size=B)
    norms = opt.gradient_norms()
    assert (norms.steps, norms.windows, norms.replicas) == (K, 2, 1)
    np.testing.assert_allclose([norms.sq_norm_small, norms.sq_norm_big], reference[1], rtol=1e-5)

    fit(model, x[8 * B :], y[8 * B :], batch_size=B)  # 2 micro-batches: no window closes
    assert opt.gradient_norms().windows == 2
    assert opt.flush()
    norms = opt.gradient_norms()
    assert (norms.steps, norms.windows) == (2, 3)
    np.testing.assert_allclose([norms.sq_norm_small, norms.sq_norm_big], reference[2], rtol=1e-5)


def test_measuring_does_not_change_training():
    x, y = regression_data(n=8 * B)
    measured = linear_model(boost.GradientAccumulation(sgd_schedule(), K, measure_gradient_norms=True))
    plain = linear_model(boost.GradientAccumulation(sgd_schedule(), K))
    fit(measured, x, y, batch_size=B)
    fit(plain, x, y, batch_size=B)
    for a, c in zip(to_numpy(measured.weights), to_numpy(plain.weights)):
        np.testing.assert_array_equal(a, c)
    assert plain.optimizer.gradient_norms() is None  # off: nothing recorded
    assert all(np.all(v == 0) for v in to_numpy(plain.optimizer._norm_variables))


def test_gradient_norms_need_two_micro_batches_and_a_fully_measured_window():
    variable = keras.Variable(np.zeros((4,), "float32"))
    opt = boost.GradientAccumulation(keras.optimizers.SGD(0.0), 2)
    opt.build([variable])

    def step(value):
        # float16 gradients: 300 ** 2 overflows float16, the norms are float32.
        opt.apply([keras.ops.full((4,), value, dtype="float16")], [variable])

    step(300.0)
    opt.measure_gradient_norms = True  # mid-window: this window records nothing
    step(100.0)
    assert opt.gradient_norms() is None
    step(300.0)
    step(100.0)
    norms = opt.gradient_norms()
    assert (norms.steps, norms.windows) == (2, 1)
    assert norms.sq_norm_small == pytest.approx(4 * (300.0**2 + 100.0**2) / 2)  # 200000
    assert norms.sq_norm_big == pytest.approx(4 * 200.0**2)  # mean gradient 200

    single = boost.GradientAccumulation(keras.optimizers.SGD(0.0), 1, measure_gradient_norms=True)
    single.build([variable])
    single.apply([keras.ops.ones((4,))], [variable])
    assert single.gradient_norms() is None  # k = 1: no second batch size


def test_loads_checkpoints_written_before_the_gradient_norm_state():
    x, y = regression_data(n=6 * B)
    model = linear_model(boost.GradientAccumulation(adam_ema(), K, measure_gradient_norms=True))
    fit(model, x, y, batch_size=B)  # mid-window: 2 micro-batches accumulated
    opt = model.optimizer
    store = {}
    opt.save_own_variables(store)
    norm_keys = {str(i) for i, v in enumerate(opt.variables) if any(v is n for n in opt._norm_variables)}
    assert len(norm_keys) == 6 and len(store) == len(opt.variables)
    # The layout before the gradient-norm state: the same entries without them.
    old = [store[k] for k in sorted(store, key=int) if k not in norm_keys]
    old_store = {str(i): value for i, value in enumerate(old)}

    restored = linear_model(boost.GradientAccumulation(adam_ema(), K, measure_gradient_norms=True))
    restored.optimizer.build(restored.trainable_variables)
    restored.optimizer.load_own_variables(old_store)
    kept = [v for v in restored.optimizer.variables if not any(v is n for n in restored.optimizer._norm_variables)]
    for a, c in zip(to_numpy(kept), old):
        np.testing.assert_array_equal(a, c)
    assert int(restored.optimizer.micro_step) == 2 and int(restored.optimizer.iterations) == 1
    assert all(np.all(v == 0) for v in to_numpy(restored.optimizer._norm_variables))

    # A store that fits neither layout is skipped with Keras' warning.
    bad = dict(old_store)
    bad["0"] = np.zeros((7,), "float32")
    fresh = linear_model(boost.GradientAccumulation(adam_ema(), K))
    fresh.optimizer.build(fresh.trainable_variables)
    with pytest.warns(UserWarning, match="Skipping variable loading"):
        fresh.optimizer.load_own_variables(bad)
    assert int(fresh.optimizer.micro_step) == 0


def test_loads_a_keras_file_written_before_the_gradient_norm_state(tmp_path):
    """A .keras file rewritten to the old layout (the six entries removed from
    `optimizer/vars`, the rest renumbered) loads with its whole state."""
    import zipfile

    import h5py

    x, y = regression_data(n=6 * B)
    model = linear_model(boost.GradientAccumulation(adam_ema(), K))
    fit(model, x, y, batch_size=B)  # mid-window
    model.save(tmp_path / "new.keras")
    opt = model.optimizer
    norm_index = [i for i, v in enumerate(opt.variables) if any(v is n for n in opt._norm_variables)]
    with zipfile.ZipFile(tmp_path / "new.keras") as src:
        src.extractall(tmp_path / "unzipped")
    with h5py.File(tmp_path / "unzipped" / "model.weights.h5", "r+") as f:
        group = f["optimizer/vars"]
        values = [np.array(group[str(i)]) for i in range(len(group))]
        for key in list(group):
            del group[key]
        old = [v for i, v in enumerate(values) if i not in norm_index]
        for i, value in enumerate(old):
            group[str(i)] = value
    with zipfile.ZipFile(tmp_path / "old.keras", "w") as dst:
        for name in ("metadata.json", "config.json", "model.weights.h5"):
            dst.write(tmp_path / "unzipped" / name, name)

    restored = keras.saving.load_model(tmp_path / "old.keras")
    ropt = restored.optimizer
    assert int(ropt.micro_step) == 2 and int(ropt.iterations) == 1
    kept = [v for v in ropt.variables if not any(v is n for n in ropt._norm_variables)]
    assert len(kept) == len(old)
    for a, c in zip(to_numpy(kept), old):
        np.testing.assert_array_equal(a, c)
    assert ropt.gradient_norms() is None


def test_save_load_keeps_the_gradient_norms_and_the_flag(tmp_path):
    x, y = regression_data(n=10 * B)
    model = linear_model(boost.GradientAccumulation(keras.optimizers.SGD(0.1), K, measure_gradient_norms=True))
    fit(model, x, y, batch_size=B)
    model.save(tmp_path / "m.keras")
    restored = keras.saving.load_model(tmp_path / "m.keras")
    opt = restored.optimizer
    assert opt.measure_gradient_norms is True and opt.get_config()["measure_gradient_norms"] is True
    assert opt.gradient_norms() == model.optimizer.gradient_norms()
    fit(restored, x[: 2 * B], y[: 2 * B], batch_size=B)  # closes the window left open
    assert opt.gradient_norms().windows == 3


@pytest.mark.parametrize("bad", [1, "yes", None])
def test_rejects_non_bool_measure_flag(bad):
    with pytest.raises(TypeError, match=rf"measure_gradient_norms must be True or False, got {bad!r}"):
        boost.GradientAccumulation(keras.optimizers.SGD(), 2, measure_gradient_norms=bad)
