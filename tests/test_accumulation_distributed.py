"""GradientAccumulation under tf.distribute.MirroredStrategy (TensorFlow only).

The scenario runs in a subprocess (``tests/distributed/accumulation_mirrored.py``)
because the 4 logical CPUs must be configured before any TF op runs. It
asserts: training with k=4 micro-batches of global size 8 on 4 replicas equals
one device with batches of 32 (windows straddling an epoch, and a flushed
partial window with divisor 2); replicas stay identical; and the gradient
all-reduce runs once per k micro-steps (counted at run time on every replica),
against once per step for stock Keras. Keras' own
`gradient_accumulation_steps` cannot run here at all (keras#20582).
"""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest

if keras.backend.backend() != "tensorflow":
    pytest.skip("tf.distribute tests need the tensorflow backend", allow_module_level=True)

pytestmark = pytest.mark.slow

SCRIPT = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "distributed", "accumulation_mirrored.py"
)
N_REPLICAS = 4


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("accumulation_mirrored")
    env = dict(os.environ)
    env.pop("TF_CONFIG", None)
    env.update(KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="",
               PYTHONWARNINGS="ignore")
    proc = subprocess.run(
        [sys.executable, SCRIPT, str(out)], env=env, capture_output=True, timeout=300
    )
    assert proc.returncode == 0, (
        f"accumulation_mirrored.py exited with {proc.returncode}\n--- stdout ---\n"
        f"{proc.stdout.decode(errors='replace')[-4000:]}\n--- stderr ---\n"
        f"{proc.stderr.decode(errors='replace')[-6000:]}"
    )
    with open(out / "report.json") as f:
        report = json.load(f)
    return report, dict(np.load(out / "weights.npz"))


def _assert_weights(weights, tag, reference):
    n = len([k for k in weights if k.startswith(f"{tag}_")])
    assert n == 4  # 2 Dense kernels + biases
    for i in range(n):
        np.testing.assert_allclose(
            weights[f"{tag}_{i}"], weights[f"{reference}_{i}"], rtol=1e-5, atol=1e-7
        )


def test_mirrored_equals_single_device_big_batch(run):
    report, weights = run
    assert report["keras_micro_steps"] == 12
    assert report["keras_iterations_after_2_epochs"] == 3
    assert report["keras_micro_step_after_2_epochs"] == 0
    _assert_weights(weights, "keras3", "reference3")
    assert report["keras_in_sync_after_2_epochs"]
    # The reference moved between 3 and 4 updates, so the check has teeth.
    assert not np.allclose(weights["reference3_0"], weights["reference4_0"])


def test_mirrored_flush_applies_partial_window_with_its_divisor(run):
    report, weights = run
    assert report["reference_iterations"] == report["keras_iterations_after_flush"] == 4
    assert report["keras_micro_step_after_flush"] == 0
    assert report["keras_accumulators_zero"]
    assert report["keras_in_sync_after_flush"]
    _assert_weights(weights, "keras4", "reference4")


def test_one_gradient_all_reduce_per_k_micro_steps(run):
    report, _ = run
    # 12 micro-steps, k=4: 3 all-reduces on every replica, and nothing else
    # issued a collective from replica context.
    assert report["keras_counts_after_2_epochs"] == {
        "gradient_all_reduce": [3] * N_REPLICAS,
        "replica_ctx_all_reduce": [3] * N_REPLICAS,
    }
    # + 2 micro-steps and a flush: one more.
    assert report["keras_counts_after_flush"]["gradient_all_reduce"] == [4] * N_REPLICAS
    # Control: stock Keras all-reduces on every step.
    assert report["stock_micro_steps"] == 12
    assert report["stock_counts"] == {
        "gradient_all_reduce": [12] * N_REPLICAS,
        "replica_ctx_all_reduce": [12] * N_REPLICAS,
    }


def test_boost_model_loss_scaling_composes(run):
    """BoostModel's cross-replica cond (loss scaling) nests the wrapper's."""
    report, weights = run
    assert report["boost_iterations"] == 3 and report["boost_micro_step"] == 0
    assert report["boost_overflow"] == [0.0, 0.0]
    # 3 gradient all-reduces; plus the all-replica finite flag of each of
    # the 12 micro-steps.
    assert report["boost_counts"] == {
        "gradient_all_reduce": [3] * N_REPLICAS,
        "replica_ctx_all_reduce": [15] * N_REPLICAS,
    }
    assert report["boost_in_sync"]
    _assert_weights(weights, "boost3", "reference3")


def test_mirrored_save_load_mid_window_resumes_exactly(run):
    """The replicas' different partial sums survive the save (as their sum)."""
    report, weights = run
    assert report["save_micro_step"] == report["restored_micro_step"] == 2
    assert report["save_replicas_differ"]
    assert report["restored_iterations"] == 3
    _assert_weights(weights, "restored3", "reference3")


def test_mirrored_gradient_norms_are_per_replica_without_collectives(run):
    """measure_gradient_norms=True: every replica measures its own local
    micro-batches; nothing is communicated for it; training is unchanged."""
    report, weights = run
    assert report["measure_counts"] == {
        "gradient_all_reduce": [3] * N_REPLICAS,
        "replica_ctx_all_reduce": [3] * N_REPLICAS,
    }
    _assert_weights(weights, "measure3", "reference3")
    copies, expected = report["measure_replica_norms"], report["measure_expected"]
    assert copies["steps"] == [4] * N_REPLICAS and copies["windows"] == [3] * N_REPLICAS
    # Keras divides each replica's loss by the replica count: copies hold the
    # norms / replicas**2; gradient_norms() returns replica 0's, scaled back.
    for name in ("small", "big"):
        np.testing.assert_allclose(np.array(copies[name]) * N_REPLICAS**2, expected[name], rtol=1e-4)
    assert len(set(copies["small"])) == N_REPLICAS  # the replicas' rows differ
    norms = report["measure_norms"]
    assert (norms["steps"], norms["windows"], norms["replicas"]) == (4, 3, N_REPLICAS)
    np.testing.assert_allclose([norms["sq_norm_small"], norms["sq_norm_big"]],
                               [expected["small"][0], expected["big"][0]], rtol=1e-4)
