"""Prefix caching as a level's algorithm (issue 30): `BoostModel.fit` at O1
on arrays computes the frozen prefix once and trains exactly as the
uncached step does; where it cannot act, fit runs uncached and the summary
says why."""

import warnings

import keras
import numpy as np
import pytest

import keras_boost as boost
from conftest import to_numpy
from test_prefix_cache import nested_frozen
from test_prefix_cache import nested_partly_unfrozen

NO_FREEZING = {"grad_freeze": {"depths": [0]}}  # both sides train every variable at every step
UNCACHED = {"boost": {"mode": "manual", "prefix_cache": False}, **NO_FREEZING}
LOSS = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def data(n=48, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, 8, 8, 3)).astype("float32"), rng.integers(0, 5, size=n).astype("int32")


def boosted(make=nested_partly_unfrozen, config=NO_FREEZING, **kwargs):
    keras.utils.set_random_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # LessBN finds nothing to remove in these small models
        model = boost.BoostModel.from_model(make(), boost_level="O1", boost_config_dict=config, **kwargs)
    model.compile(optimizer=keras.optimizers.SGD(0.05, momentum=0.9), loss=LOSS, metrics=["accuracy"])
    return model


def test_o1_caches_the_frozen_prefix_and_trains_as_the_uncached_step():
    x, y = data()
    x_val, y_val = data(8, seed=1)
    runs = {}
    for name, config in (("cached", NO_FREEZING), ("uncached", UNCACHED)):
        model = boosted(config=config)
        history = model.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0, validation_data=(x_val, y_val))
        runs[name] = model, history.history
    (cached, cached_history), (uncached, uncached_history) = runs["cached"], runs["uncached"]
    assert "prefix cache: a frozen prefix of 5 operations computed once" in cached.boost_summary()
    assert "gradient freezing not run" in cached.boost_summary()
    assert "prefix cache" not in uncached.boost_summary()
    steps = [int(keras.ops.convert_to_numpy(m.optimizer.iterations)) for m in (cached, uncached)]
    assert steps == [12, 12]
    for key in ("loss", "accuracy", "val_loss", "val_accuracy"):
        np.testing.assert_allclose(cached_history[key], uncached_history[key], rtol=1e-4, atol=1e-6)
    for c, u in zip(to_numpy(cached.weights), to_numpy(uncached.weights)):
        np.testing.assert_allclose(c, u, rtol=1e-4, atol=1e-6)


def test_positional_fit_arguments_and_a_later_uncached_fit():
    x, y = data()
    model = boosted()
    model.fit(x, y, 8, 1, 0)  # batch_size, epochs, verbose given by position, as Keras allows
    assert model.history.params["steps"] == 6

    def batches():
        while True:
            for i in range(0, 48, 8):
                yield x[i:i + 8], y[i:i + 8]

    model.fit(batches(), steps_per_epoch=6, epochs=1, verbose=0, shuffle=False)
    summary = model.boost_summary()
    assert "prefix cache off (a frozen prefix of 5 operations; fit's x is a generator" in summary
    assert int(keras.ops.convert_to_numpy(model.optimizer.iterations)) == 12


def trainable_base():
    model = nested_frozen()
    model.get_layer("base").trainable = True
    return model


def padded_from_scratch():
    """ResNet50V2's input end: weightless padding before the first conv
    (cacheable, but not worth a copy of the data)."""
    inputs = keras.Input((8, 8, 3))
    h = keras.layers.ZeroPadding2D(1, name="pad")(keras.layers.Rescaling(0.5, name="scale")(inputs))
    h = keras.layers.Conv2D(4, 3, name="conv")(h)
    outputs = keras.layers.Dense(5, name="head")(keras.layers.GlobalAveragePooling2D(name="gap")(h))
    return keras.Model(inputs, outputs, name="padded")


@pytest.mark.parametrize("make", [trainable_base, padded_from_scratch])
def test_nothing_frozen_is_said_and_fit_is_unchanged(make):
    x, y = data()
    model = boosted(make=make)
    model.fit(x, y, batch_size=8, epochs=1, verbose=0)
    assert "prefix cache: nothing frozen at the inputs" in model.boost_summary()


def test_loss_scaling_keeps_the_boost_step():
    x, y = data()
    model = boosted(loss_scale="dynamic")
    history = model.fit(x, y, batch_size=8, epochs=1, verbose=0)
    assert "loss_scale" in history.history  # BoostModel's own step ran
    assert "prefix cache off (a frozen prefix of 5 operations; loss scaling runs in BoostModel's own step" in model.boost_summary()


def test_a_cache_above_the_memory_cap_is_not_built():
    x, y = data()
    model = boosted(config={**NO_FREEZING, "prefix_cache": {"max_cache_mb": 0.001}})
    model.fit(x, y, batch_size=8, epochs=1, verbose=0)
    assert "> prefix_cache.max_cache_mb=0.001" in model.boost_summary()


def test_the_summary_is_printed_after_a_cached_fit(capsys):
    x, y = data()
    model = boosted()
    model.fit(x, y, batch_size=8, epochs=1, verbose=2)
    assert "prefix cache: a frozen prefix of 5 operations computed once" in capsys.readouterr().out


def test_bad_max_cache_is_refused():
    with pytest.raises(ValueError, match="prefix_cache.max_cache_mb"):
        boost.AutoBoost("O1", {"prefix_cache": {"max_cache_mb": -1}})
