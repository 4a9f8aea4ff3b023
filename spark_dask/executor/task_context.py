"""Where a Spark task of a gang runs and what it tells the others: its Spark context
(:func:`barrier_context`, a stand-in where the runtime gives no barrier context), its
facts (:func:`task_facts`: executor, host, GPUs, CPUs, Python), the gang's without a
barrier round (:func:`gang_from_task_infos`), the executor's id (:func:`executor_id`)
and whether the scheduler can be reached from here (:func:`reach_error`).

Shipped by value with the task code (:mod:`spark_dask.executor`): ``pyspark`` is
imported where the context is read, inside the task.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import shutil
import socket
import sys
import tempfile

from spark_dask.errors import WorkerStartError
from spark_dask.executor.command import scheduler_endpoint
from spark_dask.executor.placement import physical_gpu
from spark_dask.executor.processes import write_private
from spark_dask.executor.task_spec import TaskSpec


def executor_id() -> str | None:
    """The executor id, as the driver's status store names the executor: from what the
    cluster manager puts in the executor's env (Kubernetes, standalone), else from the
    executor JVM's command line (:func:`jvm_executor_id`: YARN, whose env has only the
    container's id), else YARN's container id."""
    if os.environ.get("SPARK_EXECUTOR_ID"):  # Kubernetes
        return os.environ["SPARK_EXECUTOR_ID"]
    for key in ("SPARK_LOG_URL_STDERR", "SPARK_LOG_URL_STDOUT"):  # standalone
        url = os.environ.get(key, "")
        if "executorId=" in url:
            return url.split("executorId=", 1)[1].split("&", 1)[0]
    return jvm_executor_id() or os.environ.get("CONTAINER_ID")  # YARN


def executor_id_argument(argv: list[str]) -> str | None:
    """The value of ``--executor-id`` in a command line (an executor JVM's), else None.

    >>> executor_id_argument(["java", "org.apache.spark.executor.YarnCoarseGrainedExecutorBackend",
    ...                       "--driver-url", "spark://d:1", "--executor-id", "7", "--hostname", "h"])
    '7'
    >>> executor_id_argument(["python3", "-m", "pyspark.daemon"]) is None
    True
    """
    if "--executor-id" not in argv:
        return None
    i = argv.index("--executor-id") + 1
    return (argv[i] or None) if i < len(argv) else None


def jvm_executor_id(depth: int = 6) -> str | None:
    """The ``--executor-id`` of the executor JVM this Python worker runs under (every
    cluster manager starts the executor's backend with it), read from the command lines
    of this process's ancestors in ``/proc`` (the PySpark daemon's parent); None off
    Linux, or where no ancestor within ``depth`` has one."""
    pid = os.getpid()
    for _ in range(depth):
        try:
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])  # the parent's pid
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().decode(errors="replace").split("\0")
        except (OSError, ValueError, IndexError):
            return None
        found = executor_id_argument(argv)
        if found or pid <= 1:
            return found
    return None


def reach_error(address: str, timeout: float, tls: dict | None = None) -> str | None:
    """Open (and close) a connection to the scheduler; the error text, or None.

    Run by every task before it starts a worker, so that a scheduler the executors
    cannot reach (a client outside the cluster's network, a firewall) is reported
    within seconds instead of as a worker that never connects. With ``tls`` (PEM
    texts ``ca``, ``cert``, ``key``) the TLS handshake is done too, so the scheduler
    sees a well-formed connection and logs no handshake warning.
    """
    try:
        host, port = scheduler_endpoint(address)
    except ValueError:  # inproc:// or a custom comm: nothing to check
        return None
    tmp = tempfile.mkdtemp(prefix="spark-dask-reach-") if tls else None
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            if tls:
                import ssl

                ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
                ctx.check_hostname = False  # Dask's TLS authenticates by certificate, not name
                ctx.load_verify_locations(cadata=tls["ca"])
                ctx.load_cert_chain(
                    write_private(os.path.join(tmp, "cert.pem"), tls["cert"]),
                    write_private(os.path.join(tmp, "key.pem"), tls["key"]),
                )
                with ctx.wrap_socket(sock):
                    pass
        return None
    except TimeoutError:
        return f"no answer within {timeout:g}s (timed out)"
    except OSError as e:
        return f"{type(e).__name__}: {e.strerror or e}"
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)


class _PlainContext:
    """Stands in for the ``BarrierTaskContext`` of a barrier task whose Python worker was
    handed a plain ``TaskContext``.

    Seen on Databricks Runtime 14.3 in a barrier ``mapInArrow``/``mapInPandas``:
    ``TaskContext.get()`` is not a ``BarrierTaskContext`` there (NVIDIA spark-rapids
    PR 12456, issue 12477), so ``BarrierTaskContext.get()`` raises. What a plain context
    has still works (partition id, resources, CPUs); where every task's executor is
    unknown (no ``getTaskInfos()``), ``gang_from_task_infos`` leaves it unknown, and the
    one call that cannot be replaced, ``allGather``, raises a clear error.
    """

    def __init__(self, ctx, reason: str):
        self._ctx = ctx
        self.reason = reason
        self.n_tasks: int | None = None  # set by task_facts from the spec

    def partitionId(self) -> int:
        return self._ctx.partitionId()

    def resources(self) -> dict:
        return self._ctx.resources()

    def cpus(self) -> int:
        return self._ctx.cpus()

    def attemptNumber(self) -> int:
        return self._ctx.attemptNumber()

    def getTaskInfos(self):
        raise RuntimeError(f"no BarrierTaskContext: {self.reason}")

    def allGather(self, message: str = ""):
        raise WorkerStartError(
            "spark-dask: the Spark tasks share GPUs (fractional spark.task.resource.gpu.amount) "
            "and must agree which task starts which worker (BarrierTaskContext.allGather), but "
            "this Spark runtime gave the barrier task no BarrierTaskContext "
            f"({self.reason}). Give each task whole GPUs (spark.task.resource.gpu.amount=1)."
        )


PLAIN_JOB = "a plain Spark job (dynamic allocation: no barrier stage)"


def barrier_context(barrier: bool = True):
    """This barrier task's context: the ``BarrierTaskContext``, or a :class:`_PlainContext`
    around the plain ``TaskContext`` where the runtime hands the Python worker no barrier
    context (Databricks Runtime 14.3, barrier ``mapInArrow``), or where the task is a
    plain Spark job (``barrier=False``: a gang of one task under dynamic allocation)."""
    from pyspark import BarrierTaskContext, TaskContext

    if not barrier:
        plain = TaskContext.get()
        if plain is None:
            raise WorkerStartError("spark-dask: no Spark task context in this Python worker")
        return _PlainContext(plain, PLAIN_JOB)
    try:
        ctx = BarrierTaskContext.get()
    except Exception as e:  # NOT_IN_BARRIER_STAGE (PySparkRuntimeError) or older texts  # noqa: BLE001
        reason = f"{type(e).__name__}: {e}".splitlines()[0]
    else:
        if hasattr(ctx, "allGather") and hasattr(ctx, "getTaskInfos"):
            return ctx
        reason = f"BarrierTaskContext.get() returned {type(ctx).__name__}"
    plain = TaskContext.get()
    if plain is None:
        raise WorkerStartError(f"spark-dask: no Spark task context in this Python worker ({reason})")
    return _PlainContext(plain, reason)


def _fallback_host() -> str:
    """This executor's host when no task infos say it: Spark's own setting, else the
    address the host name resolves to, else the host name."""
    if os.environ.get("SPARK_LOCAL_IP"):
        return os.environ["SPARK_LOCAL_IP"]
    name = socket.gethostname()
    try:
        return socket.gethostbyname(name)
    except OSError:
        return name


def task_facts(ctx, spec: TaskSpec) -> dict:
    """What this task tells the rest of the gang (through ``allGather``)."""
    partition = ctx.partitionId()
    context_note = None
    try:
        address = ctx.getTaskInfos()[partition].address
    except Exception as e:  # no BarrierTaskContext (see _PlainContext)  # noqa: BLE001
        # "host:executor": unique per executor like the host:port of getTaskInfos; the
        # parent of a PySpark worker is its executor's daemon.
        address = f"{_fallback_host()}:{executor_id() or os.getppid()}"
        if spec.barrier:
            context_note = f"no barrier task infos ({e}); executor address from this host"
        try:  # how many tasks the gang has, for gang_from_task_infos
            ctx.n_tasks = int(spec.n_workers) // max(int(spec.workers_per_task), 1)
        except (AttributeError, TypeError, ValueError):
            pass
    resources = ctx.resources()
    gpus = list(resources["gpu"].addresses) if "gpu" in resources else []
    cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
    missing = [m for m in spec.requires if importlib.util.find_spec(m) is None]
    try:
        dist_version = importlib.metadata.version("distributed")
    except importlib.metadata.PackageNotFoundError:
        dist_version = None
    try:
        attempt = int(ctx.attemptNumber())
    except Exception:  # a stand-in context without attempts  # noqa: BLE001
        attempt = 0
    facts = {
        "partition": partition,
        "gang": int(spec.gang),
        "group": spec.group,
        "task": int(spec.name_base) + partition,  # the task's number in the cluster
        "attempt": attempt,
        "executor": address,
        "host": address.rsplit(":", 1)[0],
        "executor_id": executor_id(),
        "gpus": [physical_gpu(a, cvd) for a in gpus],
        "spark_gpus": gpus,  # as Spark named them (before CUDA_VISIBLE_DEVICES)
        "cpus": ctx.cpus(),
        "python": sys.executable,
        "missing": missing,
        "distributed": dist_version,
    }
    if context_note:
        facts["context"] = context_note
    return facts


def gang_from_task_infos(ctx, me: dict) -> list[dict]:
    """Where every task of the stage runs, without a barrier round.

    ``getTaskInfos()`` knows every task's executor address when the stage starts;
    ``allGather`` costs about a second (Spark polls it once a second), which is only
    worth paying when tasks may share GPUs and must agree who uses which.

    Without a ``BarrierTaskContext`` (:class:`_PlainContext`) the other tasks' executors
    are unknown (``None``): each task then sizes its workers as if no other gang task
    shared its executor or host.
    """
    try:
        addresses = [info.address for info in ctx.getTaskInfos()]
    except Exception:  # noqa: BLE001
        n = getattr(ctx, "n_tasks", None) or me["partition"] + 1
        addresses = [None] * max(n, me["partition"] + 1)
    gang = []
    for partition, address in enumerate(addresses):
        if partition == me["partition"]:
            gang.append(me)
        else:
            host = address.rsplit(":", 1)[0] if address else None
            gang.append(
                {
                    "partition": partition,
                    "executor": address,
                    "host": host,
                    "gpus": [],
                    "missing": [],
                    "unreachable": None,
                }
            )
    return gang
