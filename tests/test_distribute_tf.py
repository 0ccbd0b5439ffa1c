"""BoostModel under tf.distribute (TensorFlow backend only).

Each scenario runs in a subprocess (``tests/distributed/``): the logical
devices, or the multi-worker cluster, must be configured before any TF op
runs, which a pytest process that has imported TF cannot redo.

- MirroredStrategy on 4 logical CPUs: a non-finite gradient on ONE replica
  (not replica 0) skips the step on every replica, leaves the weights and the
  optimizer state bit-identical, halves the loss scale and logs
  `overflow = 1`. Stock Keras' LossScaleOptimizer corrupts the weights there
  (reference doc, fact 8 / probe P9). A clean distributed step equals a
  single-device step on the same global batch.
- MultiWorkerMirroredStrategy with 2 worker processes on 127.0.0.1: `fit`
  runs (it fails on stock Keras 3.15.1, keras#20585), and both workers end
  with identical weights, equal to a single-device fit.
- DimReduce on 2 and 3 replicas (logical CPUs): the step uses the global
  batch's gradient and losses (identical replica data gives the
  single-device step; split data the global-batch step; the line search
  decides on the mean loss), one basis per process; on 2 MWMS workers the
  chief computes the basis file and the other worker waits for it.
"""

import json
import os
import socket
import subprocess
import sys
import time

import keras
import numpy as np
import pytest

if keras.backend.backend() != "tensorflow":
    pytest.skip("tf.distribute tests need the tensorflow backend", allow_module_level=True)

pytestmark = pytest.mark.slow

SCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "distributed")


def _env(**extra):
    env = dict(os.environ)
    env.pop("TF_CONFIG", None)
    env.update(
        KERAS_BACKEND="tensorflow",
        TF_CPP_MIN_LOG_LEVEL="2",
        CUDA_VISIBLE_DEVICES="",
        PYTHONWARNINGS="ignore",
    )
    env.update(extra)
    return env


def _tail(text, n=6000):
    text = text.decode(errors="replace") if isinstance(text, bytes) else (text or "")
    return text[-n:]


def _run_script(name, out_dir, timeout, *args):
    proc = subprocess.run(
        [sys.executable, os.path.join(SCRIPTS, name), str(out_dir), *map(str, args)],
        env=_env(),
        capture_output=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, (
        f"{' '.join([name, *map(str, args)])} exited with {proc.returncode}\n--- stdout ---\n"
        f"{_tail(proc.stdout)}\n--- stderr ---\n{_tail(proc.stderr)}"
    )


def _free_ports(n):
    sockets = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


# --- MirroredStrategy, overflow on one replica -------------------------------


@pytest.fixture(scope="module")
def mirrored(tmp_path_factory):
    out = tmp_path_factory.mktemp("mirrored")
    _run_script("mirrored_overflow.py", out, timeout=240)
    with open(out / "report.json") as f:
        report = json.load(f)
    return report, dict(np.load(out / "clean_weights.npz"))


def test_mirrored_clean_step_matches_single_device(mirrored):
    report, weights = mirrored
    assert report["clean_overflow"] == [0.0]
    assert report["clean_moved"]
    assert report["clean_replicas_in_sync"]
    n = len([k for k in weights if k.startswith("distributed_")])
    assert n == 8  # 2 Dense kernels + biases, 4 BN (the loss scale lives in the optimizer)
    for i in range(n):
        np.testing.assert_allclose(
            weights[f"distributed_{i}"], weights[f"single_{i}"], rtol=1e-5, atol=1e-6
        )
    np.testing.assert_allclose(report["clean_loss"], report["single_loss"], rtol=1e-5)


def test_mirrored_overflow_on_one_replica_skips_the_step(mirrored):
    report, _ = mirrored
    # The non-finite samples reach replica 3 only, as fit distributes them.
    assert report["bad_rows_on_replicas"] == [3]
    # Momentum slots were non-zero, so a wrongly applied step would show.
    assert report["momentum_nonzero_before"]
    # 8 weights (incl. BN moving stats); the optimizer chain's variables but
    # the loss scale and its counter: BoostOptimizer's and the scaler's own
    # iteration and lr (2 + 2), SGD's iteration, lr and 6 momentums.
    assert report["n_compared"] == 20
    # Every weight and optimizer variable, on every replica, bit-identical.
    assert report["changed_after_overflow"] == []
    assert report["scale_before"] == 32768.0
    assert report["scale_after"] == report["scale_before"] / 2
    assert report["scale_after_all_replicas"] == [16384.0] * 4
    assert report["good_steps_before"] == 2
    assert report["good_steps_after"] == 0
    assert report["overflow_logged"] == [1.0]
    assert report["loss_scale_logged"] == [16384.0]


def test_mirrored_stock_loss_scale_optimizer_control(mirrored):
    """Informative: stock Keras 3.15 checks only replica 0's gradients.

    Deterministic (the flag of replica 0 is used, the inf sits on replica 3),
    so the step is applied with NaN gradients and the scale is not lowered.
    If a Keras release fixes this, this test fails and can be dropped.
    """
    report, _ = mirrored
    assert not report["stock_weights_finite_after"]
    assert report["stock_scale_after"] == report["stock_scale_before"]
    assert any(name.startswith("weights:") for name in report["stock_changed_after_overflow"])


# --- MultiWorkerMirroredStrategy, 2 processes on loopback -------------------


def _run_workers(script, n, out_dir, timeout=240, args=(), expect_rc=0, outputs_name="worker{}.npz",
                 kill_rest_when_one_exits=False):
    """Runs `script` as the n workers of a loopback cluster; returns their npz.

    `kill_rest_when_one_exits`: once any worker has exited, SIGKILL the others
    (they are blocked in a collective with the lost worker)."""
    ports = _free_ports(n)
    cluster = {"worker": [f"127.0.0.1:{p}" for p in ports]}
    procs = []
    for index in range(n):
        tf_config = json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})
        procs.append(
            subprocess.Popen(
                [sys.executable, os.path.join(SCRIPTS, script), str(out_dir), *args],
                env=_env(TF_CONFIG=tf_config),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
        )
    outputs = []
    if kill_rest_when_one_exits:
        deadline = time.monotonic() + timeout
        while all(proc.poll() is None for proc in procs) and time.monotonic() < deadline:
            time.sleep(0.2)
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    try:
        for proc in procs:
            outputs.append(proc.communicate(timeout=timeout))
    except subprocess.TimeoutExpired:
        for proc in procs:
            proc.kill()
        outputs = [proc.communicate() for proc in procs]
        pytest.fail(
            "MWMS workers timed out\n"
            + "\n".join(
                f"--- worker {i} stderr ---\n{_tail(err)}" for i, (_, err) in enumerate(outputs)
            )
        )
    for i, (proc, (out, err)) in enumerate(zip(procs, outputs)):
        assert proc.returncode == expect_rc, (
            f"worker {i} exited with {proc.returncode}, expected {expect_rc}\n--- stdout ---\n"
            f"{_tail(out)}\n--- stderr ---\n{_tail(err)}"
        )
    if expect_rc != 0:
        return None
    return [dict(np.load(out_dir / outputs_name.format(i))) for i in range(n)]


def test_multi_worker_fit_two_processes(tmp_path):
    w0, w1 = _run_workers("mwms_worker.py", 2, tmp_path)
    assert sorted(w0) == sorted(w1)
    for key in w0:
        assert np.array_equal(w0[key], w1[key]), f"workers differ on {key}"

    for tag in ("dynamic", "none"):
        n = len([k for k in w0 if k.startswith(f"{tag}_final_")])
        assert n == 4
        assert all(np.isfinite(w0[f"{tag}_final_{i}"]).all() for i in range(n))
        assert any(
            not np.array_equal(w0[f"{tag}_init_{i}"], w0[f"{tag}_final_{i}"]) for i in range(n)
        ), f"{tag}: weights did not move"
        loss = w0[f"{tag}_history_loss"]
        assert len(loss) == 2 and loss[1] < loss[0]

    # Dynamic scaling: no overflow, 2 epochs x 4 global batches counted.
    np.testing.assert_array_equal(w0["dynamic_history_overflow"], [0.0, 0.0])
    assert float(w0["dynamic_scale_state_0"]) == 32768.0
    assert int(w0["dynamic_scale_state_1"]) == 8
    # Same math with and without scaling (2**15 scales exactly), and the
    # cross-worker mean equals the single-device global-batch step.
    for i in range(4):
        np.testing.assert_allclose(w0[f"dynamic_final_{i}"], w0[f"none_final_{i}"], rtol=1e-6)
        np.testing.assert_allclose(
            w0[f"dynamic_final_{i}"], w0[f"single_final_{i}"], rtol=1e-5, atol=1e-6
        )
    np.testing.assert_allclose(w0["dynamic_history_loss"], w0["single_history_loss"], rtol=1e-5)


# --- MirroredStrategy, gradient freezing ---------------------------------------


@pytest.mark.parametrize("mode", ["boost", "plain"])
def test_mirrored_freezing_equals_single_device(mirrored_freeze, mode):
    arrays = mirrored_freeze
    np.testing.assert_allclose(arrays[f"{mode}_distributed"], arrays[f"{mode}_single"], rtol=1e-5, atol=1e-6)
    assert not np.allclose(arrays[f"{mode}_init"], arrays[f"{mode}_distributed"])


@pytest.fixture(scope="module")
def mirrored_freeze(tmp_path_factory):
    out = tmp_path_factory.mktemp("mirrored_freeze")
    _run_script("mirrored_freeze.py", out, timeout=240)
    return dict(np.load(out / "freeze.npz"))


# --- MirroredStrategy, AdaSum --------------------------------------------------


@pytest.fixture(scope="module")
def adasum_runs(tmp_path_factory):
    out = tmp_path_factory.mktemp("mirrored_adasum")
    runs = {}
    for n in (2, 3, 4, 8):
        _run_script("mirrored_adasum.py", out, 300, n)
        runs.update(dict(np.load(out / f"adasum{n}.npz")))
    return runs


def _matches_reference(runs, name, atol=1e-6):
    np.testing.assert_allclose(runs[f"{name}_got"], runs[f"{name}_want"], rtol=1e-5, atol=atol)
    assert float(runs[f"{name}_spread"]) == 0.0, f"{name}: replicas out of sync"


@pytest.mark.parametrize("n", [2, 3, 4, 8])
def test_adasum_combines_local_mean_gradients_by_the_tree(adasum_runs, n):
    # Different data per replica: the update is the NumPy tree over the
    # replicas' local mean gradients, and clearly not their mean.
    _matches_reference(adasum_runs, f"tree{n}")
    # 2**k replicas: the halving/doubling exchange (bytes of a ring
    # all-reduce); 3: the gather.
    assert str(adasum_runs[f"tree{n}_exchange"]) == ("all_gather" if n == 3 else "halving_doubling")
    assert int(adasum_runs[f"tree{n}_skipped"]) == 0
    assert np.abs(adasum_runs[f"tree{n}_got"] - adasum_runs[f"tree{n}_mean"]).max() > 1e-3


def test_adasum_delta_mode_combines_local_adam_steps(adasum_runs):
    # Adam's step g / (|g| + eps) amplifies float32 rounding of tiny gradients.
    _matches_reference(adasum_runs, "delta_adam", atol=1e-5)


@pytest.mark.parametrize("mode", ["grad", "delta"])
def test_adasum_identical_replicas_give_the_single_device_run(adasum_runs, mode):
    _matches_reference(adasum_runs, f"identical_{mode}")


def test_adasum_hierarchical_and_fused_buckets(adasum_runs):
    _matches_reference(adasum_runs, "hierarchical")
    assert str(adasum_runs["hierarchical_exchange"]) == "all_gather"  # node means first
    _matches_reference(adasum_runs, "split")
    assert str(adasum_runs["split_exchange"]) == "halving_doubling"
    _matches_reference(adasum_runs, "gather")  # exchange="gather": the same update
    assert str(adasum_runs["gather_exchange"]) == "all_gather"


def test_adasum_skips_a_step_non_finite_on_one_replica(adasum_runs):
    np.testing.assert_array_equal(adasum_runs["nonfinite_got"], adasum_runs["nonfinite_want"])
    assert int(adasum_runs["nonfinite_skipped"]) == 1


def test_o2_with_freezing_combines_the_trained_group(adasum_runs):
    assert int(adasum_runs["o2_status"]) == 1  # check_adasum_enable()
    assert len(set(adasum_runs["o2_freeze_depths"].tolist())) > 1  # several depths ran
    _matches_reference(adasum_runs, "o2_freeze")


def test_o2_with_accumulation_combines_once_per_update(adasum_runs):
    _matches_reference(adasum_runs, "o2_accumulation")


def test_o2_with_loss_scaling_skips_an_overflow_on_one_replica(adasum_runs):
    np.testing.assert_array_equal(
        adasum_runs["o2_loss_scale_overflow_got"], adasum_runs["o2_loss_scale_overflow_want"]
    )
    assert float(adasum_runs["o2_loss_scale"]) == 2.0**14


@pytest.mark.parametrize("workers", [2, 4])
def test_multi_worker_adasum_stays_in_sync(tmp_path, workers):
    results = _run_workers("mwms_adasum_worker.py", workers, tmp_path, timeout=300)
    first = results[0]
    for other in results[1:]:
        assert sorted(other) == sorted(first)
        for key in first:
            assert np.array_equal(first[key], other[key]), f"workers differ on {key}"
    assert int(first["adasum_status"]) == 1
    assert str(first["adasum_exchange"]) == "halving_doubling"  # pair groups across processes
    finals = sorted(k[len("same_final_"):] for k in first if k.startswith("same_final_"))
    for i in finals:
        # Identical local gradients: AdaSum gives the mean all-reduce's run.
        np.testing.assert_allclose(first[f"same_final_{i}"], first[f"same_mean_final_{i}"], rtol=1e-5, atol=1e-6)
    # Different data: AdaSum acted (not the mean all-reduce), and it trains.
    assert max(np.abs(first[f"adasum_final_{i}"] - first[f"mean_final_{i}"]).max() for i in finals) > 1e-4
    assert first["adasum_loss"][-1] < first["adasum_loss"][0]


def test_multi_worker_o2_resumes_after_preemption_with_backup_and_restore(tmp_path):
    script = "mwms_restore_worker.py"
    full = _run_workers(script, 2, tmp_path, args=("full",), outputs_name="full_worker{}.npz")
    # Every worker exits right after the epoch-2 backup, as a preempted job does.
    _run_workers(script, 2, tmp_path, args=("interrupted",), expect_rc=17)
    resumed = _run_workers(script, 2, tmp_path, args=("resume",), outputs_name="resume_worker{}.npz")
    assert full[0]["epochs_run"].tolist() == [0, 1, 2, 3]
    for worker in resumed:
        assert worker["epochs_run"].tolist() == [2, 3]  # restored, not restarted
        for key in (k for k in worker if k.startswith("final_")):
            np.testing.assert_allclose(worker[key], full[0][key], rtol=1e-5, atol=1e-6)
            assert np.array_equal(worker[key], resumed[0][key])


def test_multi_worker_resumes_after_a_worker_is_killed_mid_epoch(tmp_path):
    # O2 + freezing + accumulation + dynamic loss scaling: every piece of
    # keras_boost state must come back for the run to end where it would have.
    script = "mwms_kill_worker.py"
    full = _run_workers(script, 2, tmp_path, args=("full",), outputs_name="full_worker{}.npz")
    _run_workers(script, 2, tmp_path, args=("killed",), expect_rc=-9, kill_rest_when_one_exits=True)
    resumed = _run_workers(script, 2, tmp_path, args=("resume",), outputs_name="resume_worker{}.npz")
    assert full[0]["epochs_run"].tolist() == [0, 1, 2, 3]
    scale = next(k for k in full[0] if k.endswith("dynamic_scale"))
    assert float(full[0][scale]) > 16.0  # the loss scale moved during the run
    for worker in resumed:
        assert worker["epochs_run"].tolist() == [2, 3]  # restored at the last epoch end
        assert sorted(worker) == sorted(full[0])
        for key in (k for k in worker if k != "epochs_run"):
            np.testing.assert_allclose(worker[key], full[0][key], rtol=1e-6, atol=1e-7, err_msg=key)


# --- MirroredStrategy, compressed all-reduce -------------------------------------


@pytest.fixture(scope="module")
def compressed_runs(tmp_path_factory):
    out = tmp_path_factory.mktemp("mirrored_compressed")
    runs = {}
    for n in (2, 4):
        _run_script("mirrored_compressed.py", out, 300, n)
        runs[n] = dict(np.load(out / f"compressed{n}.npz"))
    return runs


@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("feedback", ["plain", "ef"])
def test_compressed_all_reduce_equals_the_cast_numpy_reference(compressed_runs, n, dtype, feedback):
    run, name = compressed_runs[n], f"{dtype}_{feedback}"
    got, want, exact = run[f"{name}_got"], run[f"{name}_want"], run[f"{name}_exact"]
    if n == 2:  # one 16-bit add: the reference is exact
        np.testing.assert_array_equal(got, want)
    else:
        # Summing 4 values, the collective's order of 16-bit adds is not
        # the reference's everywhere (and a last-bit gradient difference can
        # flip a rounding): a few elements differ by a few last-place units
        # of a step over the 3 steps, the rest agree exactly.
        ulp = {"bfloat16": 2.0**-8, "float16": 2.0**-11}[dtype]
        step_ulp = 0.1 * ulp * np.abs(want).max()
        assert np.abs(got - want).max() <= 9 * step_ulp
        assert np.mean(np.abs(got - want) > 1e-7) <= 0.15
    assert np.mean(np.abs(got - exact) > 1e-7) >= 0.3  # the cast did act
    assert run[f"{name}_skipped"] == 0


def test_compressed_float16_overflow_skips_the_step_everywhere(compressed_runs):
    run = compressed_runs[2]
    np.testing.assert_array_equal(run["overflow_got"], run["overflow_want"])
    assert run["overflow_skipped"] == 1


def test_compressed_error_feedback_survives_a_skipped_overflow(compressed_runs):
    run = compressed_runs[2]
    assert run["overflow_ef_skipped"] == 1
    got, want = run["overflow_ef_got"], run["overflow_ef_want"]
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-3 * np.abs(want).max())


def test_compressed_all_reduce_halves_the_bytes_on_the_wire(compressed_runs):
    run = compressed_runs[2]
    assert run["wire_bytes_bf16"] * 2 == run["wire_bytes_f32"] > 0


# --- DimReduce: MirroredStrategy and MultiWorkerMirroredStrategy ---------------


@pytest.fixture(scope="module")
def dim_reduce_runs(tmp_path_factory):
    runs = {}
    for n in (2, 3):  # a directory each: a run writes its own trajectory and basis
        out = tmp_path_factory.mktemp(f"mirrored_dim_reduce{n}")
        _run_script("mirrored_dim_reduce.py", out, 240, n)
        runs[n] = dict(np.load(out / f"dim_reduce{n}.npz"))
    return runs


@pytest.mark.parametrize("n", [2, 3])
def test_dim_reduce_identical_replicas_give_the_single_device_step(dim_reduce_runs, n):
    run = dim_reduce_runs[n]
    np.testing.assert_allclose(run["same_got"], run["same_want"], rtol=1e-5, atol=1e-6)
    assert run["same_accepted"].sum() == run["same_want_accepted"]
    assert float(run["same_spread"]) == 0.0  # weights, basis and state equal on every replica


@pytest.mark.parametrize("n", [2, 3])
def test_dim_reduce_split_batch_equals_the_global_batch_step(dim_reduce_runs, n):
    run = dim_reduce_runs[n]
    np.testing.assert_allclose(run["split_got"], run["split_want"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(run["split_loss"], run["split_want_loss"], rtol=1e-5)
    assert run["split_accepted"] == run["split_want_accepted"] > 0
    assert float(run["split_spread"]) == 0.0


@pytest.mark.parametrize("n", [2, 3])
def test_dim_reduce_basis_computed_once_and_shared(dim_reduce_runs, n):
    run = dim_reduce_runs[n]
    # One PCA in the process (at the first build; the later models read the
    # file it wrote), one mirrored basis equal to that file on every replica.
    assert int(run["pca_calls_after_build"]) == int(run["pca_calls"]) == 1
    assert bool(run["basis_file_equal"])
    assert bool(run["status_enabled"]) and f"on {n} replicas" in str(run["status_reason"])


def test_dim_reduce_line_search_decides_on_the_mean_loss(dim_reduce_runs):
    run = dim_reduce_runs[2]
    taken, own = run["armijo_want_steps"], run["armijo_own_steps"]
    # The scenario: each replica's own test (its loss) disagrees with the
    # mean-loss test somewhere, both ways, so the run below is neither any
    # one replica's decision, nor their AND, nor their OR.
    assert all((own[:, r] != taken).any() for r in range(2))
    assert ((taken > 0) & (own == 0).any(axis=1)).any()  # mean accepts, a replica alone rejects
    assert ((taken == 0) & (own > 0).any(axis=1)).any()  # mean rejects, a replica alone accepts
    assert float(run["armijo_margin"]) > 1e-5  # float32 rounding cannot flip a test
    np.testing.assert_array_equal(run["armijo_accepted"], (taken > 0).astype("float64"))
    np.testing.assert_allclose(run["armijo_got"], run["armijo_want"], rtol=1e-5, atol=1e-6)
    assert float(run["armijo_spread"]) == 0.0


def test_multi_worker_dim_reduce_chief_writes_the_basis(tmp_path):
    chief, worker = _run_workers("mwms_dim_reduce_worker.py", 2, tmp_path)
    assert int(chief["pca_calls"]) == 1 and int(worker["pca_calls"]) == 0
    assert not bool(worker["basis_existed_before_compile"])  # worker 1 did wait for the file
    assert "reads the basis the chief writes" in str(worker["status_reason"])
    assert bool(worker["status_enabled"]) and bool(chief["status_enabled"])
    assert np.array_equal(chief["distributed"], worker["distributed"])
    np.testing.assert_allclose(chief["distributed"], chief["single"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(chief["loss"], chief["single_loss"], rtol=1e-5)
    assert int(chief["accepted"]) > 0
