"""A model that trains nothing, and one whose trainable set changes between
compiles (transfer learning): BoostModel and `boost.wrap` train exactly the
variables plain Keras trains, at O0 and O1."""

import warnings

import keras
import numpy as np
import pytest

import keras_boost as boost
from conftest import regression_data
from conftest import to_numpy

# O1's freezing on its own (LessBN's head swap is the surgery's business).
O1 = {"boost": {"mode": "manual", "less_bn": False, "fused_batch_norm": False},
      "grad_freeze": {"total_steps": "auto", "seed": 0}}
LEVELS = [("O0", None), ("O1", O1)]


def base_model():
    init = keras.initializers.GlorotUniform(seed=0)
    inputs = keras.Input((5,))
    h = inputs
    for i in range(3):
        h = keras.layers.Dense(8, activation="tanh", kernel_initializer=init, name=f"base{i}")(h)
    h = keras.layers.Dense(8, activation="tanh", kernel_initializer=init, name="top")(h)
    return keras.Model(inputs, keras.layers.Dense(3, kernel_initializer=init, name="head")(h))


def compile_and_fit(model, how, level, config):
    optimizer = keras.optimizers.SGD(0.05, momentum=0.9)
    if how == "wrap":
        optimizer = boost.wrap(optimizer, level, config)
    model.compile(optimizer=optimizer, loss="mse")
    x, y = regression_data(n=32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # plain Keras warns about the empty set too
        model.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)


def moved_paths(model, before):
    return sorted(v.path for v, old in zip(model.weights, before)
                  if v.trainable and not np.array_equal(old, keras.ops.convert_to_numpy(v)))


@pytest.mark.parametrize("level, config", LEVELS, ids=["O0", "O1"])
@pytest.mark.parametrize("how", ["from_model", "wrap"])
def test_a_model_that_trains_nothing_runs_like_keras(how, level, config):
    model = base_model()
    model.trainable = False
    boosted = boost.BoostModel.from_model(model, level, config) if how == "from_model" else model
    before = to_numpy(boosted.weights)
    compile_and_fit(boosted, how, level, config)
    for a, b in zip(before, to_numpy(boosted.weights)):
        np.testing.assert_array_equal(a, b)
    if how == "from_model" and level == "O1":
        # Freezing has nothing to freeze: said once, at the end of fit.
        assert "no freezing (the model trains no variable)" in boosted.boost_summary()


@pytest.mark.parametrize("level, config", LEVELS, ids=["O0", "O1"])
@pytest.mark.parametrize("how", ["from_model", "wrap"])
def test_transfer_learning_trains_what_keras_trains_in_each_phase(how, level, config):
    reference, model = base_model(), base_model()
    boosted = boost.BoostModel.from_model(model, level, config) if how == "from_model" else model
    phases = [
        # Phase 1: the base is frozen, the top and head learn.
        lambda m: [setattr(m.get_layer(f"base{i}"), "trainable", False) for i in range(3)],
        # Phase 2: the top block of the base is unfrozen and the model recompiled.
        lambda m: setattr(m.get_layer("base2"), "trainable", True),
    ]
    for phase in phases:
        phase(reference)
        phase(model)
        expected_before, before = to_numpy(reference.weights), to_numpy(boosted.weights)
        compile_and_fit(reference, "plain", None, None)
        compile_and_fit(boosted, how, level, config)
        assert moved_paths(boosted, before) == moved_paths(reference, expected_before)
        if level == "O0":  # the same updates as Keras
            for a, b in zip(to_numpy(reference.weights), to_numpy(boosted.weights)):
                np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    if how == "from_model" and level == "O1":
        # The groups were recomputed at the second compile: 3 blocks then
        # (base2, top, head), one group each (fitted to the model).
        assert boost.optimizers.find_in_chain(boosted.optimizer, boost.optimizers.FreezeOptimizer).group_count == 3
