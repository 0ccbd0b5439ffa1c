"""What machine a benchmark ran on (recorded with every result)."""

import os
import platform

__all__ = ["PRECISION_FLAGS", "cpu_flags", "cpu_model", "usable_cpus"]


def usable_cpus():
    """What `nproc` prints: the CPUs this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count()


def cpu_model():
    """The "model name" line of /proc/cpuinfo, else what `platform` knows.

    `platform.processor()` is often empty or just "x86_64" on Linux.
    """
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


# The instruction-set flags that decide whether a lower precision is fast.
PRECISION_FLAGS = ("avx2", "fma", "f16c", "avx512f", "avx512_bf16", "avx512_fp16", "amx_bf16", "amx_tile")


def cpu_flags(wanted=PRECISION_FLAGS):
    """Which of `wanted` the CPU reports in /proc/cpuinfo (empty if unknown).

    Example:

    ```python
    cpu_flags()   # e.g. ['avx2', 'fma', 'f16c', 'avx512f', 'avx512_bf16']
    ```
    """
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    present = set(line.split(":", 1)[1].split())
                    return [flag for flag in wanted if flag in present]
    except OSError:
        pass
    return []
