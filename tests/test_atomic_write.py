import os

import pytest

from keras_boost.atomic_write import atomic_write


def test_atomic_write_replaces_the_file_whole(tmp_path):
    path = tmp_path / "result.json"
    path.write_bytes(b"old")
    atomic_write(str(path), lambda f: f.write(b"new"))
    assert path.read_bytes() == b"new"
    assert os.listdir(tmp_path) == ["result.json"]  # no temporary file left


def test_atomic_write_failure_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "result.json"
    path.write_bytes(b"old")

    def fail_halfway(f):
        f.write(b"ne")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        atomic_write(str(path), fail_halfway)
    assert path.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["result.json"]


def test_atomic_write_accepts_a_bare_file_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    atomic_write("bare.bin", lambda f: f.write(b"x"))
    assert (tmp_path / "bare.bin").read_bytes() == b"x"


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_atomic_write_gives_the_mode_open_gives(tmp_path, umask):
    previous = os.umask(umask)
    try:
        atomic_write(str(tmp_path / "atomic.json"), lambda f: f.write(b"{}"))
        with open(tmp_path / "plain.json", "wb") as f:
            f.write(b"{}")
    finally:
        os.umask(previous)
    mode = (tmp_path / "atomic.json").stat().st_mode & 0o777
    assert mode == (tmp_path / "plain.json").stat().st_mode & 0o777 == 0o666 & ~umask
