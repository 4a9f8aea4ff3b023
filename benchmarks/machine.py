"""The machine a benchmark ran on, for its JSON and its table (one place for every
benchmark)."""

from __future__ import annotations

import platform

import psutil


def machine_facts(**extra) -> dict:
    """CPUs, memory, platform, Python, pyspark and distributed versions, and ``extra``."""
    import distributed
    import pyspark

    return {
        "cpus": psutil.cpu_count(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "pyspark": pyspark.__version__,
        "distributed": distributed.__version__,
        **extra,
    }
