"""Read what the driver needs to know from a SparkSession (classic or Spark Connect).

Everything here is a read: no job is submitted. :func:`cluster_facts` turns the
session into a :class:`~spark_dask.plan.ClusterFacts` for the pure planning code.
"""

from __future__ import annotations

import re
import socket
import time

from spark_dask.plan import ClusterFacts, PlanError

_LOCAL_CLUSTER = re.compile(r"local-cluster\[\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*\]")


def active_session(spark=None):
    """``spark`` or the active SparkSession, looked up now (never at import)."""
    if spark is not None:
        return spark
    from pyspark.sql import SparkSession

    spark = SparkSession.getActiveSession()
    if spark is None:
        raise PlanError(
            "no active SparkSession: pass one, e.g. spark_dask.start(spark), or create it "
            "first with SparkSession.builder.getOrCreate()"
        )
    return spark


def is_connect(spark) -> bool:
    """Whether ``spark`` is a Spark Connect session (no SparkContext, no RDDs)."""
    try:
        from pyspark.sql.connect.session import SparkSession as ConnectSession
    except ImportError:  # pyspark without the connect extra
        return False
    return isinstance(spark, ConnectSession)


def spark_version(spark) -> tuple[int, int]:
    major, minor = (spark.version.split(".") + ["0"])[:2]
    return int(major), int(re.sub(r"\D.*", "", minor) or 0)


def is_stopped(spark) -> bool:
    """Whether the session's SparkContext has been stopped (classic only)."""
    if is_connect(spark):
        return bool(getattr(spark, "is_stopped", False))
    sc = spark.sparkContext
    jsc = getattr(sc, "_jsc", None)
    if jsc is None:
        return True
    try:
        return bool(jsc.sc().isStopped())
    except Exception:  # py4j gateway gone
        return True


def conf(spark, key: str, default: str | None = None) -> str | None:
    """A Spark conf value, static confs included."""
    if is_connect(spark):
        try:
            value = spark.conf.get(key, default)
        except Exception:
            return default
        return default if value is None else value
    return spark.sparkContext.getConf().get(key, default)


def _executor_ids(sc) -> list[str]:
    ids = sc._jsc.sc().getExecutorIds().mkString(",")
    return [i for i in ids.split(",") if i and i != "driver"]


def _expected_executors(spark) -> int | None:
    m = _LOCAL_CLUSTER.search(conf(spark, "spark.master", "") or "")
    if m:
        return int(m.group(1))
    n = conf(spark, "spark.executor.instances")
    return int(n) if n and n.isdigit() else None


def wait_for_executors(spark, timeout: float) -> list[str]:
    """Executor ids once the expected number registered (or ``timeout`` passed).

    Right after a session starts, executors may not have joined yet and Spark would
    report zero free slots.
    """
    sc = spark.sparkContext
    want = _expected_executors(spark)
    deadline = time.monotonic() + timeout
    ids = _executor_ids(sc)
    while time.monotonic() < deadline:
        if ids and (want is None or len(ids) >= want):
            break
        time.sleep(0.1)
        ids = _executor_ids(sc)
    return ids


def _memory(value: str | None, default: str = "1g") -> int:
    """JVM memory string ("4g", "512m", "2gb") to bytes; a bare number is MiB, as in Spark."""
    text = (value or default).strip().lower()
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([kmgtp]?)(b?)", text)
    if not m:
        raise PlanError(f"cannot read the Spark memory setting {text!r}")
    number, unit, b = m.groups()
    if not unit:
        return int(float(number)) if b else int(float(number) * 2**20)
    return int(float(number) * 1024 ** ("kmgtp".index(unit) + 1))


def _float(value: str | None) -> float:
    try:
        return float(value) if value is not None else 0.0
    except ValueError:
        return 0.0


def executor_memory(spark, master: str) -> int:
    """Bytes one executor JVM takes on its host (heap, overhead, PySpark memory)."""
    m = _LOCAL_CLUSTER.search(master)
    heap = int(m.group(3)) * 2**20 if m else _memory(conf(spark, "spark.executor.memory"))
    overhead = conf(spark, "spark.executor.memoryOverhead")
    if overhead:
        extra = _memory(overhead)
    elif master.startswith(("yarn", "k8s")):
        extra = max(384 * 2**20, int(heap * _float(conf(spark, "spark.executor.memoryOverheadFactor") or "0.1")))
    else:
        extra = 0
    pyspark_mem = conf(spark, "spark.executor.pyspark.memory")
    return heap + extra + (_memory(pyspark_mem) if pyspark_mem else 0)


def cluster_facts(spark, executor_wait: float = 30.0) -> ClusterFacts:
    """What the planner needs, read from the session. Classic sessions only."""
    if is_stopped(spark):
        raise PlanError("the SparkSession is stopped; create a new one before starting a Dask cluster")
    sc = spark.sparkContext
    master = sc.master
    dyn = (conf(spark, "spark.dynamicAllocation.enabled", "false") or "").lower() == "true"
    ids = [] if dyn else wait_for_executors(spark, executor_wait)
    jsc = sc._jsc.sc()
    if master.startswith("local") and not master.startswith("local-cluster"):
        ids = ids or ["driver"]  # local[N]: the driver runs the tasks
    task_cpus = int(conf(spark, "spark.task.cpus", "1") or 1)
    slots = int(jsc.maxNumConcurrentTasks(jsc.resourceProfileManager().defaultResourceProfile()))
    m = _LOCAL_CLUSTER.search(master)
    cores = conf(spark, "spark.executor.cores")
    if cores:
        executor_cores = int(cores)
    elif m:
        executor_cores = int(m.group(2))
    else:
        executor_cores = max(task_cpus, slots * task_cpus // max(len(ids), 1))
    major_minor = spark_version(spark)
    local_mode = master.startswith("local") and not master.startswith("local-cluster")
    return ClusterFacts(
        executors=len(ids),
        executor_cores=executor_cores,
        executor_memory=executor_memory(spark, master),
        executor_gpus=_float(conf(spark, "spark.executor.resource.gpu.amount")),
        task_cpus=task_cpus,
        task_gpus=_float(conf(spark, "spark.task.resource.gpu.amount")),
        slots=slots,
        dynamic_allocation=dyn,
        task_profiles=major_minor >= (3, 4) and not local_mode and not dyn,
        master=master,
    )


def spark_encrypted(spark) -> bool:
    """Whether Spark encrypts its RPC (which carries the task closures to executors)."""
    return any(
        (conf(spark, key, "false") or "").lower() == "true"
        for key in ("spark.network.crypto.enabled", "spark.ssl.enabled", "spark.ssl.rpc.enabled")
    )


def driver_host(spark) -> tuple[str, str]:
    """(address to listen on, address executors use to reach it) on the driver."""
    host = conf(spark, "spark.driver.host") or socket.gethostname()
    bind = conf(spark, "spark.driver.bindAddress") or host
    return bind, host
