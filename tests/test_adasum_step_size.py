"""O2's AdaSum must not diverge at the learning rate tuned for the mean all-reduce.

Issue 28 (class 9). On orthogonal replica gradients AdaSum's unbounded rule
is their sum, N times the mean's step; `norm_bound` (the default) keeps every
pairwise combination no longer than its longer input. The scenario
(``tests/distributed/mirrored_adasum_lr.py``, MirroredStrategy on 2 logical
CPUs, TensorFlow) makes the replica gradients exactly orthogonal at a
learning rate the mean all-reduce trains at and twice its step diverges at.
The rule itself is tested against NumPy on all backends in
``tests/test_adasum_ops.py``.
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

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "distributed", "mirrored_adasum_lr.py")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    out = tmp_path_factory.mktemp("adasum_step_size")
    env = {k: v for k, v in os.environ.items() if k != "TF_CONFIG"}
    env.update(KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="", PYTHONWARNINGS="ignore")
    proc = subprocess.run([sys.executable, SCRIPT, str(out)], env=env, capture_output=True, timeout=240)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-6000:]
    return dict(np.load(out / "step_size.npz"))


def test_o2_trains_at_the_mean_all_reduce_learning_rate(runs):
    assert runs["plain_end"] < 0.5 * runs["plain_start"]  # the rate suits the mean
    assert int(runs["o2_status"]) == 1  # AdaSum acts
    assert np.isfinite(runs["o2_end"]) and runs["o2_end"] < 0.5 * runs["o2_start"]


def test_o2_step_is_the_bounded_rule(runs):
    # The orthogonal gradients' sum scaled to the norm of one: sqrt(2) times
    # the mean's step, not twice it.
    np.testing.assert_allclose(runs["o2_kernel"], runs["o2_want"], rtol=1e-4, atol=1e-5)


def test_the_unbounded_rule_diverges_there(runs):
    # What O2 did before the bound (and still does with adasum.norm_bound=False).
    assert not runs["o2_unbounded_end"] < runs["o2_unbounded_start"]
