"""Gradient freezing: schedules against MindSpore's rules, groups, updates."""

import warnings

import keras
import numpy as np
import pytest

import keras_boost as boost
from conftest import regression_data
from conftest import to_numpy
from keras_boost.errors import NoEffectWarning
from keras_boost.algorithms import freezing as fs

# --- schedules (pure NumPy) ---------------------------------------------------


def test_strategy0_exact_sequence_default_config():
    seq = fs.generate_freeze_index_sequence(10, 0, 0.7, 100)
    unit = [0] * 20 + list(range(1, 10))  # zero_cnt = floor(0.7*9/0.3) = 20
    assert seq[: 2 * len(unit)] == unit * 2
    assert len(seq) >= int(100 * 1.01) and len(seq) % len(unit) == 0


@pytest.mark.parametrize("n, p, zero_cnt", [(4, 0.5, 3), (2, 0.9, 9), (5, 0.2, 1)])
def test_strategy0_zero_count(n, p, zero_cnt):
    seq = fs.generate_freeze_index_sequence(n, 0, p, 50)
    assert seq[: zero_cnt + n - 1] == [0] * zero_cnt + list(range(1, n))


def reference_interleaving(p, length):
    """0 = full step, 1 = frozen step, by MindSpore's rule (independent copy)."""
    out, zeros, frozen = [0], 1, 0
    while len(out) < length:
        if frozen / (zeros + frozen) < 1 - p:
            out.append(1)
            frozen += 1
        else:
            out.append(0)
            zeros += 1
    return out


def test_strategy1_interleaving_and_full_fraction():
    seq = fs.generate_freeze_index_sequence(10, 1, 0.7, 1000, np.random.default_rng(0))
    assert [int(d > 0) for d in seq] == reference_interleaving(0.7, int(1000 * 1.01))
    # Starts 0,k,0,0,k,0,0,k,0,0,k (in floats 3/10 < 1 - 0.7, as in MindSpore's code).
    assert [int(d > 0) for d in seq[:11]] == [0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1]
    assert np.mean(np.array(seq) == 0) == pytest.approx(0.7, abs=0.01)


def test_strategy1_depth_frequencies_follow_n_minus_k():
    n = 10
    seq = np.array(fs.generate_freeze_index_sequence(n, 1, 0.5, 60000, np.random.default_rng(1)))
    depths = seq[seq > 0]
    expected = np.array([(n - k) / (n * (n - 1) / 2) for k in range(1, n)])
    observed = np.bincount(depths, minlength=n)[1:] / len(depths)
    sigma = np.sqrt(expected * (1 - expected) / len(depths))
    assert np.all(np.abs(observed - expected) < 4 * sigma), (observed, expected)


def test_seed_determinism_and_global_rng_untouched():
    np.random.seed(123)
    before = np.random.get_state()[1].copy()
    a = boost.GradientFreeze(seed=7).generate_freeze_index_sequence(10, 1, 0.7, 500)
    b = boost.GradientFreeze(seed=7).generate_freeze_index_sequence(10, 1, 0.7, 500)
    c = boost.GradientFreeze(seed=8).generate_freeze_index_sequence(10, 1, 0.7, 500)
    assert a == b and a != c
    assert np.array_equal(np.random.get_state()[1], before)


def test_single_group_never_freezes():
    assert set(fs.generate_freeze_index_sequence(1, 1, 0.7, 100)) == {0}


@pytest.mark.parametrize(
    "args, message",
    [((10, 2, 0.7, 10), "freeze_strategy must be 0"), ((10, 1, 1.0, 10), r"freeze_p must be a number in \(0, 1\)"),
     ((0, 1, 0.5, 10), "parameter_groups_number must be an int >= 1"), ((10, 1, 0.5, 0), "total_steps must be an int >= 1")],
)
def test_schedule_bad_input(args, message):
    with pytest.raises(ValueError, match=message):
        fs.generate_freeze_index_sequence(*args)


@pytest.mark.parametrize(
    "kwargs, error, message",
    [({"param_groups": 0}, ValueError, "param_groups must be >= 1"),
     ({"freeze_p": 0.0}, ValueError, "freeze_p must be in"),
     ({"freeze_type": 3}, ValueError, r"freeze_type must be one of \[0, 1\]"),
     ({"seed": "x"}, TypeError, "seed must be an int")],
)
def test_gradient_freeze_bad_input(kwargs, error, message):
    with pytest.raises(error, match=message):
        boost.GradientFreeze(**kwargs)


# --- groups -----------------------------------------------------------------------


def deep_graph(depth=4, width=6):
    init = keras.initializers.GlorotUniform(seed=0)
    inputs = keras.Input((5,))
    h = inputs
    for i in range(depth):
        h = keras.layers.Dense(width, kernel_initializer=init, name=f"dense{i}")(h)
        if i == 1:
            h = keras.layers.BatchNormalization(name="bn1")(h)
        h = keras.layers.Activation("tanh")(h)
    return inputs, keras.layers.Dense(3, kernel_initializer=init, name="head")(h)


def test_groups_are_suffixes_by_layer_structure():
    model = keras.Model(*deep_graph())
    groups = boost.GradientFreeze().split_parameters_groups(model, 5)
    paths = [[v.path for v in g] for g in groups]
    assert paths[0] == [v.path for v in model.trainable_variables]
    assert paths[1][:4] == ["dense1/kernel", "dense1/bias", "bn1/gamma", "bn1/beta"]  # BN joins dense1's block
    assert paths[4] == ["head/kernel", "head/bias"]
    for a, b in zip(paths, paths[1:]):
        assert a[-len(b):] == b  # each group is a suffix of the previous one


def test_stride_with_more_blocks_than_groups():
    model = keras.Model(*deep_graph(depth=5))  # 6 blocks
    groups = boost.GradientFreeze().split_parameters_groups(model, 3)  # stride 2
    assert [g[0].path for g in groups] == ["dense0/kernel", "dense2/kernel", "dense4/kernel"]


def test_fewer_blocks_than_groups_warns():
    model = keras.Model(*deep_graph(depth=2))
    with pytest.warns(NoEffectWarning, match="has 3 block"):
        groups = boost.GradientFreeze().split_parameters_groups(model, 10)
    assert all(len(g) == len(model.trainable_variables) for g in groups)


SMALL_O1 = {"boost": {"mode": "manual", "less_bn": False}, "grad_freeze": {"seed": 0, "total_steps": 200}}


def freezing_warnings(caught):
    return [str(w.message) for w in caught if issubclass(w.category, NoEffectWarning)
            and "nothing is ever frozen" in str(w.message)]


@pytest.mark.parametrize("how", ["BoostModel", "wrap"])
def test_default_o1_fits_the_groups_to_a_small_model_quietly(how):
    # 3 blocks: MindSpore's param_groups=10 would make 10 copies of the whole
    # network (nothing frozen); the level's default makes one group per block.
    x, y = regression_data(n=32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if how == "BoostModel":
            model = boost.BoostModel(*deep_graph(depth=2), boost_level="O1", boost_config_dict=SMALL_O1)
            model.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse")
        else:
            model = keras.Model(*deep_graph(depth=2))
            model.compile(optimizer=boost.wrap(keras.optimizers.SGD(0.01), "O1", SMALL_O1), loss="mse")
        model.fit(x, y, batch_size=4, epochs=1, verbose=0)
    assert freezing_warnings(caught) == []
    freeze = boost.optimizers.find_in_chain(model.optimizer, boost.FreezeOptimizer)
    assert freeze.group_count == 3
    assert set(freeze.schedule_table()) == {0, 1, 2}  # MindSpore's schedule over 3 groups
    assert [len(freeze.trained_indices(d)) for d in range(3)] == [8, 6, 2]  # bn1 joins dense1


def test_an_explicit_param_groups_keeps_its_meaning_and_the_warning():
    config = {**SMALL_O1, "grad_freeze": {"param_groups": 10}}
    model = boost.BoostModel(*deep_graph(depth=2), boost_level="O1", boost_config_dict=config)
    with pytest.warns(NoEffectWarning, match="has 3 block.*param_groups=10.*leave param_groups out"):
        model.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse")
    assert boost.optimizers.find_in_chain(model.optimizer, boost.optimizers.FreezeOptimizer).group_count == 10


def test_freeze_optimizer_bad_input():
    model = keras.Model(*deep_graph())
    groups = boost.GradientFreeze().split_parameters_groups(model, 2)
    sgd = keras.optimizers.SGD()
    with pytest.raises(ValueError, match="indexes groups 0..1, got out-of-range value"):
        boost.FreezeOptimizer(sgd, groups, [0, 2])
    with pytest.raises(ValueError, match="without train_parameter_groups"):
        boost.FreezeOptimizer(sgd, None, [0, 1])
    with pytest.raises(TypeError, match="non-empty list of lists"):
        boost.FreezeOptimizer(sgd, "groups", [0])
    with pytest.raises(TypeError, match="neither a keras.Variable, a variable path nor an index"):
        boost.FreezeOptimizer(sgd, [[1.5, 2]], [0])
    with pytest.raises(TypeError, match="keras.optimizers.Optimizer"):
        boost.FreezeOptimizer("sgd", groups, [0])
    assert boost.FreezeOpt is boost.FreezeOptimizer


# --- updates ---------------------------------------------------------------------


def moved(before, after):
    return [not np.array_equal(a, b) for a, b in zip(before, after)]


@pytest.mark.parametrize("model_cls", [keras.Model, boost.BoostModel])
def test_schedule_is_followed_and_frozen_state_is_bit_identical(model_cls):
    model = model_cls(*deep_graph())
    groups = boost.GradientFreeze().split_parameters_groups(model, 5)
    schedule = [3, 0, 1, 4]
    sgd = keras.optimizers.SGD(0.1, momentum=0.9, weight_decay=0.01)
    model.compile(optimizer=boost.FreezeOptimizer(sgd, groups, schedule), loss="mse")
    x, y = regression_data(n=8)
    model.train_on_batch(x, y)  # depth 3; then full step 0 gives every slot a value
    model.train_on_batch(x, y)
    trained_paths = {t: {v.path for v in groups[t]} for t in range(5)}
    for depth in schedule[2:]:
        weights, slots = to_numpy(model.trainable_variables), to_numpy(sgd.variables[2:])
        logs = model.train_on_batch(x, y, return_dict=True)
        if model_cls is boost.BoostModel:
            assert logs["freeze_depth"] == depth
        expect = [v.path in trained_paths[depth] for v in model.trainable_variables]
        assert moved(weights, to_numpy(model.trainable_variables)) == expect
        assert moved(slots, to_numpy(sgd.variables[2:])) == expect  # momentum slots
    assert int(sgd.iterations) == 4  # the LR schedule sees every step


def test_boost_model_with_a_plain_optimizer_follows_the_freeze_schedule():
    config = {"boost": {"mode": "manual", "less_bn": False},
              "grad_freeze": {"param_groups": 5, "total_steps": 40, "freeze_type": 1, "seed": 3}}
    model = boost.BoostModel(*deep_graph(), boost_level="O1", boost_config_dict=config)
    model.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse")
    freeze = boost.optimizers.find_in_chain(model.optimizer, boost.FreezeOptimizer)
    assert freeze is not None and freeze.model_driven
    x, y = regression_data(n=8)
    depths = [model.train_on_batch(x, y, return_dict=True)["freeze_depth"] for _ in range(12)]
    # The reference: MindSpore's rule with the same seed, computed on its own.
    expected = fs.generate_freeze_index_sequence(
        5, 1, 0.7, 40, np.random.default_rng(3))[:12]
    assert depths == expected
    assert any(d > 0 for d in depths)


def test_o1_config_trains_with_auto_total_steps_and_resumes(tmp_path):
    config = {"boost": {"mode": "manual", "less_bn": False},
              "grad_freeze": {"param_groups": 5, "total_steps": "auto", "freeze_p": 0.5}}

    def make():
        model = boost.BoostModel(*deep_graph(), boost_level="O1", boost_config_dict=config)
        model.compile(optimizer=boost.wrap(keras.optimizers.Adam(0.01), "O1", config), loss="mse")
        return model

    x, y = regression_data(n=32)
    model = make()
    with warnings.catch_warnings():
        warnings.simplefilter("error", NoEffectWarning)
        history = model.fit(x, y, batch_size=8, epochs=3, shuffle=False, verbose=0)
    freeze = boost.optimizers.find_in_chain(model.optimizer, boost.optimizers.FreezeOptimizer)
    assert len(freeze.train_strategy) == int(12 * 1.01)  # epochs x steps from fit
    assert int(freeze.freeze_step) == 12
    assert "freeze_depth" in history.history
    assert int(model.optimizer.iterations) == 12

    # Save mid-schedule, reload, continue: identical to an uninterrupted run.
    reference = make()
    reference.set_weights(model.get_weights())
    model.save(tmp_path / "m.keras")
    restored = keras.saving.load_model(tmp_path / "m.keras")
    restored_freeze = boost.optimizers.find_in_chain(restored.optimizer, boost.optimizers.FreezeOptimizer)
    assert restored_freeze.train_strategy == freeze.train_strategy
    assert int(restored_freeze.freeze_step) == 12
    for a, b in zip(to_numpy(model.optimizer.variables), to_numpy(restored.optimizer.variables)):
        np.testing.assert_array_equal(a, b)
    model.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    restored.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    for a, b in zip(to_numpy(model.weights), to_numpy(restored.weights)):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_auto_boost_o1_freeze_chain():
    model = keras.Model(*deep_graph())
    config = {"boost": {"mode": "manual", "less_bn": False}}
    new_model, opt = boost.AutoBoost("O1", config).network_auto_process_train(model, keras.optimizers.SGD())
    assert new_model is model
    assert isinstance(opt.inner_optimizer, boost.FreezeOptimizer)


def test_freezing_with_accumulation_keeps_one_depth_per_window():
    model = boost.BoostModel(*deep_graph())
    groups = boost.GradientFreeze().split_parameters_groups(model, 5)
    sgd = keras.optimizers.SGD(0.1)
    opt = boost.GradientAccumulation(boost.FreezeOptimizer(sgd, groups, [3, 0]), 2)
    model.compile(optimizer=opt, loss="mse")
    x, y = regression_data(n=8)
    start = to_numpy(model.trainable_variables)
    depths = [model.train_on_batch(x, y, return_dict=True)["freeze_depth"] for _ in range(2)]
    assert depths == [3, 3] and int(sgd.iterations) == 1
    trained = {v.path for v in groups[3]}
    assert moved(start, to_numpy(model.trainable_variables)) == [v.path in trained for v in model.trainable_variables]
    depths = [model.train_on_batch(x, y, return_dict=True)["freeze_depth"] for _ in range(2)]
    assert depths == [0, 0] and int(sgd.iterations) == 2
