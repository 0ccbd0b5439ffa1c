"""The device a run measured: `nvidia-smi`'s GPUs and what the backend runs on."""

import subprocess

__all__ = ["accelerator_record", "backend_devices", "nvidia_smi"]


def nvidia_smi():
    """The GPUs `nvidia-smi` lists: `[{"name", "memory_total", "driver"}]`, or None without it."""
    try:
        proc = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None
    gpus = []
    for line in proc.stdout.strip().splitlines():
        name, memory, driver = ([part.strip() for part in line.split(",")] + ["", ""])[:3]
        gpus.append({"name": name, "memory_total": memory, "driver": driver})
    return gpus


def backend_devices(backend):
    """What the backend runs on: `(accelerator name or None, details)`."""
    if backend == "jax":
        import jax

        devices = jax.devices()
        gpu = next((d for d in devices if d.platform in ("gpu", "cuda", "rocm")), None)
        details = {"default_backend": jax.default_backend(), "devices": [str(d) for d in devices]}
        return (getattr(gpu, "device_kind", str(gpu)) if gpu is not None else None), details
    if backend == "torch":
        import torch

        available = torch.cuda.is_available()
        name = torch.cuda.get_device_name(0) if available else None
        return name, {"cuda_available": available, "cuda_version": torch.version.cuda,
                      "device_count": torch.cuda.device_count() if available else 0}
    if backend == "tensorflow":
        import tensorflow as tf

        gpus = tf.config.list_physical_devices("GPU")
        name = None
        if gpus:
            name = tf.config.experimental.get_device_details(gpus[0]).get("device_name", gpus[0].name)
        return name, {"gpus": [g.name for g in gpus], "built_with_cuda": tf.test.is_built_with_cuda()}
    return None, {}


def accelerator_record(backend):
    """The device a run measured: `nvidia-smi`'s GPUs, the backend's view, and `device`.

    Example:

    ```python
    accelerator_record("jax")["device"]   # 'NVIDIA H200', or 'CPU: AMD EPYC ...'
    ```
    """
    from keras_boost.bench.machine import cpu_model

    gpus = nvidia_smi()
    try:
        name, details = backend_devices(backend)
    except Exception as error:  # record, do not fail: the CPU numbers are still numbers
        name, details = None, {"error": repr(error)}
    record = {"nvidia_smi": gpus, "backend_devices": details, "on_accelerator": name is not None,
              "device": name if name is not None else f"CPU: {cpu_model()}"}
    if gpus and name is None:
        record["warning"] = (f"nvidia-smi lists {gpus[0]['name']} but {backend} runs on the CPU "
                             "(a CPU-only build of the backend?)")
    return record
