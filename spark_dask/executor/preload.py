"""spark-dask worker preload: loaded by every Dask worker (and nanny) a Spark task starts.

1. It tags the worker with the Spark facts its task put in ``SPARK_DASK_FACTS``: they
   appear in ``client.scheduler_info()`` (the worker's ``spark`` startup information).
2. A watchdog: when the Spark task process (``SPARK_DASK_TASK_PID``) is gone (killed,
   cancelled, executor lost), the worker's whole process group is terminated, then
   killed after ``SPARK_DASK_KILL_GRACE`` seconds. This backs up the parent-death signal
   (Linux only) set on the worker's top process.
3. In a nanny (``--preload-nanny``) it adds the ``spark_dask_close`` handler: the
   driver's fast close.

The executors need not have spark_dask installed: the driver reads this module's source
(:func:`spark_dask.gangs.maker.preload_source`), the task specification carries it, and each
task writes it into its workers' directory as the module ``spark_dask_preload``
(:data:`spark_dask.executor.gang_task.PRELOAD_MODULE`). So it must stay self-contained: it imports
only the standard library and distributed.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import threading
import time

from distributed import Nanny

# Seconds the fast close (spark_dask_close) waits for the nanny to close before the
# process leaves anyway (its Spark task then kills what is left of the worker).
NANNY_CLOSE_WAIT = 30.0


def stat_fields(pid: int, proc: str = "/proc") -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` from the third on (the state, ...: field ``n``
    is ``[n - 3]``); None where unreadable (no such process, not Linux). Field 2, the
    command name, is in parentheses and may hold spaces and ")"."""
    try:
        with open(f"{proc}/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def process_start(pid: int, proc: str = "/proc") -> str | None:
    """When process ``pid`` started (field 22 of ``/proc/<pid>/stat``, clock ticks after
    boot): with the pid it names one process, as pids are reused. None where unreadable
    (no such process, not Linux)."""
    fields = stat_fields(pid, proc)
    return fields[19] if fields is not None and len(fields) > 19 else None


def alive(pid: int, start: str | None = None) -> bool:
    """Whether process ``pid`` exists (and, given its ``start``, is still that process).

    Parameters
    ----------
    pid : int
        A process id.
    start : str, optional
        Its :func:`process_start`, read while it ran: a process that got the pid later
        (pid reuse) does not count. None: any process of that pid counts.

    Returns
    -------
    bool
        False when no such process exists, or another one has its pid (one of another
        user counts as alive).
    """
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    if start is None:
        return True
    now = process_start(pid)
    return now is None or now == start  # unreadable: only the kill(0) answer is known


def watchdog(task_pid: int, grace: float) -> None:
    """Wait for ``task_pid`` to end, then end this process group; never returns.

    Parameters
    ----------
    task_pid : int
        The Spark task's process.
    grace : float
        Seconds between SIGTERM and SIGKILL of the process group.
    """
    # read now, while the task runs (had it ended before, its parent-death signal
    # would have ended this process: Linux, the only system with /proc)
    start = process_start(task_pid)
    while alive(task_pid, start):
        time.sleep(1.0)
    pgid = os.getpgid(0)
    try:
        os.killpg(pgid, signal.SIGTERM)
        time.sleep(grace)
        os.killpg(pgid, signal.SIGKILL)
    finally:
        os._exit(1)


def close_and_exit(nanny):
    """The nanny's ``spark_dask_close`` handler: close the nanny, then leave at once.

    Parameters
    ----------
    nanny : distributed.Nanny

    Returns
    -------
    coroutine function
        ``spark_dask_close(reason=...)``, to put in ``nanny.handlers``.
    """

    leaving: list[asyncio.Task] = []  # the close task, referenced until the process leaves

    async def close_then_leave(reason: str) -> None:
        log = logging.getLogger("distributed.nanny")  # the logger the worker's log file has
        try:
            await asyncio.wait_for(nanny.close(reason=reason), NANNY_CLOSE_WAIT)
            log.info("spark-dask: the nanny closed (spark_dask_close); its process leaves")
        except asyncio.TimeoutError:
            log.warning(
                "spark-dask: the nanny did not close within %gs (spark_dask_close); its process leaves anyway",
                NANNY_CLOSE_WAIT,
            )
        finally:
            logging.shutdown()  # flush the log the Spark task reads
            os._exit(0)

    async def spark_dask_close(reason="spark-dask cluster closed"):
        # The cluster is closing: stop the worker process, then leave at once. An
        # interpreter shutdown after `dask worker` ends costs 0.1-0.5 s that the Spark
        # task (and so the end of the Spark job) would wait for. The close runs in a task
        # of its own, shielded: the nanny's close cancels the tasks that serve its comms,
        # this handler's among them (Server.close stops its background tasks), and the
        # process would otherwise leave half-way through it.
        if not leaving:
            leaving.append(asyncio.ensure_future(close_then_leave(reason)))
        await asyncio.shield(leaving[0])

    return spark_dask_close


def set_title(name: str, comm: str = "/proc/self/comm") -> None:
    """Name this process as ``ps -e``, ``top`` and psutil show it.

    A forked nanny's command line is the Spark task's (``python -m pyspark.daemon``).
    Where ``comm`` cannot be written (not Linux) nothing happens.

    Parameters
    ----------
    name : str
        ``dask-worker`` or ``dask-nanny``.
    comm : str
        The file holding the process's name.
    """
    try:
        with open(comm, "w") as f:
            f.write(name)
    except OSError:
        pass


def spark_facts(environ=os.environ) -> dict:
    """The Spark facts the task gave this worker (``SPARK_DASK_FACTS``, JSON), or ``{}``."""
    return json.loads(environ.get("SPARK_DASK_FACTS", "{}"))


def start_watchdog(environ=os.environ) -> threading.Thread | None:
    """Start :func:`watchdog` in a daemon thread for the task in ``SPARK_DASK_TASK_PID``.

    Returns
    -------
    threading.Thread or None
        The watchdog; None when no task process is named.
    """
    task_pid = int(environ.get("SPARK_DASK_TASK_PID", "0"))
    if not task_pid:
        return None
    grace = float(environ.get("SPARK_DASK_KILL_GRACE", "5"))
    thread = threading.Thread(target=watchdog, args=(task_pid, grace), name="spark-dask-watchdog", daemon=True)
    thread.start()
    return thread


def dask_setup(worker) -> None:
    """distributed's preload hook, run in each worker and (``--preload-nanny``) nanny.

    Parameters
    ----------
    worker : distributed.Worker or distributed.Nanny
        The server loading the preload.
    """
    facts = spark_facts()
    if hasattr(worker, "startup_information"):
        worker.startup_information["spark"] = lambda _worker: facts
        set_title("dask-worker")
    elif isinstance(worker, Nanny):  # --preload-nanny: the driver's fast close
        worker.handlers["spark_dask_close"] = close_and_exit(worker)
        set_title("dask-nanny")
    start_watchdog()
