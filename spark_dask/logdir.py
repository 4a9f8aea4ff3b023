"""Logs that outlive the cluster (the ``log-directory`` option): where a cluster keeps
its logs, what each file holds, when it is written, and reading the files back.

Every cluster writes a directory of its own under the option's directory::

    <log-directory>/<name>-<id>/     one per cluster (a cluster without a name: its
                                     job tag, spark-dask-<id>)
        scheduler.log                the driver: distributed's log lines in the driver
                                     process while the cluster runs, written as they come
        cluster.log                  the driver: the cluster manager's events, with
                                     their time (get_logs()["Cluster"])
        spark-tasks.log              the driver: a line per Spark task with placement,
                                     status, exit codes and log tails
                                     (get_logs()["Spark tasks"])
        workers/<worker>.log         each Spark task: the whole log of each of its
                                     workers, when the worker ended

The driver creates the directory when the cluster starts (with the process's umask:
the files are meant to be read by others; no key material is written there) and
writes ``cluster.log`` and ``spark-tasks.log`` each time a gang's Spark job ends and
at close, after every gang ended. A Spark task writes only into ``workers/``, which
the driver made: where it does not find it, the path is not shared with the driver,
and the task says so in its status row instead of making a directory nobody reads.

What a Spark task does with ``workers/`` (:func:`~spark_dask.executor.logs.save_worker_logs`)
is in :mod:`spark_dask.executor.logs`; the rest, here, runs on the driver.
"""

from __future__ import annotations

import logging
import os
import re

from spark_dask.executor.logs import WORKERS, safe_name
from spark_dask.sizes import plural

SCHEDULER_LOG = "scheduler.log"
CLUSTER_LOG = "cluster.log"
TASKS_LOG = "spark-tasks.log"
# distributed's default ``distributed.admin.log-format`` (what get_logs()["Scheduler"] shows)
LOG_FORMAT = "%(asctime)s - %(name)s - %(levelname)s - %(message)s"
# the logger whose records scheduler.log keeps: the scheduler runs in the driver process
SCHEDULER_LOGGER = "distributed"
# ... but this one: distributed.http.proxy logs it once per process, when the first
# scheduler's dashboard imports its /proxy route without jupyter-server-proxy installed
# (a hint about an optional package of the dashboard, not a line about this cluster)
PROXY_HINT = ("distributed.http.proxy", "To route to workers diagnostics web server")


def cluster_directory(root: str | None, name: str, cluster_id: str) -> str | None:
    """The directory of one cluster's logs: ``<root>/<name>-<id>``.

    Parameters
    ----------
    root : str or None
        The ``log-directory`` option; None or ``""``: logs are not kept.
    name : str
        The cluster's name (its job tag ``spark-dask-<id>`` when it was given none: that
        ends with the id already, which is not repeated).
    cluster_id : str
        The cluster's id.

    Returns
    -------
    str or None
        An absolute path (the executors share no working directory with the driver).

    >>> cluster_directory("/logs", "etl", "ab12"), cluster_directory("/logs", "spark-dask-ab12", "ab12")
    ('/logs/etl-ab12', '/logs/spark-dask-ab12')
    >>> cluster_directory(None, "etl", "ab12") is None
    True
    """
    if not root:
        return None
    base = safe_name(name)
    if not base.endswith(cluster_id):
        base = f"{base}-{cluster_id}"
    return os.path.join(os.path.abspath(os.path.expanduser(str(root))), base)


def not_kept_message(directory: str, rows: list[dict]) -> str | None:
    """The driver's one warning for the tasks (status ``rows``) that could not keep their
    workers' logs; None when every task that tried did."""
    failed = [r for r in rows if r.get("log_error")]
    if not failed:
        return None
    first = failed[0]
    return (
        f"spark-dask: {plural(len(failed), 'Spark task')} could not keep their Dask workers' logs in "
        f"{os.path.join(directory, WORKERS)} (task {first.get('task', first.get('partition'))} on "
        f"{first.get('host')}: {first['log_error']}). Give log_directory a path that every "
        f"executor can write, such as a Unity Catalog volume (/Volumes/<catalog>/<schema>/"
        f'<volume>/dask-logs) on Databricks; the log tails stay in get_logs()["Spark tasks"].'
    )


def unwritable_message(path: str, error: BaseException) -> str:
    """The driver's warning when it cannot create or write ``path``."""
    return (
        f"spark-dask: cannot keep the cluster's logs in {path} ({type(error).__name__}: {error}); "
        f"the cluster runs on without them. Give log_directory a directory that this driver "
        f"and every executor can write."
    )


def cluster_text(lines) -> str:
    """``cluster.log``: the cluster manager's events (``(datetime, text)`` pairs), each
    after its time.

    >>> import datetime
    >>> cluster_text([(datetime.datetime(2026, 1, 2, 3, 4, 5), "spark-dask: 2 workers connected")])
    '2026-01-02 03:04:05 spark-dask: 2 workers connected\\n'
    """
    return "".join(f"{t:%Y-%m-%d %H:%M:%S} {text}\n" for t, text in lines)


def tasks_text(task_log: str, rows: list[dict]) -> str:
    """``spark-tasks.log``: the ``"Spark tasks"`` log, then a line for each task that could
    not keep its workers' logs (status ``rows``).

    >>> tasks_text("task 0: ok", [{"task": 0, "log_error": "no such directory"}])
    'task 0: ok\\nworker logs of task 0 not kept: no such directory\\n'
    """
    notes = [
        f"worker logs of task {r.get('task', r.get('partition'))} not kept: {r['log_error']}"
        for r in rows
        if r.get("log_error")
    ]
    return "\n".join([task_log, *notes]) + "\n"


def _natural(name: str) -> list:
    """Sort key: ``spark-2`` before ``spark-10``."""
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name)]


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read().rstrip("\n")
    except OSError:
        return None


def read_logs(directory: str, cluster: bool = True, scheduler: bool = True, workers=True) -> dict[str, str]:
    """The logs kept in a cluster's directory, keyed as ``get_logs()`` keys them.

    Parameters
    ----------
    directory : str
        A cluster's log directory (``<log-directory>/<name>-<id>``), also one left by a
        driver that is gone.
    cluster : bool
        ``"Cluster"`` and ``"Spark tasks"`` (``cluster.log``, ``spark-tasks.log``).
    scheduler : bool
        ``"Scheduler"`` (``scheduler.log``).
    workers : bool or iterable of str
        Every worker's log (True), none (False) or those of the workers named.

    Returns
    -------
    dict
        ``"Cluster"``, ``"Scheduler"``, each worker's name, ``"Spark tasks"``, in that
        order; a file that is not there is left out.
    """
    out = {}
    wanted = {"Cluster": (cluster, CLUSTER_LOG), "Scheduler": (scheduler, SCHEDULER_LOG)}
    for key, (asked, name) in wanted.items():
        text = _read(os.path.join(directory, name)) if asked else None
        if text is not None:
            out[key] = text
    if workers:
        chosen = None if workers is True else {safe_name(w) for w in workers}
        try:
            files = [f for f in os.listdir(os.path.join(directory, WORKERS)) if f.endswith(".log")]
        except OSError:
            files = []
        for f in sorted(files, key=_natural):
            name = f[: -len(".log")]
            text = _read(os.path.join(directory, WORKERS, f)) if chosen is None or name in chosen else None
            if text is not None:
                out[name] = text
    text = _read(os.path.join(directory, TASKS_LOG)) if cluster else None
    if text is not None:
        out["Spark tasks"] = text
    return out


def not_the_proxy_hint(record: logging.LogRecord) -> bool:
    """A ``logging`` filter: False for distributed's jupyter-server-proxy hint
    (:data:`PROXY_HINT`), the line ``scheduler.log`` opened with, True for every other record.

    >>> hint = logging.makeLogRecord({"name": PROXY_HINT[0], "msg": PROXY_HINT[1] + " please install ..."})
    >>> not_the_proxy_hint(hint), not_the_proxy_hint(logging.makeLogRecord({"name": PROXY_HINT[0], "msg": "x"}))
    (False, True)
    """
    name, start = PROXY_HINT
    return not (record.name == name and str(record.msg).startswith(start))


class SchedulerLogHandler(logging.Handler):
    """Writes each record to ``scheduler.log`` as it comes (flushed at once: a driver
    that crashes leaves the lines logged so far, as far as the file system has them).

    The file is written from its start to its end through one open handle, the one way
    of writing that object-store file systems (a Databricks volume) allow too; it is not
    a ``logging.StreamHandler``: distributed's ``silence_logging_cmgr`` (the
    ``silence-logs`` option) raises the level of every stream handler of the
    ``distributed`` logger, and this file keeps the lines the notebook does not show.
    After a failed write (a full or unmounted volume) it writes no more and keeps the
    error.

    Parameters
    ----------
    path : str
        The file, created (or emptied).
    fmt : str
        The record format (``distributed.admin.log-format``).
    """

    def __init__(self, path: str, fmt: str = LOG_FORMAT):
        super().__init__()
        self.setFormatter(logging.Formatter(fmt))
        self.addFilter(not_the_proxy_hint)
        self.file = open(path, "w", encoding="utf-8")
        self.error: BaseException | None = None

    def emit(self, record: logging.LogRecord) -> None:
        if self.error is not None:
            return
        try:
            self.file.write(self.format(record) + "\n")
            self.file.flush()
        except Exception as e:  # noqa: BLE001 - a log line must never fail the scheduler
            self.error = e

    def close(self) -> None:
        try:
            self.file.close()
        except OSError as e:  # the last lines did not reach the file system
            self.error = self.error or e
        finally:
            super().close()


def write_text(path: str, text: str) -> None:
    """Write ``path`` whole, from its start (replacing what it held): sequential writes
    only, which every shared file system allows (no append, no rename)."""
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


class KeptLogs:
    """The driver's side of a cluster's kept logs: a context manager entered when the
    cluster starts and left when it closed (every gang ended).

    Entering creates the directory and starts ``scheduler.log``; :meth:`save` (each time a
    gang ends, and after the close for a line said after it) and leaving write
    ``cluster.log`` and ``spark-tasks.log`` whole, and give
    one warning for the Spark tasks that could not keep their workers' logs and one for
    each file the driver could not write. Without a directory (the option is off) it
    does nothing, and :meth:`read` gives what a closed cluster always had.

    Parameters
    ----------
    directory : str or None
        The cluster's directory (:func:`cluster_directory`); None: logs are not kept.
    events : spark_dask.events.Events
        The cluster manager's events (``logs``) and where warnings go (``warn``).
    task_log : callable
        ``task_log()``: the ``"Spark tasks"`` log now.
    rows : callable
        ``rows()``: the status rows of every ended gang's tasks.
    """

    def __init__(self, directory: str | None, events, task_log, rows):
        self.directory = directory
        self.events = events
        self.task_log = task_log
        self.rows = rows
        self.handler: SchedulerLogHandler | None = None
        self.open = False
        self.warned: set[str] = set()  # which warnings were given (once each)

    def __enter__(self) -> str | None:
        """Create the directory (and ``workers/``) and start ``scheduler.log``; the
        directory, or None where logs are not kept (the option is off, or the driver
        cannot write there: a warning says so and the cluster starts all the same)."""
        if self.directory is None:
            return None
        import dask.config  # not at import: the module is shipped to executors

        try:
            os.makedirs(os.path.join(self.directory, WORKERS), exist_ok=True)
            fmt = dask.config.get("distributed.admin.log-format", LOG_FORMAT)
            self.handler = SchedulerLogHandler(os.path.join(self.directory, SCHEDULER_LOG), fmt)
        except OSError as e:
            self.events.warn(unwritable_message(self.directory, e))
            self.directory = None
            return None
        logging.getLogger(SCHEDULER_LOGGER).addHandler(self.handler)
        self.open = True
        return self.directory

    def __exit__(self, *exc) -> None:
        if not self.open:
            return
        logging.getLogger(SCHEDULER_LOGGER).removeHandler(self.handler)
        self.handler.close()
        self.save()
        self.open = False

    def _once(self, key: str, msg: str) -> None:
        """Warn with ``msg`` unless a warning of this ``key`` was given already."""
        if key not in self.warned:
            self.warned.add(key)
            self.events.warn(msg, python_warning=False)

    def save(self) -> None:
        """Write ``cluster.log`` and ``spark-tasks.log`` now (a gang ended, or a line came
        after the close: the idle timeout's "closed after being idle"); warn once when
        tasks could not keep their workers' logs, or these files cannot be written."""
        if self.handler is None:  # logs are not kept (or were never started)
            return
        rows = self.rows()
        problem = not_kept_message(self.directory, rows)
        if problem:
            self._once("tasks", problem)
        if self.handler.error is not None:
            self._once(SCHEDULER_LOG, unwritable_message(self.handler.file.name, self.handler.error))
        texts = {CLUSTER_LOG: cluster_text(self.events.logs), TASKS_LOG: tasks_text(self.task_log(), rows)}
        for name, text in texts.items():
            try:
                write_text(os.path.join(self.directory, name), text)
            except OSError as e:
                self._once(name, unwritable_message(os.path.join(self.directory, name), e))

    def read(self, cluster: bool = True, scheduler: bool = True, workers=True) -> dict[str, str]:
        """The logs of the closed cluster (:func:`read_logs`); ``"Cluster"`` and ``"Spark
        tasks"`` from memory where their files are not there (or logs are not kept)."""
        out = read_logs(self.directory, cluster, scheduler, workers) if self.directory else {}
        if cluster:
            out.setdefault("Cluster", "\n".join(text for _, text in self.events.logs))
            out = {"Cluster": out.pop("Cluster"), **out}
            out.setdefault("Spark tasks", self.task_log())
        return out
