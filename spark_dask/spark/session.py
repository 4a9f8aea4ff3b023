"""Read what the driver needs to know from a SparkSession (classic or Spark Connect).

Everything here is a read: no job is submitted. :func:`cluster_facts` turns the
session into a :class:`~spark_dask.capacity.ClusterFacts` for the pure planning code.
"""

from __future__ import annotations

import json
import logging
import os
import re
import socket
import threading
import time

from spark_dask import executor
from spark_dask.capacity import ClusterFacts
from spark_dask.errors import PlanError
from spark_dask.executor import gang_task
from spark_dask.rapids import plugin_enabled
from spark_dask.sizes import MIB, parse_size
from spark_dask.spark import databricks, jobtags
from spark_dask.spark.compat import task_profile_shares_gpus, task_profiles_supported
from spark_dask.spark.conf import application_id, conf, is_connect
from spark_dask.spark.pyspark_warnings import pandas3_warning_off
from spark_dask.spark.shipping import ship_by_value

__all__ = [
    "PYSPARK_MISSING",
    "active_session",
    "application_id",
    "cluster_facts",
    "conf",
    "connect_facts",
    "connect_server_host",
    "connect_session_problem",
    "container_room",
    "driver_host",
    "executors_by_host",
    "collect_within",
    "executor_ids",
    "executor_memory",
    "is_connect",
    "is_stopped",
    "max_executors",
    "pyspark_memory",
    "require_pyspark",
    "route_ip",
    "spark_encrypted",
    "wait_for_executors",
]

logger = logging.getLogger("spark_dask")

# masters whose executors run in containers with a memory limit: the Dask workers of an
# executor live in its container (container_room)
CONTAINER_MASTERS = ("yarn", "k8s")
_LOCAL_CLUSTER = re.compile(r"local-cluster\[\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*\]")
_LOCAL = re.compile(r"local(?:\[\s*(\d+|\*)\s*(?:,\s*\d+\s*)?\])?$")

# Spark Connect sessions whose executors the probe job has seen (by session id).
_probed_sessions: set[str] = set()
_probe_lock = threading.Lock()
# Seconds a probe job may run even when less of the probe's time is left (its tasks
# sleep 0.3 s: where the executors are there it ends in about a second).
PROBE_JOB_WAIT = 5.0


PYSPARK_MISSING = (
    "spark-dask needs pyspark, which this Python cannot import ({error}). On Databricks, "
    "use a cluster with a Databricks Runtime (pyspark is built in; do not pip-install "
    "pyspark there). Elsewhere: pip install 'spark-dask[spark]' (or 'spark-dask[connect]' "
    "for Spark Connect)."
)


def require_pyspark() -> None:
    """Raise a short, actionable ImportError when pyspark cannot be imported.

    pyspark is not a dependency of the package (Databricks runtimes ship their own,
    unknown to pip), so a plain install may lack it.
    """
    try:
        import pyspark  # noqa: F401
    except ImportError as e:
        raise ImportError(PYSPARK_MISSING.format(error=e), name="pyspark") from None


def active_session(spark=None):
    """``spark`` or the active SparkSession, looked up now (never at import)."""
    require_pyspark()
    if spark is not None:
        return spark
    from pyspark.sql import SparkSession

    spark = SparkSession.getActiveSession()
    if spark is None:
        raise PlanError(
            "spark-dask: no active SparkSession: pass one, e.g. spark_dask.start(spark), or create it "
            "first with SparkSession.builder.getOrCreate()"
        )
    return spark


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
    except Exception:  # py4j gateway gone  # noqa: BLE001
        return True


def executor_ids(sc) -> list[str]:
    """The ids of the executors registered now (classic sessions)."""
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
    ids = executor_ids(sc)
    while time.monotonic() < deadline:
        if ids and (want is None or len(ids) >= want):
            break
        time.sleep(0.1)
        ids = executor_ids(sc)
    return ids


def release_local_executors(spark) -> bool:
    """At the interpreter's exit, on a ``local-cluster[...]`` master whose context still
    runs (classic, no dynamic allocation): ask Spark for no executors. True when it did.

    local-cluster's Master and Workers live in the driver's JVM. When that JVM shuts
    down, the Workers' shutdown hooks kill the executors before the SparkContext's hook
    unregisters the application, and the Master relaunches them into a JVM that refuses
    new shutdown hooks: some 10-20 ``ERROR Worker: Failed to launch executor ...
    Shutdown hooks cannot be modified during shutdown`` per exit, with plain PySpark
    too. ``SparkContext.killExecutors`` lowers the application's executor limit at the
    Master to none first (it returns once the Master has it), so nothing is relaunched."""
    if is_connect(spark) or is_stopped(spark):
        return False
    if not _LOCAL_CLUSTER.search(conf(spark, "spark.master", "") or ""):
        return False
    if (conf(spark, "spark.dynamicAllocation.enabled", "false") or "").lower() == "true":
        return False  # killExecutors() refuses under dynamic allocation
    sc = spark.sparkContext
    # the in-process Master then says "Got status update for unknown executor" for each
    # executor it let go: its own WARN lines, at the exit only
    log4j = sc._jvm.org.apache.logging.log4j
    log4j.core.config.Configurator.setLevel("org.apache.spark.deploy.master.Master", log4j.Level.ERROR)
    jsc = sc._jsc.sc()
    jsc.killExecutors(jsc.getExecutorIds())
    return True


def _memory(value: str | None, default: str = "1g") -> int:
    """JVM memory string ("4g", "512m", "2gb") to bytes; a bare number is MiB, as in Spark."""
    text = (value or default).strip().lower()
    try:
        return parse_size(text, MIB, binary=True)
    except ValueError:
        raise PlanError(f"spark-dask: cannot read the Spark memory setting {text!r}") from None


def _float(value: str | None) -> float:
    try:
        return float(value) if value is not None else 0.0
    except ValueError:
        return 0.0


def executor_memory(spark, master: str) -> int:
    """Bytes one executor JVM takes on its host (heap, overhead, PySpark memory)."""
    if _LOCAL.match(master):  # local[N]: the driver JVM runs the tasks
        return _memory(conf(spark, "spark.driver.memory"))
    heap, extra = _heap_and_overhead(spark, master)
    return heap + extra + pyspark_memory(spark)


def pyspark_memory(spark) -> int:
    """``spark.executor.pyspark.memory`` in bytes; 0 when unset."""
    value = conf(spark, "spark.executor.pyspark.memory")
    return _memory(value) if value else 0


def _heap_and_overhead(spark, master: str) -> tuple[int, int]:
    """An executor's heap and memory overhead in bytes: ``spark.executor.memoryOverhead``,
    or on YARN and Kubernetes Spark's default, ``memoryOverheadFactor`` (0.1) of the
    heap and at least ``spark.executor.minMemoryOverhead`` (384 MiB); 0 elsewhere."""
    m = _LOCAL_CLUSTER.search(master)
    heap = int(m.group(3)) * 2**20 if m else _memory(conf(spark, "spark.executor.memory"))
    overhead = conf(spark, "spark.executor.memoryOverhead")
    if overhead:
        return heap, _memory(overhead)
    if master.startswith(CONTAINER_MASTERS):
        return heap, _default_overhead(spark, heap)
    return heap, 0


def _default_overhead(spark, heap: int) -> int:
    """Spark's memory overhead of an executor whose ``memoryOverhead`` is unset."""
    factor = _float(conf(spark, "spark.executor.memoryOverheadFactor") or "0.1")
    return max(_memory(conf(spark, "spark.executor.minMemoryOverhead"), "384m"), int(heap * factor))


def container_room(spark, master: str) -> int | None:
    """Bytes an executor's container holds for the Dask workers, where the master runs
    executors in containers with a memory limit (YARN, Kubernetes); None elsewhere.

    Spark sizes the container as heap + memory overhead + ``spark.executor.pyspark.memory``
    (Spark's "Running on YARN" and "Running on Kubernetes" pages: the overhead is for
    "other non-executor processes running in the same container"). Its default overhead
    (10 % of the heap, at least 384 MiB) is what the JVM's native memory and PySpark's
    Python workers need: the Dask workers get what ``spark.executor.memoryOverhead``
    adds beyond it. Not ``spark.executor.pyspark.memory``: PySpark sets it as the
    address-space limit of each Python worker, which the Dask workers a task starts
    inherit (:func:`spark_dask.executor.sizing.pyspark_memory_advice`).
    """
    if not master.startswith(CONTAINER_MASTERS):
        return None
    heap, overhead = _heap_and_overhead(spark, master)
    return max(0, overhead - _default_overhead(spark, heap))


def cluster_facts(spark, executor_wait: float = 30.0, n_workers: int | None = None) -> ClusterFacts:
    """What the planner needs, read from the session (classic or Spark Connect).

    Parameters
    ----------
    spark : SparkSession
        Classic or Spark Connect session.
    executor_wait : float
        Seconds to wait for the expected executors to register.
    n_workers : int, optional
        The requested number of workers; Spark Connect sessions whose executors cannot
        be counted need it.
    """
    if is_stopped(spark):
        raise PlanError("spark-dask: the SparkSession is stopped; create a new one before starting a Dask cluster")
    if is_connect(spark):
        return connect_facts(spark, executor_wait, n_workers)
    sc = spark.sparkContext
    master = sc.master
    dyn = (conf(spark, "spark.dynamicAllocation.enabled", "false") or "").lower() == "true"
    local_mode = master.startswith("local") and not master.startswith("local-cluster")
    if local_mode:
        ids = ["driver"]  # local[N]: the driver runs the tasks; there is nothing to wait for
    elif dyn:
        ids = executor_ids(sc)  # those present now; Spark adds more for waiting tasks
    else:
        ids = wait_for_executors(spark, executor_wait)
    jsc = sc._jsc.sc()
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
    gpus = _float(conf(spark, "spark.executor.resource.gpu.amount"))
    profiles = task_profiles_supported(spark) and not dyn
    if profiles and task_profile_shares_gpus(spark):
        logger.info(
            "spark-dask: Spark %s hands a task profile's whole GPUs out in the default "
            "profile's fractions (SPARK-45527, fixed in 4.0): no task profile for the gang",
            spark.version,
        )
        profiles = False
    hosts, addresses = ((), ()) if local_mode else executors_by_host(sc, bool(gpus))
    return _facts(
        spark,
        master,
        executors=len(ids),
        executor_cores=executor_cores,
        task_cpus=task_cpus,
        slots=slots,
        dynamic_allocation=dyn,
        task_profiles=profiles,
        gpu_addresses=addresses,
        executor_hosts=hosts,
    )


def executors_by_host(sc, gpus: bool) -> tuple[tuple, tuple]:
    """``(hosts, gpu_addresses)`` of every registered executor, in one walk of the
    application status store (``ExecutorSummary``): ``hosts`` the host of each executor
    (sorted, once per executor: the same host names as the barrier tasks see);
    ``gpu_addresses`` ``((host, executor id, (gpu addresses...)), ...)``, the GPUs each
    executor registered with (``ExecutorSummary.resources``), read only where ``gpus``.
    The host and the executor id, not the status store's ``hostPort``: that is the block
    manager's port, not the executor address that barrier tasks see
    (``BarrierTaskContext.getTaskInfos``); a task finds its executor's id itself
    (:func:`spark_dask.executor.task_context.executor_id`). Both empty when
    the store cannot be read (an older or different JVM: the tasks count the gang's
    executors, and number the GPUs 0..n-1)."""
    hosts, addresses = [], []
    try:
        it = sc._jsc.sc().statusStore().executorList(True).iterator()
        while it.hasNext():
            summary = it.next()
            if summary.id() == "driver":
                continue
            host = str(summary.hostPort()).rsplit(":", 1)[0]
            hosts.append(host)
            resources = summary.resources() if gpus else None
            if resources is not None and resources.contains("gpu"):
                gpus_of = tuple(str(a) for a in resources.apply("gpu").addresses())
                addresses.append((host, str(summary.id()), gpus_of))
    except Exception as e:  # noqa: BLE001 - any Py4J error: what the store holds is unknown
        logger.debug("spark-dask: the executors' hosts and GPUs are unavailable: %s", e)
        return (), ()
    return tuple(sorted(hosts)), tuple(sorted(addresses))


def _facts(spark, master: str, **known) -> ClusterFacts:
    """ClusterFacts from what the caller counted plus the confs both paths read alike."""
    if known.get("dynamic_allocation"):
        known["max_executors"] = max_executors(spark)
    return ClusterFacts(
        executor_memory=executor_memory(spark, master),
        container_room=container_room(spark, master or ""),
        pyspark_memory=pyspark_memory(spark),
        executor_gpus=_float(conf(spark, "spark.executor.resource.gpu.amount")),
        task_gpus=_float(conf(spark, "spark.task.resource.gpu.amount")),
        master=master or "spark connect",
        rapids_plugin=plugin_enabled(conf(spark, "spark.plugins")),
        **known,
    )


def max_executors(spark) -> int | None:
    """``spark.dynamicAllocation.maxExecutors``; None when unset (Spark's default is
    Int.MaxValue, i.e. unbounded) or unreadable."""
    raw = (conf(spark, "spark.dynamicAllocation.maxExecutors") or "").strip()
    if not raw.isdigit() or int(raw) >= 2**31 - 1:
        return None
    return int(raw)


def spark_encrypted(spark) -> bool:
    """Whether Spark encrypts its RPC (which carries the task closures to executors)."""
    return any(
        (conf(spark, key, "false") or "").lower() == "true"
        for key in ("spark.network.crypto.enabled", "spark.ssl.enabled", "spark.ssl.rpc.enabled")
    )


def _probe_executors(spark, want: int, tasks: int, timeout: float) -> int:
    """Run short non-barrier jobs until ``want`` executors answered (or ``timeout``).

    Spark Connect has no way to list executors. Right after a session starts they may
    not have registered yet, and a barrier stage submitted then waits in Spark's slot
    check (15 s steps). Returns how many distinct executors answered.
    """
    ship_by_value(*executor.SHIPPED)
    fn = gang_task.probe_partition(0.3)
    seen: set[str] = set()
    rounds = 0
    deadline = time.monotonic() + timeout
    while True:
        wait = max(deadline - time.monotonic(), PROBE_JOB_WAIT)
        rows = collect_within(spark, fn, tasks, wait, "spark-dask: executor probe")
        if rows is None:
            logger.warning(
                "spark-dask: the executor probe job (Spark Connect) did not end within %gs: cancelled, "
                "%d of %d executors seen",
                wait,
                len(seen),
                want,
            )
            return len(seen)
        seen.update(json.loads(r["info"])["executor_id"] for r in rows)
        rounds += 1
        if len(seen) >= want or time.monotonic() >= deadline:
            logger.debug("spark-dask: probe saw %d/%d executors in %d jobs", len(seen), want, rounds)
            return len(seen)


def collect_within(spark, fn, tasks: int, wait: float, description: str) -> list | None:
    """The rows of a short job of ``tasks`` tasks, each running ``fn`` (``mapInArrow``
    to one ``info`` string column: classic and Spark Connect sessions); None when it did
    not end within ``wait`` seconds (it is then cancelled). The ``collect()`` runs in a
    thread of its own, which this one waits for: a job whose tasks get no slot would
    block it for good."""
    tag = f"spark-dask-probe-{time.monotonic_ns()}"
    out: dict = {}

    def run():
        try:
            with pandas3_warning_off():  # pyspark readies its pandas conversion for it: Arrow here, not pandas
                job = spark.range(0, tasks, 1, tasks).mapInArrow(fn, "info string")
            with jobtags.tagged(spark, tag, description):  # thread-local: this thread submits
                out["rows"] = job.collect()
        except BaseException as e:  # noqa: BLE001 - raised in the caller's thread
            out["error"] = e

    thread = threading.Thread(target=run, name=tag, daemon=True)
    thread.start()
    thread.join(wait)
    if thread.is_alive():
        jobtags.cancel(spark, tag)
        return None
    if "error" in out:
        raise out["error"]
    return out["rows"]


def connect_facts(spark, executor_wait: float = 30.0, n_workers: int | None = None) -> ClusterFacts:
    """:func:`cluster_facts` for a Spark Connect session (no SparkContext, no JVM access).

    The executors are counted from ``spark.master`` (``local-cluster[N,C,M]``,
    ``local[N]``) or ``spark.executor.instances``; ``spark.executor.cores`` gives their
    size. On the first start in a session a short probe job waits until that many
    executors have registered. When the session does not tell how many executors
    there are (e.g. Databricks serverless) the request must say ``n_workers``, and the
    free task slots are not checked in advance.
    """
    master = conf(spark, "spark.master", "") or ""
    dyn = (conf(spark, "spark.dynamicAllocation.enabled", "false") or "").lower() == "true"
    task_cpus = int(conf(spark, "spark.task.cpus", "1") or 1)
    cluster = _LOCAL_CLUSTER.search(master)
    local = _LOCAL.match(master)
    cores = conf(spark, "spark.executor.cores")
    if cores and cores.isdigit():
        executor_cores = int(cores)
    elif cluster:
        executor_cores = int(cluster.group(2))
    elif local:
        n = local.group(1) or "1"
        executor_cores = (os.cpu_count() or 1) if n == "*" else int(n)
    else:
        executor_cores = 0  # unknown
    if local:
        want = 1  # local[N]: the driver runs the tasks
    else:
        want = _expected_executors(spark)
    if want is None:
        if n_workers is None and not dyn:
            raise PlanError(
                "spark-dask: cannot count the executors of this Spark Connect session "
                f"(spark.master is {master or 'not readable'!r} and spark.executor.instances "
                "is not set): pass n_workers=<number of Dask workers>, one Spark task slot "
                "each, at most the free task slots of the cluster"
            )
        executors = n_workers or 1
    else:
        executors = want
        if not dyn and not local:
            sid = str(getattr(spark, "session_id", id(spark)))
            with _probe_lock:
                if sid not in _probed_sessions:
                    slots = executors * max(executor_cores // task_cpus, 1)
                    if _probe_executors(spark, want, slots, executor_wait) >= want:
                        _probed_sessions.add(sid)
    known = want is not None and executor_cores > 0
    slots = executors * (executor_cores // task_cpus) if known else None
    return _facts(
        spark,
        master,
        executors=executors,
        executor_cores=executor_cores,
        task_cpus=task_cpus,
        slots=slots,
        dynamic_allocation=dyn,
        task_profiles=task_profiles_supported(spark) and known and not dyn,
    )


def connect_session_problem(spark, scheduler_host: str | None = None) -> str | None:
    """Why this Spark Connect session cannot run a Dask cluster (Databricks standard
    access mode, serverless, Databricks Connect from outside), or None."""
    server = connect_server_host(spark)
    if not os.environ.get(databricks.RUNTIME_ENV) and not databricks.is_workspace_host(server):
        return None  # open-source Spark Connect: nothing to ask the server
    try:
        spark.conf.get(databricks.CLUSTER_ID, None)
        available = True
    except Exception:  # CONFIG_NOT_AVAILABLE on serverless  # noqa: BLE001
        available = False
    return databricks.connect_problem(os.environ, server, available, scheduler_host)


def connect_server_host(spark) -> str | None:
    """Host name of the Spark Connect server this session talks to, if it tells."""
    try:
        return spark.client.host
    except Exception:  # noqa: BLE001
        return None


def route_ip(host: str, port: int = 15002) -> str | None:
    """The local address of the interface that routes to ``host`` (no packet is sent).

    Connecting a UDP socket only picks the route; nothing goes on the wire.
    """
    try:
        family, _, _, _, sockaddr = socket.getaddrinfo(host, port, type=socket.SOCK_DGRAM)[0]
        with socket.socket(family, socket.SOCK_DGRAM) as s:
            s.connect(sockaddr)
            return s.getsockname()[0]
    except OSError:
        return None


def _is_this_machine(host: str) -> bool:
    if host in ("localhost", "127.0.0.1", "::1", "[::1]") or host.startswith("127."):
        return True
    return host in (socket.gethostname(), socket.getfqdn())


def driver_host(spark, scheduler_host: str | None = None) -> tuple[str, str]:
    """(address to listen on, address executors use to reach it) for the scheduler.

    Classic: the Spark driver's address. Spark Connect: the scheduler runs in this
    Python process, which is not the Spark driver: with a server on this machine
    (``remote("local...")``, ``sc://localhost``) the driver's address is this machine's;
    with a remote server, the address of the interface that routes to it.
    ``scheduler_host`` (option ``scheduler_host=``) overrides both.
    """
    if scheduler_host:
        return scheduler_host, scheduler_host
    if is_connect(spark):
        server = connect_server_host(spark)
        if server is None or _is_this_machine(server) or os.environ.get("SPARK_LOCAL_REMOTE"):
            host = conf(spark, "spark.driver.host") or socket.gethostname()
            return host, host
        host = route_ip(server) or socket.gethostbyname(socket.gethostname())
        return host, host
    host = conf(spark, "spark.driver.host") or socket.gethostname()
    bind = conf(spark, "spark.driver.bindAddress") or host
    return bind, host
