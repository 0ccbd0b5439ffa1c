"""`atomic_write`: replace a file so that a reader never sees it half-written.

Used wherever a file may be read while it is being written: DimReduce's
weight snapshots and basis (a stage-2 process may poll them) and the
benchmark results (saved after every run).
"""

import os
import tempfile

__all__ = ["atomic_write"]


def atomic_write(path, write):
    """Writes `path` through `write(file)` into a temporary file that then replaces it.

    The temporary file lives in the same directory, so the final
    `os.replace` is atomic: readers see the old file or the new one, never
    half. The file gets the permissions `open(path, "w")` gives a new file
    (0666 less the umask). On any error the temporary file is removed and
    `path` is left as it was.

    Example:

    ```python
    atomic_write("result.json", lambda f: f.write(b"{}"))
    atomic_write("basis.npy", lambda f: np.save(f, basis))
    ```
    """
    directory = os.path.dirname(os.fspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory or None, prefix=".tmp-")
    try:
        # mkstemp creates the file 0600; give it the mode `open(path, "w")` would.
        os.chmod(tmp, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as f:
            write(f)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def _umask():
    """The process's umask (reading it means setting it: put it straight back)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask
