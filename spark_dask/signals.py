"""Signals while Dask clusters run in this process.

* **SIGINT** (Ctrl-C, interrupting a notebook cell). A Spark action that waits for task
  slots the gang holds (``spark.read.parquet(...)`` inside the ``with`` block on
  one-core executors) must end at once with a ``KeyboardInterrupt``, and its Spark job
  must be cancelled. PySpark's own handler cancels *every* job, the gang's included,
  and calls the JVM from inside the interrupted py4j call of the main thread (a
  "reentrant call" error, after which nothing is cancelled). While a cluster runs,
  :func:`on_sigint` replaces it: it cancels the Spark jobs that are not a gang's from a
  thread of its own (each thread has its own py4j connection), waits until Spark has
  ended them, closes the main thread's interrupted py4j connection and raises
  ``KeyboardInterrupt``. Closing that connection first matters: py4j's own clean-up of
  an interrupted call (py4j pull request 440) shuts down *every* idle connection and
  asks the JVM to close sockets by port, which was seen to cut the connection of the
  thread collecting the gang's barrier job; py4j then re-sent that collect, a second
  gang job that started once the slots were free. With the connection already closed
  py4j skips that clean-up; its log record of the interrupt is kept out of the log.
* **SIGTERM** (a detached notebook, a restarted Python, a cancelled job run). In
  interactive sessions, or with ``spark-dask.close-on-sigterm: true``, every running
  cluster is closed within about a second (workers told to exit, the barrier job
  cancelled if it has not ended after one second), then the handler installed before
  runs.

Handlers are installed by the first cluster that starts in the main thread and put back
when the last one closes. Nothing here runs at import time.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from contextlib import suppress

from spark_dask import registry
from spark_dask.spark.gateway import retire_main_connection

logger = logging.getLogger("spark_dask")

_lock = threading.Lock()
_previous: dict[int, object] = {}


def interactive() -> bool:
    """Whether this is an interactive session (IPython / Jupyter / Databricks notebook,
    ``python -i``), where SIGTERM means "the notebook went away"."""
    if os.environ.get("DATABRICKS_RUNTIME_VERSION") and "IPython" in sys.modules:
        return True
    ipython = sys.modules.get("IPython")
    if ipython is not None and getattr(ipython, "get_ipython", lambda: None)() is not None:
        return True
    return bool(getattr(sys, "ps1", None)) or bool(sys.flags.interactive)


def close_on_sigterm(setting) -> bool:
    """The ``close-on-sigterm`` setting: ``True``/``False``, or ``"auto"`` (interactive)."""
    if isinstance(setting, str):
        text = setting.strip().lower()
        if text == "auto":
            return interactive()
        return text in ("true", "yes", "1", "on")
    return bool(setting)


def _is_pyspark_handler(handler) -> bool:
    return getattr(handler, "__module__", "") in ("pyspark.context", "pyspark.core.context")


def register(cluster, sigterm: bool) -> None:
    """Install the handlers for a cluster that started (main thread only; else a no-op)."""
    if threading.current_thread() is not threading.main_thread():
        return
    with _lock:
        _install(signal.SIGINT, on_sigint)
        logging.getLogger().addFilter(_py4j_filter)
        if sigterm:
            _install(signal.SIGTERM, on_sigterm)


def unregister(cluster) -> None:
    """Forget a closed cluster; put the previous handlers back after the last one."""
    with _lock:
        if any(c is not cluster for c in registry.live()):
            return
        logging.getLogger().removeFilter(_py4j_filter)
        if threading.current_thread() is not threading.main_thread():
            return  # signal.signal works only there; the handlers stay, harmless without clusters
        for signum in list(_previous):
            current = signal.getsignal(signum)
            if current in (on_sigint, on_sigterm):
                with suppress(ValueError, TypeError):
                    signal.signal(signum, _previous[signum])
            del _previous[signum]


def _install(signum: int, handler) -> None:
    current = signal.getsignal(signum)
    if current is handler:
        return
    if current is signal.SIG_IGN:
        return  # the process chose to ignore it
    _previous[signum] = current
    signal.signal(signum, handler)


def _run_bounded(fn, timeout: float) -> None:
    """Run ``fn`` in a thread of its own and wait at most ``timeout`` seconds.

    The main thread may be inside a py4j call when the signal arrives: Spark is only
    called from other threads (each gets its own py4j connection).
    """
    thread = threading.Thread(target=fn, name="spark-dask-signal", daemon=True)
    thread.start()
    thread.join(timeout)


# ------------------------------------------------------------------------------ SIGINT


def waiting_jobs(active: list[int], gang_jobs: set[int]) -> list[int]:
    """The Spark jobs an interrupt cancels: every active job that is not a gang's."""
    return sorted(j for j in active if j not in gang_jobs)


def _cancel_spark_jobs(clusters, wait: float = 3.0) -> None:
    by_context = {}
    for cluster in clusters:
        made = registry.parts_of(cluster)
        if made is None or not made.gangs or made.connect:
            continue
        by_context.setdefault(id(cluster.spark.sparkContext), (cluster.spark.sparkContext, []))[1].append(cluster)
    for sc, members in by_context.values():
        try:
            tracker = sc.statusTracker()
            gang_jobs: set[int] = set()
            for cluster in members:
                for tag in cluster.gang_tags:
                    gang_jobs.update(int(j) for j in tracker.getJobIdsForGroup(tag))
            jobs = waiting_jobs([int(j) for j in tracker.getActiveJobsIds()], gang_jobs)
            for job in jobs:
                sc._jsc.sc().cancelJob(job)
            deadline = time.monotonic() + wait
            while jobs and time.monotonic() < deadline:  # cancelling is asynchronous in Spark
                time.sleep(0.05)
                active = {int(j) for j in tracker.getActiveJobsIds()}
                jobs = [j for j in jobs if j in active]
        except Exception as e:  # a stopping context: nothing to cancel  # noqa: BLE001
            logger.debug("spark-dask: cancel on interrupt failed: %s", e)


class _Py4JInterruptFilter(logging.Filter):
    """Drops py4j's own report of an interrupted call ("KeyboardInterrupt while sending
    command." with a traceback into py4j's socket code, on the root logger): the user
    already gets the ``KeyboardInterrupt`` from the Spark call itself."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (
            record.getMessage() == "KeyboardInterrupt while sending command."
            and record.exc_info is not None
            and record.exc_info[0] is KeyboardInterrupt
        )


_py4j_filter = _Py4JInterruptFilter()


def on_sigint(signum, frame):
    """Cancel Spark jobs waiting beside the gangs, then raise ``KeyboardInterrupt``."""
    clusters = registry.live()
    previous = _previous.get(signal.SIGINT)
    if not clusters:  # every cluster closed from another thread: behave as before us
        if callable(previous):
            previous(signum, frame)
        raise KeyboardInterrupt
    _run_bounded(lambda: _cancel_spark_jobs(clusters), 5.0)
    with suppress(Exception):
        retire_main_connection()
    if callable(previous) and not _is_pyspark_handler(previous) and previous is not signal.default_int_handler:
        previous(signum, frame)  # e.g. a handler of the notebook kernel
    raise KeyboardInterrupt


# ----------------------------------------------------------------------------- SIGTERM


def _close_all(clusters, grace: float = 1.0) -> None:
    """Close clusters in parallel, each giving its barrier job ``grace`` seconds to end
    by itself (its workers closed) before the job is cancelled."""
    for cluster in clusters:
        cluster.close_grace = grace
    threads = [threading.Thread(target=c.close, kwargs={"timeout": 10}, daemon=True) for c in clusters]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)


def on_sigterm(signum, frame):
    """Close every running cluster (bounded), then do what the previous handler did."""
    clusters = registry.live()
    if clusters:
        _run_bounded(lambda: _close_all(clusters), 3.0)
    previous = _previous.get(signal.SIGTERM, signal.SIG_DFL)
    if callable(previous):
        previous(signum, frame)
    elif previous == signal.SIG_IGN:
        return
    else:  # SIG_DFL (or unknown): die of SIGTERM, as without us
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
