"""BoostModel under keras.distribution.DataParallel (JAX backend only)."""

import os
import subprocess
import sys

import keras
import numpy as np
import pytest

if keras.backend.backend() != "jax":
    pytest.skip("keras.distribution tests run on the jax backend", allow_module_level=True)

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "distributed", "jax_data_parallel.py")


@pytest.mark.slow
def test_data_parallel_equals_single_device(tmp_path):
    # A fresh process: the host device count is fixed when jax starts.
    proc = subprocess.run([sys.executable, SCRIPT, str(tmp_path)], capture_output=True, timeout=300,
                          env={**os.environ, "PYTHONWARNINGS": "ignore"})
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-4000:]
    arrays = np.load(tmp_path / "dp.npz")
    np.testing.assert_allclose(arrays["parallel"], arrays["single"], rtol=1e-5, atol=1e-6)
    assert not np.allclose(arrays["init"], arrays["parallel"])
