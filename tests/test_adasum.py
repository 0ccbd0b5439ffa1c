"""`boost.AdaSum` on one replica (all backends), its layout checks, O2's wiring.

The multi-replica math is tested under MirroredStrategy in
`tests/test_distribute_tf.py` (subprocesses with logical CPUs).
"""

import warnings

import keras
import numpy as np
import pytest

import keras_boost as boost
from conftest import dense_graph
from conftest import regression_data
from conftest import to_numpy
from keras_boost.algorithms.adasum import adasum_status
from keras_boost.algorithms.adasum import replica_plan

O2_NO_SURGERY = {"boost": {"mode": "manual", "less_bn": False, "grad_freeze": False, "adasum": True}}


def fit(model, epochs=2):
    x, y = regression_data()
    return model.fit(x, y, batch_size=8, epochs=epochs, shuffle=False, verbose=0)


def test_one_replica_is_the_identity_and_says_so_once():
    plain = keras.Model(*dense_graph())
    plain.compile(optimizer=keras.optimizers.SGD(0.05, momentum=0.9), loss="mse")
    model = keras.Model(*dense_graph())
    opt = boost.AdaSum(keras.optimizers.SGD(0.05, momentum=0.9))
    model.compile(optimizer=opt, loss="mse")
    with pytest.warns(boost.NoEffectWarning, match="single replica") as record:
        fit(model)
    assert len([w for w in record if issubclass(w.category, boost.NoEffectWarning)]) == 1
    fit(plain)
    for a, b in zip(to_numpy(plain.weights), to_numpy(model.weights)):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    assert int(opt.skipped_steps.numpy()) == 0


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"reduce_on": "weights"}, ValueError, r"reduce_on must be one of \['grad', 'delta'\].*'weights'"),
        ({"hierarchical": "yes"}, TypeError, "hierarchical must be True or False"),
        ({"exchange": "ring"}, ValueError, r"exchange must be one of \['auto', 'gather'\], got 'ring'"),
        ({"norm_bound": "yes"}, TypeError, "norm_bound must be True or False, got 'yes'"),
        ({"device_number": 0}, ValueError, "device_number must be >= 1"),
        ({"device_number": "eight"}, TypeError, "device_number must be 'auto' or an int"),
        ({"gradient_split_groups": [4, 2]}, ValueError, "strictly increasing"),
        ({"learning_rate": 0.1}, ValueError, "does not accept the optimizer arguments"),
    ],
)
def test_bad_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        boost.AdaSum(keras.optimizers.SGD(), **kwargs)


def test_not_an_optimizer():
    with pytest.raises(TypeError, match="optimizer"):
        boost.AdaSum("sgd-ish")


def test_split_index_beyond_the_variables_fails_at_build():
    model = keras.Model(*dense_graph())
    n = len(model.trainable_variables)
    opt = boost.AdaSum(keras.optimizers.SGD(), gradient_split_groups=[n])
    with pytest.raises(ValueError, match=f"every split index must be below {n}"):
        opt.build(model.trainable_variables)


def test_replica_plan():
    assert replica_plan(8, 8) == (1, 8)
    assert replica_plan(8, 4, hierarchical=True) == (4, 2)  # 2 workers of 4
    assert replica_plan(8, 8, hierarchical=True, device_number=2) == (2, 4)
    assert replica_plan(6, 6, device_number="auto") == (1, 6)
    with pytest.raises(ValueError, match="device_number=3 does not fit the strategy's 8 replica"):
        replica_plan(8, 8, device_number=3)
    with pytest.raises(ValueError, match="device_number=16"):
        replica_plan(8, 8, device_number=16)


def test_adasum_status_reasons():
    assert adasum_status(4, 4) and "over 4 replicas" in adasum_status(4, 4).reason
    assert "2 node means of 2" in adasum_status(4, 4, True, 2).reason
    assert not adasum_status(1, 1) and "identity" in adasum_status(1, 1).reason
    assert not adasum_status(4, 4, True) and "one node" in adasum_status(4, 4, True).reason
    assert not adasum_status(8, 8, False, 3) and "does not fit" in adasum_status(8, 8, False, 3).reason


def test_get_config_round_trip_and_save_load(tmp_path):
    opt = boost.AdaSum(
        keras.optimizers.Adam(1e-3), reduce_on="delta", hierarchical=True, device_number=2,
        gradient_split_groups=[2], exchange="gather", norm_bound=False,
    )
    clone = boost.AdaSum.from_config(opt.get_config())
    assert (clone.reduce_on, clone.hierarchical, clone.device_number, clone.gradient_split_groups,
            clone.exchange, clone.norm_bound) == ("delta", True, 2, [2], "gather", False)
    model = keras.Model(*dense_graph())
    model.compile(optimizer=boost.AdaSum(keras.optimizers.Adam(1e-2)), loss="mse")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", boost.NoEffectWarning)
        fit(model, epochs=1)
    model.save(tmp_path / "m.keras")
    restored = keras.saving.load_model(tmp_path / "m.keras")
    assert isinstance(restored.optimizer, boost.AdaSum)
    for a, b in zip(to_numpy(model.optimizer.variables), to_numpy(restored.optimizer.variables)):
        np.testing.assert_array_equal(a, b)


def test_o2_chain_order():
    opt = boost.wrap(keras.optimizers.SGD(), "O2", {"boost": {"mode": "manual", "less_bn": False,
                                                             "grad_freeze": True, "adasum": True,
                                                             "grad_accumulation": True},
                                                   "grad_accumulation": {"grad_accumulation_step": 2},
                                                   "adasum": {"reduce_on": "delta", "exchange": "gather"}})
    chain = [type(o).__name__ for o in boost.optimizers.optimizer_chain(opt)]
    assert chain == ["BoostOptimizer", "GradientAccumulation", "AdaSum", "FreezeOptimizer", "SGD"]
    adasum = boost.optimizers.find_in_chain(opt, boost.AdaSum)
    assert adasum.reduce_on == "delta" and adasum.device_number is None and adasum.exchange == "gather"
    assert adasum.norm_bound  # the default: the step never longer than the longest replica's
    unbounded = boost.wrap(keras.optimizers.SGD(), "O2", {**O2_NO_SURGERY, "adasum": {"norm_bound": False}})
    assert not boost.optimizers.find_in_chain(unbounded, boost.AdaSum).norm_bound
    with pytest.raises(ValueError, match="already contains a AdaSum"):
        boost.wrap(boost.AdaSum(keras.optimizers.SGD()), "O2", O2_NO_SURGERY)


def test_o2_boost_model_trains_on_one_replica_and_reports_why_adasum_is_idle():
    model = boost.BoostModel(*dense_graph(batch_norm=False), boost_level="O2",
                             boost_config_dict=O2_NO_SURGERY)
    model.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse")
    status = model.check_adasum_enable()
    assert not status and "one replica" in status.reason
    with pytest.warns(boost.NoEffectWarning, match="single replica"):
        history = fit(model, epochs=3)
    assert history.history["loss"][-1] < history.history["loss"][0]
    o1 = boost.BoostModel(*dense_graph(batch_norm=False), boost_level="O1")
    assert not o1.check_adasum_enable() and "off" in o1.check_adasum_enable().reason


def test_bytes_sent_per_replica_cost_models():
    from keras_boost.algorithms.adasum import bytes_sent_per_replica

    values = 100_000
    for n in (2, 4, 8):
        ring = bytes_sent_per_replica(values, n, "ring_all_reduce")
        assert ring == 2 * (n - 1) * values * 4 // n
        assert bytes_sent_per_replica(values, n, "all_gather") == n // 2 * ring
        halving = bytes_sent_per_replica(values, n, "halving_doubling", num_tensors=10)
        assert ring < halving < 1.01 * ring  # the ring's bytes plus the dot products
    with pytest.raises(ValueError, match="power-of-two"):
        bytes_sent_per_replica(values, 3, "halving_doubling")
    with pytest.raises(ValueError, match="Unknown pattern 'tree'"):
        bytes_sent_per_replica(values, 4, "tree")


def test_step_size_benchmark_modes():
    from benchmarks.adasum_lr import boost_config

    assert boost_config("plain") == (None, None)
    assert boost_config("O2+norm_bound=false") == ("O2", {"adasum": {"norm_bound": False}})
    assert boost_config("O2-nolessbn+reduce_on=delta") == (
        "O2", {"boost": {"mode": "manual", "less_bn": False}, "adasum": {"reduce_on": "delta"}})
    with pytest.raises(ValueError, match="unknown mode 'O3'"):
        boost_config("O3")
