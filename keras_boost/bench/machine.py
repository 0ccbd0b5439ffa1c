"""What machine a benchmark ran on (recorded with every result)."""

import platform


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
