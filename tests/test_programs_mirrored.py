"""Real programs at O0 and O2 under MirroredStrategy on 2 logical CPUs.

Issue 28: a residual block written `h + x`, a masked Embedding -> BiLSTM,
a two-input two-output model with a regression head, and keras.applications
MobileNetV2, through `BoostModel.from_model` in the strategy's scope (run by
``tests/distributed/mirrored_programs.py`` in one fresh process). At O0
BoostModel must train exactly like plain Keras under the strategy; at O2
(LessBN, freezing and AdaSum over the replicas) every loss stays finite,
every trainable weight moves, AdaSum acts, and the model saves, reloads in
the scope and resumes.
"""

import os
import subprocess
import sys

import keras
import numpy as np
import pytest

if keras.backend.backend() != "tensorflow":
    pytest.skip("tf.distribute tests need the tensorflow backend", allow_module_level=True)

pytestmark = pytest.mark.slow

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "distributed", "mirrored_programs.py")
NAMES = ["residual_operator", "masked_bilstm", "multi_io", "app_mobilenet_v2"]
LESS_BN_TARGETS = {"multi_io", "app_mobilenet_v2"}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    out = tmp_path_factory.mktemp("mirrored_programs")
    env = {k: v for k, v in os.environ.items() if k != "TF_CONFIG"}
    env.update(KERAS_BACKEND="tensorflow", CUDA_VISIBLE_DEVICES="", PYTHONWARNINGS="ignore")
    proc = subprocess.run([sys.executable, SCRIPT, str(out), *NAMES], env=env, capture_output=True,
                          timeout=1800)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-6000:]
    return {name: dict(np.load(out / f"{name}.npz")) for name in NAMES}


def weights(result, label, kind="weight"):
    prefix = f"{label}_{kind}_"
    return [result[f"{prefix}{i}"] for i in range(sum(k.startswith(prefix) for k in result))]


@pytest.mark.parametrize("name", NAMES)
def test_o0_trains_like_plain_keras_under_the_strategy(results, name):
    result = results[name]
    losses = [k[len("plain_"):] for k in result if k.startswith("plain_") and "loss" in k]
    assert losses
    for key in losses:
        np.testing.assert_allclose(result[f"o0_{key}"], result[f"plain_{key}"], rtol=1e-5, atol=1e-6)
    for got, expected in zip(weights(result, "o0"), weights(result, "plain"), strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", NAMES)
def test_o2_trains_every_weight_with_adasum_and_resumes(results, name):
    result = results[name]
    assert bool(result["o2_adasum"])
    for key in (k for k in result if k.startswith("o2_") and "loss" in k):
        assert np.all(np.isfinite(result[key])), key
    after, before = weights(result, "o2"), weights(result, "o2", "before")
    assert all(np.isfinite(w).all() for w in after)
    assert not [i for i, (a, b) in enumerate(zip(before, after)) if np.array_equal(a, b)]
    if name in LESS_BN_TARGETS:
        assert result["bns_after"] < result["bns_before"]
    np.testing.assert_allclose(result["loaded_predictions"], result["saved_predictions"], rtol=1e-6, atol=1e-6)
    assert np.all(np.isfinite(result["resumed_loss"]))
    assert result["iterations_resumed"] > result["iterations_saved"]
