"""`WeightTrajectory`: the stage-1 weight snapshots that DimReduce's PCA needs."""

import json
import os

import keras
import numpy as np

from keras_boost.atomic_write import atomic_write

__all__ = ["load_trajectory", "MANIFEST", "variables_spec", "WeightTrajectory"]

MANIFEST = "manifest.json"


def variables_spec(variables):
    """Path, shape and size of each variable (the manifest's layout)."""
    return [
        {"path": v.path, "shape": list(v.shape), "size": int(np.prod(v.shape, dtype=np.int64))}
        for v in variables
    ]


@keras.saving.register_keras_serializable(package="keras_boost")
class WeightTrajectory(keras.callbacks.Callback):
    """Saves the flattened trainable weights during training (DimReduce stage 1).

    Each snapshot is one `.npy` file (float32, the trainable variables in
    `model.trainable_variables` order, flattened and concatenated), written
    atomically; `manifest.json` lists the variables (path, shape) and the
    snapshots, so that `load_trajectory` refuses a model whose variables do
    not match instead of silently mis-assigning columns.

    Args:
        directory: where the snapshots go (created if needed). Snapshots of
            an earlier run in it are kept if their variables match, else
            `ValueError`.
        every: `"epoch"` (one snapshot per epoch end) or an int N (every N
            training steps).
        start_epoch: epochs before this one are not saved (the trajectory
            of the first epochs is mostly the initial transient).

    Example:

    ```python
    model.fit(x, y, epochs=30, callbacks=[boost.callbacks.WeightTrajectory("traj")])
    samples, manifest = boost.callbacks.load_trajectory("traj", model)
    ```
    """

    def __init__(self, directory, every="epoch", start_epoch=0):
        super().__init__()
        if every != "epoch" and (isinstance(every, bool) or not isinstance(every, int) or every < 1):
            raise ValueError(f"every must be 'epoch' or an int >= 1 (steps), got {every!r}.")
        if isinstance(start_epoch, bool) or not isinstance(start_epoch, int) or start_epoch < 0:
            raise ValueError(f"start_epoch must be an int >= 0, got {start_epoch!r}.")
        self.directory = os.fspath(directory)
        self.every = every
        self.start_epoch = start_epoch
        self._epoch = 0
        self._manifest = None

    def _open(self):
        os.makedirs(self.directory, exist_ok=True)
        spec = variables_spec(self.model.trainable_variables)
        path = os.path.join(self.directory, MANIFEST)
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                manifest = json.load(f)
            _check_spec(manifest["variables"], spec, self.directory)
        else:
            manifest = {"format": 1, "variables": spec, "snapshots": []}
        self._manifest = manifest

    def save_snapshot(self, tag):
        """Saves the current weights now (also usable without `fit`)."""
        if self._manifest is None:
            self._open()
        flat = np.concatenate(
            [np.ravel(keras.ops.convert_to_numpy(v.value)).astype(np.float32) for v in self.model.trainable_variables]
        )
        name = f"snapshot_{len(self._manifest['snapshots']):05d}.npy"
        atomic_write(os.path.join(self.directory, name), lambda f: np.save(f, flat))
        self._manifest["snapshots"].append({"file": name, "tag": tag})
        text = json.dumps(self._manifest, indent=1).encode()
        atomic_write(os.path.join(self.directory, MANIFEST), lambda f: f.write(text))
        return name

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch

    def on_epoch_end(self, epoch, logs=None):
        if self.every == "epoch" and epoch >= self.start_epoch:
            self.save_snapshot(f"epoch {epoch + 1}")

    def on_train_batch_end(self, batch, logs=None):
        if self.every != "epoch" and self._epoch >= self.start_epoch:
            step = int(keras.ops.convert_to_numpy(self.model.optimizer.iterations))
            if step % self.every == 0:
                self.save_snapshot(f"step {step}")

    def get_config(self):
        return {"directory": self.directory, "every": self.every, "start_epoch": self.start_epoch}


def _check_spec(saved, current, directory):
    if len(saved) != len(current):
        raise ValueError(
            f"The trajectory in {directory!r} holds {len(saved)} variables, the model has "
            f"{len(current)}: it was saved from another model."
        )
    for i, (a, b) in enumerate(zip(saved, current)):
        if list(a["shape"]) != list(b["shape"]) or a["path"] != b["path"]:
            raise ValueError(
                f"The trajectory in {directory!r} does not match the model at variable {i}: "
                f"saved {a['path']!r} {tuple(a['shape'])}, model {b['path']!r} {tuple(b['shape'])}."
            )


def load_trajectory(directory, model=None, variables=None):
    """The snapshots of a `WeightTrajectory` directory as an (m, n) array.

    With `model` (or its trainable `variables`), they must match the
    manifest (paths and shapes, in order), else `ValueError` naming the
    first mismatch. Returns `(samples, manifest)`.
    """
    directory = os.fspath(directory)
    path = os.path.join(directory, MANIFEST)
    if not os.path.isdir(directory) or not os.path.exists(path):
        raise ValueError(
            f"{directory!r} holds no weight trajectory ({MANIFEST} missing): record one with "
            "boost.callbacks.WeightTrajectory(directory) during stage-1 training."
        )
    with open(path, encoding="utf-8") as f:
        manifest = json.load(f)
    if model is not None:
        variables = model.trainable_variables
    if variables is not None:
        _check_spec(manifest["variables"], variables_spec(variables), directory)
    if not manifest["snapshots"]:
        raise ValueError(f"The trajectory in {directory!r} has no snapshots yet.")
    n = sum(v["size"] for v in manifest["variables"])
    samples = np.empty((len(manifest["snapshots"]), n), dtype=np.float32)
    for i, snapshot in enumerate(manifest["snapshots"]):
        row = np.load(os.path.join(directory, snapshot["file"]))
        if row.shape != (n,):
            raise ValueError(f"{snapshot['file']} in {directory!r} has shape {row.shape}, expected ({n},).")
        samples[i] = row
    return samples, manifest
