import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# The tests check what is computed, not how fast: XLA's CPU backend (JAX,
# and TensorFlow's jit-compiled train functions) compiles the bigger graphs
# (keras.applications, MobileNets) in about half the time without its
# expensive optimization passes (DenseNet121's O1 step: 54 -> 36 s on TF,
# 43 -> 26 s on JAX). Subprocesses of the tests inherit it.
_FAST_XLA = "--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true"
if _FAST_XLA not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {_FAST_XLA}".strip()

import importlib.util  # noqa: E402

import keras  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

# TensorFlow is the `tensorflow` extra: tests of tf.data or tf.distribute on
# another backend skip where it is not installed.
requires_tensorflow = pytest.mark.skipif(
    importlib.util.find_spec("tensorflow") is None,
    reason='needs TensorFlow, not installed (pip install "keras-boost[tensorflow]")',
)


def to_numpy(values):
    return [np.array(keras.ops.convert_to_numpy(v)) for v in values]


def dense_graph(seed=0, batch_norm=True, units=8, outputs=3):
    """Inputs/outputs of a small functional net with fixed initial weights."""
    init = keras.initializers.GlorotUniform(seed=seed)
    inputs = keras.Input((5,))
    h = keras.layers.Dense(units, kernel_initializer=init, name="d1")(inputs)
    if batch_norm:
        h = keras.layers.BatchNormalization(name="bn")(h)
    h = keras.layers.Activation("relu")(h)
    out = keras.layers.Dense(outputs, kernel_initializer=init, name="d2")(h)
    return inputs, out


def regression_data(n=32, seed=0, outputs=3):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 5)).astype("float32")
    y = rng.normal(size=(n, outputs)).astype("float32")
    return x, y


class _SubclassedDenseNet(keras.Model):
    def __init__(self):
        super().__init__()
        self.dense = keras.layers.Dense(2)

    def call(self, x):
        return self.dense(x)


def subclassed_dense_net():
    """A subclassed model (no layer graph) holding one Dense(2), unbuilt."""
    return _SubclassedDenseNet()


@pytest.fixture
def restore_policy():
    policy = keras.config.dtype_policy()
    yield
    keras.config.set_dtype_policy(policy)


# pytest-xdist (`--dist loadfile`, as tox runs it) hands the test files to its
# workers in collection order. The longest files go first, so that the last
# file a worker takes is a short one: on 2 workers the suite then ends close
# to half its total time instead of one long file after the other worker is
# done. Seconds per file measured on TensorFlow, 2 workers, 2026-12-04.
LONGEST_FILES_FIRST = (
    "test_programs_applications.py",  # ~360 s (TF), ~560 s (JAX)
    "test_programs.py",               # ~400 s (TF), ~300 s (JAX)
    "test_distribute_tf.py",          # ~330 s (TF only)
    "test_programs_mirrored.py",      # ~190 s (TF only)
    "test_bench.py",                  # ~145 s (TF)
    "test_zoo_applications.py",       # ~100 s
    "test_benchmark_accelerator.py",  # ~45 s
)


def pytest_collection_modifyitems(items):
    rank = {name: i for i, name in enumerate(LONGEST_FILES_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest keep their order
