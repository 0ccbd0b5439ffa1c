"""`plan`: pick a data x model mesh for a model and a device count.

The model-axis size is the smallest power of two dividing the device count
whose per-device parameter memory (after `auto_layout`'s sharding at that size)
fits `memory_budget`; the rest of the devices go to the data axis. When even
the largest candidate does not fit, the plan is pure data parallel (model axis
1) and says that it does not fit.

Example:

```python
plan = boost.distribute.plan(model, devices=8)
print(plan)                        # mesh shape, per-device parameter memory
mesh = plan.device_mesh()          # needs 8 devices (keras.distribution.list_devices())
layout_map = boost.distribute.auto_layout(model, mesh)
```
"""

import math

import numpy as np

from keras_boost.distribute import layout as layout_lib

__all__ = ["GIB", "ParallelPlan", "per_device_bytes", "plan"]

GIB = 1 << 30


def _itemsize(variable):
    try:
        return int(np.dtype(str(variable.dtype)).itemsize)
    except TypeError:
        return 2 if "16" in str(variable.dtype) else 4


def per_device_bytes(model, model_size, *, min_size=layout_lib.DEFAULT_MIN_SIZE, state_factor=1):
    """Parameter bytes per device when `auto_layout` shards over `model_size` devices.

    `state_factor` multiplies the parameter bytes (e.g. 3 for Adam's two
    slots, which `ModelParallel` shards like their variables).

    Example:

    ```python
    per_device_bytes(model, 4)   # parameter bytes per device with a 4-way model axis
    ```
    """
    decisions = {d.path: d for d in layout_lib.decide(layout_lib.candidates(model), model_size,
                                                        min_size=min_size)}
    total = 0
    for v in model.variables:
        nbytes = math.prod(int(d) for d in v.shape) * _itemsize(v)
        d = decisions.get(v.path)
        total += nbytes // model_size if d is not None and d.sharded else nbytes
    return total * state_factor


class ParallelPlan:
    """A mesh choice: `mesh_shape`, `axis_names`, `per_device_bytes`.

    `candidates` holds (model-axis size, per-device bytes) for every size
    tried; `fits` says whether the chosen one is within `memory_budget`.

    Example:

    ```python
    p = boost.distribute.plan(model, devices=8)
    p.mesh_shape, p.axis_names, p.per_device_bytes   # ((8, 1), ("batch", "model"), ...)
    mesh = p.device_mesh()
    ```
    """

    def __init__(self, mesh_shape, axis_names, per_device_bytes, total_bytes, memory_budget, devices,
                 candidates, fits, parameters):
        self.mesh_shape = tuple(mesh_shape)
        self.axis_names = tuple(axis_names)
        self.per_device_bytes = int(per_device_bytes)
        self.total_bytes = int(total_bytes)
        self.memory_budget = memory_budget
        self.devices = devices
        self.candidates = list(candidates)
        self.fits = fits
        self.parameters = parameters

    @property
    def data_size(self):
        return self.mesh_shape[0]

    @property
    def model_size(self):
        return self.mesh_shape[1]

    def device_mesh(self, devices=None):
        """The `keras.distribution.DeviceMesh` of this plan.

        `devices` defaults to the plan's device list, or to
        `keras.distribution.list_devices()` when the plan was made from a
        device count; their number must be the plan's device count.
        """
        if devices is None and not isinstance(self.devices, int):
            devices = self.devices
        return layout_lib.device_mesh(self.mesh_shape, self.axis_names, devices)

    def __str__(self):
        n = math.prod(self.mesh_shape)
        lines = [
            f"ParallelPlan: {n} devices -> mesh {self.mesh_shape} {self.axis_names}; "
            f"{self.parameters:,} parameters, {_fmt(self.total_bytes)} in all",
            f"  per-device parameter memory {_fmt(self.per_device_bytes)} "
            f"(budget {_fmt(self.memory_budget)}{'' if self.fits else ', DOES NOT FIT'})",
            "  model axis | per-device bytes",
        ]
        for size, nbytes in self.candidates:
            mark = " <-" if size == self.model_size else ""
            lines.append(f"  {size:10d} | {_fmt(nbytes)}{mark}")
        return "\n".join(lines)

    __repr__ = __str__


def _fmt(nbytes):
    for unit, scale in (("GiB", GIB), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.2f} {unit}"
    return f"{nbytes} B"


def plan(model, devices=None, *, memory_budget=2 * GIB, model_size=None, axis_names=("batch", "model"),
         min_size=layout_lib.DEFAULT_MIN_SIZE, state_factor=1):
    """Chooses the data x model mesh for `model` on `devices`.

    Args:
        model: a built Keras model.
        devices: a device count or a list of devices; defaults to
            `keras.distribution.list_devices()`.
        memory_budget: bytes of parameters (times `state_factor`) allowed
            per device (default 2 GiB).
        model_size: force the model-axis size (must divide the device
            count) instead of choosing it.
        axis_names: the (data, model) axis names.
        min_size: as in `auto_layout` (kernels outside the transformer
            patterns with fewer elements stay replicated).
        state_factor: multiplier for optimizer state (1: parameters only;
            3 for Adam).

    Returns:
        A `ParallelPlan`; `print(plan)` shows the mesh and per-device memory.

    Example:

    ```python
    p = boost.distribute.plan(model, devices=8, memory_budget=512 << 20)
    p.mesh_shape, p.per_device_bytes
    ```
    """
    if devices is None:
        devices = layout_lib._list_devices()
    if isinstance(devices, bool):
        raise ValueError(f"devices must be a device count or a list of devices, got {devices!r}.")
    count = devices if isinstance(devices, (int, np.integer)) else len(list(devices))
    if not isinstance(devices, (int, np.integer)):
        devices = list(devices)
    else:
        devices = count = int(count)
    if count < 1:
        raise ValueError(f"plan needs at least one device, got devices={devices!r}.")
    if memory_budget is not None and memory_budget <= 0:
        raise ValueError(f"memory_budget must be a positive number of bytes, got {memory_budget!r}.")
    if len(axis_names) != 2:
        raise ValueError(f"axis_names must be (data axis, model axis), got {axis_names!r}.")
    if model_size is not None:
        if isinstance(model_size, bool) or not isinstance(model_size, (int, np.integer)) or model_size < 1:
            raise ValueError(f"model_size must be an int >= 1, got {model_size!r}.")
        if count % model_size:
            raise ValueError(
                f"model_size={model_size} does not divide the device count {count} "
                f"({count} % {model_size} = {count % model_size}): the mesh would not cover the devices."
            )
        sizes = [int(model_size)]
    else:
        sizes, s = [], 1
        while s <= count:
            if count % s == 0:
                sizes.append(s)
            s *= 2
    total = per_device_bytes(model, 1, min_size=min_size, state_factor=state_factor)
    tried, chosen = [], None
    for s in sizes:
        nbytes = per_device_bytes(model, s, min_size=min_size, state_factor=state_factor)
        tried.append((s, nbytes))
        if chosen is None and (memory_budget is None or nbytes <= memory_budget):
            chosen = (s, nbytes)
    fits = chosen is not None
    if chosen is None:
        chosen = tried[0] if model_size is not None else (1, total)
    size, nbytes = chosen
    return ParallelPlan((count // size, size), axis_names, nbytes, total, memory_budget, devices, tried, fits,
                        int(sum(math.prod(int(d) for d in v.shape) for v in model.variables)))
