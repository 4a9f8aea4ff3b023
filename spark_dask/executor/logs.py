"""What a Spark task does with its workers' logs when they end: copy each whole log into
the cluster's log directory (``<log-directory>/<name>-<id>/workers/<worker>.log``, the
layout :mod:`spark_dask.logdir` describes), never failing the task for it.
"""

from __future__ import annotations

import os
import re
import shutil

WORKERS = "workers"


def safe_name(text: str) -> str:
    """``text`` as one file or directory name: runs of characters other than letters,
    digits, ``.``, ``_`` and ``-`` become ``_``; no leading or trailing dot.

    Parameters
    ----------
    text : str
        A cluster or worker name.

    Returns
    -------
    str
        A name that is never empty, ``.`` or ``..``, and has no ``/``.

    >>> safe_name("spark-3-gpu1"), safe_name("team a/etl"), safe_name("..")
    ('spark-3-gpu1', 'team_a_etl', '_')
    """
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", str(text)).strip(".")
    return name or "_"


def worker_log_path(directory: str, worker: str) -> str:
    """Where a worker's whole log is kept: ``<directory>/workers/<worker>.log``.

    >>> worker_log_path("/logs/etl-ab12", "spark-0")
    '/logs/etl-ab12/workers/spark-0.log'
    """
    return os.path.join(directory, WORKERS, safe_name(worker) + ".log")


def save_worker_logs(directory: str, logs: list[tuple[str, str]]) -> str | None:
    """Copy each worker's log file into ``<directory>/workers/`` (run by the Spark task
    when its workers ended, before it removes its working directory).

    Parameters
    ----------
    directory : str
        The cluster's log directory (made by the driver).
    logs : list of (str, str)
        ``(worker name, path of its log file)``.

    Returns
    -------
    str or None
        Why the logs (some or all) could not be kept, for the task's status row; None
        when every one was. Never raises for a file system error: keeping logs must not
        fail the worker's task.
    """
    target = os.path.join(directory, WORKERS)
    if not os.path.isdir(target):
        return not_shared_message(target)
    problems = []
    for worker, source in logs:
        try:
            with open(source, "rb") as src, open(worker_log_path(directory, worker), "wb") as dst:
                shutil.copyfileobj(src, dst)  # read and write, from the start: no sendfile, no seek
        except OSError as e:
            problems.append(f"{worker}: {type(e).__name__}: {e}")
    return "; ".join(problems) or None


def not_shared_message(target: str) -> str:
    """A task's reason when the driver's ``workers/`` directory is not there for it."""
    return (
        f"{target} does not exist on this executor: the log directory is not on a file "
        f"system that the driver and this executor share"
    )
