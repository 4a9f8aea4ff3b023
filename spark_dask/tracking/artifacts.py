"""What a cluster leaves in its MLflow run when it closes, under ``spark-dask/``:

- ``performance-report.html``: Dask's performance report over the time it was tracked
  (:class:`ReportStart`; what ``distributed.performance_report`` asks the scheduler for,
  asked of the scheduler in this process);
- ``logs/<name>.txt``: what ``get_logs()`` gives, ``cluster``, ``scheduler``,
  ``spark-tasks`` and one file per worker, by the worker's name;
- ``events.txt``: the cluster's event lines, with their times.

Every text is scrubbed first (:class:`~spark_dask.tracking.redact.Redactor`).
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time

from spark_dask import report

LOGS_WAIT = 3.0  # seconds the close waits for the workers' logs (a frozen worker does not answer)
ROOT = "spark-dask"  # the artifacts' directory in the run


class ReportStart:
    """Where the performance report starts: as ``distributed.performance_report`` marks
    it on entering (the time, the system monitor's count, the task stream plugin), on the
    scheduler in this process."""

    def __init__(self, scheduler):
        self.start = time.time()
        self.last_count = scheduler.monitor.count
        scheduler.get_task_stream(start=0, stop=0)  # adds the task stream plugin where missing

    async def html(self, scheduler) -> str:
        """The report from the start to now (the scheduler's ``performance_report`` handler)."""
        return await scheduler.performance_report(start=self.start, last_count=self.last_count, code="")


def no_report_message(name: str, error: BaseException) -> str:
    """The note when distributed could not make the performance report (the other
    artifacts are left).

    >>> no_report_message("etl", KeyError("x"))
    "spark-dask: cluster 'etl' left no performance report in its MLflow run: KeyError: 'x'"
    """
    return f"spark-dask: cluster {name!r} left no performance report in its MLflow run: {type(error).__name__}: {error}"


def _lines(entries) -> str:
    """Log entries as distributed's ``get_logs`` gives them (``(level, message)`` pairs,
    the newest first) as text, the oldest line first."""
    return "\n".join(e[1] if isinstance(e, (tuple, list)) and len(e) == 2 else str(e) for e in reversed(entries))


def event_lines(events) -> str:
    """The cluster's events (``(datetime, text)`` pairs), one line each, with the time."""
    return "\n".join(f"{t.isoformat(sep=' ', timespec='seconds')} {msg}" for t, msg in events)


async def log_texts(cluster, p) -> dict[str, str]:
    """``get_logs()``'s texts by file name: the cluster's, the scheduler's, the Spark
    tasks' and each worker's (at most :data:`LOGS_WAIT` seconds for the workers'); ``p``:
    the cluster's parts."""
    scheduler = cluster.scheduler
    out = {
        "cluster": event_lines(p.events.logs),
        "scheduler": _lines(scheduler.get_logs()),
        "spark-tasks": report.task_log(cluster.tag, cluster.gang_status, p.gangs, cluster.scheduler_info, scheduler),
    }
    try:
        workers = await asyncio.wait_for(scheduler.get_worker_logs(), LOGS_WAIT)
    except (asyncio.TimeoutError, OSError) as e:
        out["cluster"] += f"\nspark-dask: the workers' logs are missing: {type(e).__name__}"
        return out
    for address, entries in workers.items():
        ws = scheduler.workers.get(address)
        name = str(ws.name) if ws is not None else address
        out[name.replace(os.sep, "_").replace(":", "_")] = _lines(entries) if isinstance(entries, (list, tuple)) else ""
    return out


def files(report_html: str | None, logs: dict[str, str], events: str, redactor) -> dict[str, str]:
    """The artifacts by their path under :data:`ROOT`, scrubbed (the report's secrets in
    ``name=value`` pairs: its data is one line of JSON)."""
    out = {f"logs/{name}.txt": redactor.text(text) for name, text in logs.items()}
    out["events.txt"] = redactor.text(events)
    if report_html is not None:
        out["performance-report.html"] = redactor.pairs(report_html)
    return out


def upload(client, run_id: str, texts: dict[str, str]) -> None:
    """Write ``texts`` into a temporary directory and log it as the run's :data:`ROOT`."""
    with tempfile.TemporaryDirectory(prefix="spark-dask-mlflow-") as tmp:
        for rel, text in texts.items():
            path = os.path.join(tmp, *rel.split("/"))
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        client.log_artifacts(run_id, tmp, artifact_path=ROOT)


__all__ = ["ROOT", "ReportStart", "event_lines", "files", "log_texts", "no_report_message", "upload"]
