"""PySpark's Python worker daemon, with distributed imported before it forks.

Spark runs one Python daemon per executor (and Python executable) and forks each new
Python worker from it (``pyspark/daemon.py``, ``spark.python.use.daemon``); a new
Python worker then imports PySpark's worker module and whatever its task needs. A Dask
cluster's first start in an application runs every gang task in a new Python worker,
so each of them imports ``distributed`` on the executor's cores at once, and so does the
gang that replaces a drained or lost executor's workers on its new executor.

Named in ``spark.python.daemon.module`` when the application starts (Spark reads it once,
when an executor starts its daemon; SPARK-22959, Spark 2.3 on), this module imports
:data:`PRELOADED` in the daemon, freezes what it holds out of the garbage collector's
full collections, and runs PySpark's own daemon (``pyspark.daemon.manager``). Every
Python worker is then forked with those modules loaded, sharing their pages with the
daemon, and the ``gc.collect()`` PySpark's daemon runs after each task of a reused
Python worker skips them::

    spark.python.daemon.module  spark_dask.spark.daemon

It needs spark_dask installed where the executors' Python runs (a Databricks cluster
library, an image, the driver's environment on ``local-cluster``): Spark runs ``python
-m`` on the name, so a name the executors cannot import fails every Python task of the
application (``No module named 'spark_dask'``, docs/troubleshooting.md).

The modules preloaded start no Python thread (PySpark imports its worker module after
the fork for that reason: SPARK-54456); numpy, which distributed imports, may start its
BLAS library's threads, which that library stops around a fork, as it does for every
``multiprocessing`` fork and for the gang task's own forks of its nannies. Nothing that
holds random state is preloaded (``numpy.random``, which a Dask worker imports, would
give every forked Python worker the same global generator; Python's ``random`` reseeds
itself after a fork).
"""

from __future__ import annotations

import gc
import importlib

from distributed.versions import get_versions

MODULE = "spark_dask.spark.daemon"
CONF = "spark.python.daemon.module"

# What a gang task and its forked nannies and workers import, beyond the standard library
# (spark_dask.executor's imports inside the task; the task's own code comes by value).
PRELOADED = (
    "pyspark.worker",
    "distributed",
    "distributed.nanny",
    "distributed.worker",
    "distributed.comm.tcp",
    "distributed.security",
    "distributed.cli.dask_worker",
)
# Imported where their own dependencies are installed: a Dask worker's HTTP routes
# (prometheus_client), NVML on GPU executors.
OPTIONAL = (
    "distributed.http.worker.prometheus",
    "distributed.http.health",
    "distributed.http.statics",
    "pynvml",
)


def preload(modules=PRELOADED, optional=OPTIONAL) -> list[str]:
    """Import ``modules``, then those of ``optional`` that can be; the names imported."""
    for name in modules:
        importlib.import_module(name)
    loaded = list(modules)
    for name in optional:
        try:
            importlib.import_module(name)
        except ImportError:
            continue
        loaded.append(name)
    return loaded


def main() -> None:
    """Preload, freeze, then run PySpark's daemon (which never returns)."""
    preload()
    # Each Dask worker sends the scheduler its packages' versions when it registers;
    # distributed caches them per process, so asking once here spares every forked
    # worker the scan of the installed packages' metadata (about 10 ms).
    get_versions()
    gc.collect()
    gc.freeze()
    from pyspark import daemon  # here: the package (the doctor reads CONF) imports without pyspark

    daemon.manager()


if __name__ == "__main__":
    main()
