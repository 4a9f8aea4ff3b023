"""Spark RAPIDS and dask-cuda on the same GPUs.

The RAPIDS Accelerator for Apache Spark (``com.nvidia.spark.SQLPlugin`` in
``spark.plugins``) gives each executor an RMM memory pool on its GPU when the executor
starts. A dask-cuda worker that spark-dask starts in a barrier task of that executor
uses the same GPU, so it only gets what the Spark pool left free. This module

* reads the plugin's GPU memory confs and says, with the exact confs to set, when the
  Spark pool would leave too little for Dask (:func:`check_rapids`);
* tells :mod:`spark_dask.executor.rmm` what the plugin's pool leaves, so that each task
  sizes its dask-cuda worker's RMM pool from the GPU memory actually free there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from spark_dask.sizes import BYTES, parse_size

SQL_PLUGIN = "com.nvidia.spark.SQLPlugin"
POOL = "spark.rapids.memory.gpu.pool"
POOLING_ENABLED = "spark.rapids.memory.gpu.pooling.enabled"  # deprecated switch
ALLOC_FRACTION = "spark.rapids.memory.gpu.allocFraction"
MAX_ALLOC_FRACTION = "spark.rapids.memory.gpu.maxAllocFraction"
MIN_ALLOC_FRACTION = "spark.rapids.memory.gpu.minAllocFraction"
RESERVE = "spark.rapids.memory.gpu.reserve"

# The plugin's defaults (spark-rapids 23.x and later).
DEFAULT_POOL = "ASYNC"
DEFAULT_ALLOC_FRACTION = 1.0
DEFAULT_MAX_ALLOC_FRACTION = 1.0
DEFAULT_MIN_ALLOC_FRACTION = 0.25
DEFAULT_RESERVE = 640 * 2**20


def _bytes(text: str | None, default: int) -> int:
    """A JVM-style size ("640m", "1g", "1024") to bytes, ``default`` when unset or not a
    size; bare numbers are bytes here."""
    if text is None or not str(text).strip():
        return default
    try:
        return parse_size(str(text), BYTES, binary=True)
    except ValueError:
        return default


def _fraction(text: str | None, default: float) -> float:
    try:
        return float(text) if text is not None and str(text).strip() else default
    except ValueError:
        return default


def plugin_enabled(plugins: str | None) -> bool:
    """Whether ``spark.plugins`` holds the RAPIDS SQL plugin."""
    return SQL_PLUGIN in [p.strip() for p in (plugins or "").split(",")]


@dataclass(frozen=True)
class RapidsMemory:
    """The RAPIDS plugin's GPU memory settings, defaults filled in."""

    enabled: bool
    pool: str
    alloc_fraction: float
    max_alloc_fraction: float
    min_alloc_fraction: float
    reserve: int

    @property
    def pooled(self) -> bool:
        """Whether the plugin keeps an RMM pool (it does unless the pool is NONE)."""
        return self.enabled and self.pool != "NONE"

    @property
    def spark_fraction(self) -> float:
        """Share of the GPU's free memory the plugin takes at executor start."""
        if not self.pooled:
            return 0.0
        return min(self.alloc_fraction, self.max_alloc_fraction)


def read_rapids(conf: Callable[[str], str | None]) -> RapidsMemory:
    """The plugin's GPU memory confs from a conf reader (``conf(key)`` -> str or None)."""
    pool = (conf(POOL) or "").strip().upper() or DEFAULT_POOL
    if (conf(POOLING_ENABLED) or "").strip().lower() == "false" and conf(POOL) is None:
        pool = "NONE"
    return RapidsMemory(
        enabled=plugin_enabled(conf("spark.plugins")),
        pool=pool,
        alloc_fraction=_fraction(conf(ALLOC_FRACTION), DEFAULT_ALLOC_FRACTION),
        max_alloc_fraction=_fraction(conf(MAX_ALLOC_FRACTION), DEFAULT_MAX_ALLOC_FRACTION),
        min_alloc_fraction=_fraction(conf(MIN_ALLOC_FRACTION), DEFAULT_MIN_ALLOC_FRACTION),
        reserve=_bytes(conf(RESERVE), DEFAULT_RESERVE),
    )


def check_rapids(conf: Callable[[str], str | None], dask_fraction: float = 0.4) -> list[str]:
    """Warnings (with the confs to set) when the RAPIDS pool would starve Dask workers.

    Parameters
    ----------
    conf : callable
        ``conf(key)`` returns the Spark conf value or None.
    dask_fraction : float
        Share of each GPU the dask-cuda workers need (``spark-dask.rapids.dask-fraction``).

    Returns
    -------
    list of str
        Empty when the plugin is off or leaves at least ``dask_fraction`` free.
    """
    mem = read_rapids(conf)
    if not mem.pooled or mem.spark_fraction + dask_fraction <= 1.0 + 1e-9:
        return []
    keep = max(0.05, round(1.0 - dask_fraction, 2))
    sets = [f"{ALLOC_FRACTION}={keep:g}", f"{MAX_ALLOC_FRACTION}={keep:g}"]
    if mem.min_alloc_fraction > keep:
        sets.append(f"{MIN_ALLOC_FRACTION}={keep:g}")
    return [
        f"spark-dask: the RAPIDS Accelerator ({SQL_PLUGIN}) keeps a {mem.pool} GPU memory "
        f"pool of {mem.spark_fraction:.0%} of each GPU ({ALLOC_FRACTION}="
        f"{mem.alloc_fraction:g}, {MAX_ALLOC_FRACTION}={mem.max_alloc_fraction:g}), leaving "
        f"less than the {dask_fraction:.0%} the dask-cuda workers need "
        f"(spark-dask.rapids.dask-fraction). Start the Spark application (on Databricks: "
        f"the cluster's Spark config, then restart it) with "
        + " ".join(f"--conf {s}" for s in sets)
        + f", or with --conf {POOL}=NONE to give up the Spark pool. These confs are read "
        f"when executors start."
    ]


__all__ = [
    "RapidsMemory",
    "check_rapids",
    "plugin_enabled",
    "read_rapids",
    "parse_size",
]
