"""`boost.distribute.auto_layout` and `plan`.

The layout logic is pure and tested on every backend. Training with
`keras.distribution.ModelParallel` is tested on JAX only: in Keras 3.15 the
torch backend has no `distribution_lib` (`keras.src.backend.__init__` sets it
to None) and TensorFlow's `distribute_value` is a stub, so only JAX shards
variables. That test runs this file as a script in a fresh process with 8 host
CPU devices (the device count is fixed when JAX starts).
"""

import json
import os
import re
import subprocess
import sys

import keras
import numpy as np
import pytest

import keras_boost as boost
from keras_boost.distribute import layout as layout_lib
from keras_boost.distribute.layout import Candidate

DEVICES = [f"cpu:{i}" for i in range(8)]
SEED = 0


# --- models (shared with the 8-device worker below) -------------------------


def transformer_block(vocab=32, seq=4, dim=16, heads=4, ffn=32, outputs=4):
    tokens = keras.Input((seq,), dtype="int32", name="tokens")
    x = keras.layers.Embedding(vocab, dim, name="embed")(tokens)
    a = keras.layers.MultiHeadAttention(heads, dim // heads, name="mha")(x, x)
    x = keras.layers.LayerNormalization(name="ln1")(keras.layers.Add(name="add1")([x, a]))
    h = keras.layers.Dense(ffn, activation="relu", name="ffn_in")(x)
    h = keras.layers.Dense(dim, name="ffn_out")(h)
    x = keras.layers.LayerNormalization(name="ln2")(keras.layers.Add(name="add2")([x, h]))
    x = keras.layers.GlobalAveragePooling1D(name="pool")(x)
    return keras.Model(tokens, keras.layers.Dense(outputs, name="head")(x), name="block")


def small_cnn(outputs=4):
    inputs = keras.Input((8, 8, 3), name="image")
    x = keras.layers.Conv2D(8, 3, padding="same", activation="relu", name="conv1")(inputs)
    x = keras.layers.Conv2D(16, 3, padding="same", activation="relu", name="conv2")(x)
    x = keras.layers.GlobalAveragePooling2D(name="gap")(x)
    return keras.Model(inputs, keras.layers.Dense(outputs, name="head")(x), name="cnn")


def data(kind, n=32):
    rng = np.random.default_rng(SEED)
    y = rng.normal(size=(n, 4)).astype("float32")
    if kind == "transformer":
        return rng.integers(0, 32, size=(n, 4)).astype("int32"), y
    return rng.normal(size=(n, 8, 8, 3)).astype("float32"), y


BUILDERS = {"transformer": transformer_block, "cnn": small_cnn}


def mesh(shape=(2, 4)):
    return boost.distribute.device_mesh(shape, ("batch", "model"), DEVICES[: int(np.prod(shape))])


def path_of(model, suffix):
    (path,) = [v.path for v in model.variables if v.path.endswith(suffix)]
    return path


# --- pure decision logic ----------------------------------------------------


def test_decide_megatron_column_row_and_skips():
    cands = [
        Candidate("a/kernel", (16, 64), 1, "column"),
        Candidate("a/bias", (64,), 0, "bias", follows="a/kernel"),
        Candidate("b/kernel", (64, 16), 0, "row"),
        Candidate("c/kernel", (16, 30), 1, "column"),
        Candidate("c/bias", (30,), 0, "bias", follows="c/kernel"),
        Candidate("tiny/kernel", (2, 4), 1, "column"),
    ]
    d = {x.path: x for x in layout_lib.decide(cands, 4, min_size=64)}
    assert d["a/kernel"].axes == (None, "model")
    assert d["a/bias"].axes == ("model",)
    assert d["b/kernel"].axes == ("model", None)
    assert d["c/kernel"].axes is None and "30" in d["c/kernel"].reason and "4" in d["c/kernel"].reason
    assert d["c/bias"].axes is None
    assert d["tiny/kernel"].axes is None and "small" in d["tiny/kernel"].reason
    assert all(x.axes is None for x in layout_lib.decide(cands, 1, min_size=0))


def test_strict_and_check_layout_name_the_variable_dimension_and_mesh_size():
    with pytest.raises(ValueError, match=r"'c/kernel'.*dimension 1 of size 30.*size 4"):
        layout_lib.decide([Candidate("c/kernel", (16, 30), 1, "column")], 4, min_size=0, strict=True)
    with pytest.raises(ValueError, match="names the mesh axis 'nope'"):
        boost.distribute.check_layout("v", (4, 4), (None, "nope"), {"model": 4})
    with pytest.raises(ValueError, match="has 1 entries"):
        boost.distribute.check_layout("v", (4, 4), ("model",), {"model": 4})
    assert boost.distribute.check_layout("v", (8, 6), ("model", None), {"model": 4}) == ("model", None)


# --- auto_layout on models (any backend) ------------------------------------


def _assert_divides(layout_map, model):
    sizes = dict(zip(layout_map.device_mesh.axis_names, layout_map.device_mesh.shape))
    for v in model.variables:
        layout = layout_map[v.path]
        if layout is not None:
            for size, axis in zip(v.shape, layout.axes):
                if axis is not None:
                    assert size % sizes[axis] == 0, (v.path, v.shape, layout.axes)
    assert layout_map.missing(model) == []
    for key in layout_map:  # exact keys: each matches one variable
        assert sum(bool(re.fullmatch(key, v.path)) for v in model.variables) == 1


@pytest.mark.parametrize("min_size", [{"min_size": 0}, {}], ids=["min_size_0", "default_min_size"])
def test_auto_layout_transformer_block(min_size):
    # The default min_size keeps small kernels replicated, but not the
    # transformer patterns: this block's kernels are tiny (256-512 elements).
    keras.utils.set_random_seed(SEED)
    model = transformer_block()
    layout_map = boost.distribute.auto_layout(model, mesh(), **min_size)
    assert isinstance(layout_map, keras.distribution.LayoutMap)
    axes = lambda suffix: layout_map[path_of(model, suffix)].axes  # noqa: E731
    assert axes("embed/embeddings") == ("model", None)
    for proj in ("query", "key", "value"):
        assert axes(f"{proj}/kernel") == (None, "model", None)  # heads axis
        assert axes(f"{proj}/bias") == ("model", None)
    assert axes("attention_output/kernel") == ("model", None, None)
    assert layout_map[path_of(model, "attention_output/bias")] is None
    assert axes("ffn_in/kernel") == (None, "model")  # Megatron column
    assert axes("ffn_in/bias") == ("model",)
    assert axes("ffn_out/kernel") == ("model", None)  # Megatron row
    assert layout_map[path_of(model, "ffn_out/bias")] is None
    assert layout_map[path_of(model, "ln1/gamma")] is None
    _assert_divides(layout_map, model)
    assert "sharded" in layout_map.report()


def test_heads_and_vocabulary_that_do_not_divide_fall_back_to_the_other_axis():
    model = transformer_block(vocab=30, heads=2)  # 30 % 4, 2 % 4: head size 8 and features 16 divide
    layout_map = boost.distribute.auto_layout(model, mesh())
    axes = lambda suffix: layout_map[path_of(model, suffix)].axes  # noqa: E731
    assert axes("embed/embeddings") == (None, "model")
    for proj in ("query", "key", "value"):
        assert axes(f"{proj}/kernel") == (None, None, "model")
    assert axes("attention_output/kernel") == (None, "model", None)
    (query,) = [d for d in layout_map.decisions if d.path == path_of(model, "query/kernel")]
    assert "dimension 1 of size 2 does not divide" in query.reason
    _assert_divides(layout_map, model)


def test_auto_layout_cnn():
    model = small_cnn()
    layout_map = boost.distribute.auto_layout(model, mesh((1, 8)), min_size=0)
    assert layout_map[path_of(model, "conv1/kernel")].axes == (None, None, None, "model")
    assert layout_map[path_of(model, "conv2/kernel")].axes == (None, None, None, "model")
    assert layout_map[path_of(model, "conv2/bias")].axes == ("model",)
    # head: 4 outputs do not divide by 8 -> replicated, and reported.
    assert layout_map[path_of(model, "head/kernel")] is None
    (head,) = [d for d in layout_map.decisions if d.path == path_of(model, "head/kernel")]
    assert "does not divide by the model-axis size 8" in head.reason
    _assert_divides(layout_map, model)


def test_min_size_keeps_small_kernels_replicated():
    model = small_cnn()
    layout_map = boost.distribute.auto_layout(model, mesh(), min_size=1000)
    assert [d.path for d in layout_map.sharded] == [path_of(model, "conv2/kernel"), path_of(model, "conv2/bias")]


def test_forced_layout_that_does_not_divide_is_an_error():
    inputs = keras.Input((16,))
    model = keras.Model(inputs, keras.layers.Dense(30, name="d30")(inputs))
    with pytest.warns(boost.NoEffectWarning, match="shards no variable.*model axis of size 4"):
        layout_map = boost.distribute.auto_layout(model, mesh(), min_size=0)
    assert len(layout_map) == 0 and "30" in layout_map.replicated[0].reason
    with pytest.raises(ValueError, match=r"'d30/kernel'.*dimension 1 of size 30.*'model' of size 4"):
        boost.distribute.auto_layout(model, mesh(), min_size=0, overrides={"d30/kernel": (None, "model")})
    with pytest.raises(ValueError, match=r"dimension 1 of size 30.*size 4"):
        boost.distribute.auto_layout(model, mesh(), min_size=0, strict=True)
    forced = boost.distribute.auto_layout(model, mesh(), min_size=0, overrides={"d30/kernel": ("model", None)})
    assert forced["d30/kernel"].axes == ("model", None)
    with pytest.raises(ValueError, match="'d31/kernel', which is not a variable"):
        boost.distribute.auto_layout(model, mesh(), overrides={"d31/kernel": ("model", None)})


def test_bad_mesh_and_model_errors():
    with pytest.raises(ValueError, match=r"mesh shape \(2, 4\) has 8 devices but 6 devices"):
        boost.distribute.device_mesh((2, 4), devices=DEVICES[:6])
    model = small_cnn()
    with pytest.raises(ValueError, match=r"axes \('data',\) but model_axis='model'"):
        boost.distribute.auto_layout(model, keras.distribution.DeviceMesh((8,), ["data"], DEVICES))
    with pytest.raises(TypeError, match="DeviceMesh"):
        boost.distribute.auto_layout(model, (2, 4))
    with pytest.raises(ValueError, match="built model"):
        boost.distribute.auto_layout(keras.Sequential([keras.layers.Dense(4)]), mesh())


# --- plan --------------------------------------------------------------------


def test_plan_picks_the_smallest_model_axis_that_fits():
    model = transformer_block()
    total = boost.distribute.plan(model, 8, min_size=0).total_bytes
    p = boost.distribute.plan(model, 8, min_size=0)  # 2 GiB budget: everything fits on one device
    assert p.mesh_shape == (8, 1) and p.axis_names == ("batch", "model") and p.per_device_bytes == total
    assert total == 4 * sum(int(np.prod(v.shape)) for v in model.variables)
    by_size = dict(p.candidates)
    assert list(by_size) == [1, 2, 4, 8] and by_size[1] > by_size[2] > by_size[4]
    p4 = boost.distribute.plan(model, DEVICES, memory_budget=by_size[4], min_size=0)
    assert p4.mesh_shape == (2, 4) and p4.per_device_bytes == by_size[4] and p4.fits
    text = str(p4)
    assert "(2, 4)" in text and "per-device parameter memory" in text
    assert p4.device_mesh().shape == (2, 4)
    none = boost.distribute.plan(model, 8, memory_budget=1, min_size=0)
    assert none.mesh_shape == (8, 1) and not none.fits and "DOES NOT FIT" in str(none)
    assert boost.distribute.plan(model, 8, model_size=2, min_size=0).mesh_shape == (4, 2)


def test_plan_errors():
    model = small_cnn()
    with pytest.raises(ValueError, match=r"model_size=3 does not divide the device count 8"):
        boost.distribute.plan(model, 8, model_size=3)
    with pytest.raises(ValueError, match="at least one device"):
        boost.distribute.plan(model, 0)
    p = boost.distribute.plan(model, 8)
    with pytest.raises(ValueError, match="has 8 devices but 6 devices"):
        p.device_mesh(DEVICES[:6])


# --- ModelParallel training on 8 host devices (JAX) -------------------------


@pytest.mark.slow  # a subprocess with 8 devices
@pytest.mark.skipif(keras.backend.backend() != "jax",
                    reason="keras.distribution.ModelParallel shards variables only on JAX in Keras 3.15 "
                           "(torch has no distribution_lib, TensorFlow's distribute_value is a stub)")
def test_model_parallel_training_matches_single_device(tmp_path):
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=8", "KERAS_BACKEND": "jax",
           "PYTHONWARNINGS": "ignore"}
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), str(tmp_path)], capture_output=True,
                          timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-4000:]
    for kind in BUILDERS:
        arrays = np.load(tmp_path / f"{kind}.npz")
        np.testing.assert_allclose(arrays["parallel"], arrays["single"], rtol=0, atol=1e-5)
        assert not np.allclose(arrays["init"], arrays["single"], atol=1e-3)
        report = json.loads((tmp_path / f"{kind}.json").read_text())
        assert report["devices"] == 8
        sharded = [r for r in report["variables"] if any(a is not None for a in r["layout"])]
        # The transformer: embedding, q/k/v kernels and biases, output, FFN pair (the small head stays replicated).
        assert len(sharded) >= (11 if kind == "transformer" else 5), report
        for r in report["variables"]:
            for size, shard, axis in zip(r["shape"], r["shard"], r["layout"]):
                assert shard == (size // 4 if axis == "model" else size), r
        assert report["sharded_optimizer_variables"] >= len(sharded)  # momentum slots follow


def _worker(out_dir):
    import jax

    assert len(jax.devices()) == 8, jax.devices()
    for kind, build in BUILDERS.items():
        x, y = data(kind)
        keras.utils.set_random_seed(SEED)
        single = build()
        init = single.get_weights()
        # The transformer block with the default min_size: its patterns are split whatever their size.
        layout_map = boost.distribute.auto_layout(
            single, boost.distribute.device_mesh((2, 4), devices=keras.distribution.list_devices()),
            **({} if kind == "transformer" else {"min_size": 0}))

        def train(model):
            model.compile(optimizer=keras.optimizers.SGD(0.05, momentum=0.9), loss="mse")
            model.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
            return np.concatenate([w.ravel() for w in model.get_weights()])

        single_w = train(single)
        keras.distribution.set_distribution(keras.distribution.ModelParallel(layout_map=layout_map))
        parallel = build()
        assert layout_map.missing(parallel) == []
        parallel.set_weights(init)
        parallel_w = train(parallel)
        variables = []
        for v in parallel.variables:
            layout = layout_map[v.path]
            variables.append({"path": v.path, "shape": list(v.shape),
                              "shard": list(v.value.addressable_shards[0].data.shape),
                              "layout": list(layout.axes) if layout is not None else [None] * len(v.shape)})
        opt_sharded = sum(1 for v in parallel.optimizer.variables
                          if len(v.shape) and v.value.addressable_shards[0].data.shape != tuple(v.shape))
        keras.distribution.set_distribution(None)
        np.savez(os.path.join(out_dir, f"{kind}.npz"), single=single_w, parallel=parallel_w,
                 init=np.concatenate([w.ravel() for w in init]))
        with open(os.path.join(out_dir, f"{kind}.json"), "w") as f:
            json.dump({"devices": len(jax.devices()), "variables": variables,
                       "sharded_optimizer_variables": opt_sharded}, f)


if __name__ == "__main__":
    _worker(sys.argv[1])
