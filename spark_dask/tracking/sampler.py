"""The cluster's metrics over time in its MLflow run: every ``mlflow-interval``, one
snapshot of the scheduler's state in the driver process (:func:`snapshot`: what the
scheduler already knows of its workers from their heartbeats, no call to a worker),
handed to the cluster's :class:`~spark_dask.tracking.run.Link`, which sends it as one
``log_batch`` from its own thread.

The snapshot is taken on the event loop, where the scheduler's state changes (read from
another thread, its dictionaries may change size under the reader); it is a pass over
the workers, without I/O. Metric names (stable: dashboards are built on them):

- ``dask/workers``, ``dask/group/<group>/workers``: connected workers, all and per
  worker group (no key is a path prefix of another: MLflow's file store keeps each
  metric in a file of that path);
- ``dask/memory_bytes``, ``dask/memory_limit_bytes``, ``dask/spilled_bytes``: the
  workers' process memory, its limits and the bytes spilled to disk, summed;
- ``dask/tasks_processing``, ``dask/tasks_queued``: tasks on the workers, and tasks
  waiting on the scheduler (queued, or no worker can run them);
- ``dask/gpu_utilization/<worker>`` (percent), ``dask/gpu_memory_bytes/<worker>``: where
  the worker reports NVML's readings (``distributed.diagnostics.nvml``);
- ``dask/handoff_bytes``: bytes moved by ``to_dask`` / ``to_spark`` so far.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections import Counter

from spark_dask.options.groups import DEFAULT

_NOT_IN_KEY = re.compile(r"[^A-Za-z0-9_\-. /]")  # what MLflow refuses in a metric key


def key(*parts: str) -> str:
    """A metric key of ``parts`` joined by ``/``, what MLflow refuses in one as ``_``.

    >>> key("dask", "gpu_utilization", "spark-0-gpu1"), key("dask", "group", "a:b", "workers")
    ('dask/gpu_utilization/spark-0-gpu1', 'dask/group/a_b/workers')
    """
    return "/".join(_NOT_IN_KEY.sub("_", str(p)) for p in parts)


def group_of(ws) -> str:
    """The worker group of a worker (the Spark facts its preload gives the scheduler)."""
    facts = ws.extra.get("spark") if isinstance(getattr(ws, "extra", None), dict) else None
    return str(facts.get("group", DEFAULT)) if isinstance(facts, dict) else DEFAULT


def workers_by_group(scheduler) -> dict[str, list[tuple[int, int]]]:
    """Each group's connected workers as ``(threads, memory limit)``."""
    out: dict[str, list] = {}
    for ws in list(scheduler.workers.values()):
        out.setdefault(group_of(ws), []).append((int(ws.nthreads), int(ws.memory_limit or 0)))
    return out


def snapshot(scheduler, groups=(), handoff_bytes: int = 0) -> dict[str, float]:
    """One sample of the cluster's metrics (names above) from ``scheduler``'s state;
    every group of ``groups`` has its worker count, 0 when none is connected."""
    workers = list(scheduler.workers.values())
    out: dict[str, float] = {"dask/workers": len(workers)}
    per_group = Counter(group_of(ws) for ws in workers)
    for group in sorted(set(groups) | set(per_group)):
        out[key("dask", "group", group, "workers")] = per_group.get(group, 0)
    memory = scheduler.memory  # summed over the workers, from their heartbeats
    out["dask/memory_bytes"] = memory.process
    out["dask/spilled_bytes"] = memory.spilled
    out["dask/memory_limit_bytes"] = sum(ws.memory_limit or 0 for ws in workers)
    out["dask/tasks_processing"] = sum(len(ws.processing) for ws in workers)
    out["dask/tasks_queued"] = len(scheduler.queued) + len(scheduler.unrunnable)
    for ws in workers:
        gpu = ws.metrics.get("gpu")
        if not isinstance(gpu, dict):
            continue
        if gpu.get("utilization") is not None:
            out[key("dask", "gpu_utilization", ws.name)] = gpu["utilization"]
        if gpu.get("memory-used") is not None:
            out[key("dask", "gpu_memory_bytes", ws.name)] = gpu["memory-used"]
    out["dask/handoff_bytes"] = handoff_bytes
    return out


class Sampler:
    """Samples a cluster's scheduler every ``interval`` seconds while the cluster runs.

    Parameters
    ----------
    take : callable
        ``take()``: one sample (:func:`snapshot` of the cluster's scheduler, groups and
        hand-off bytes).
    send : callable
        ``send(step, sample, timestamp)``: hands it to the link (never waits on MLflow);
        ``timestamp`` is the wall time the sample was taken, in milliseconds since the
        epoch (MLflow's metric timestamps: its charts' time x-axis).
    interval : float
        Seconds between two samples.
    """

    def __init__(self, take, send, interval: float):
        self.take = take
        self.send = send
        self.interval = interval
        self.step = 0
        self.task: asyncio.Task | None = None

    def sample(self) -> None:
        """Take one sample and hand it on, with the time it was taken (event loop)."""
        taken = int(time.time() * 1000)
        self.send(self.step, self.take(), taken)
        self.step += 1

    async def run(self) -> None:
        """A sample now, then one every ``interval`` until :meth:`stop`."""
        while True:
            self.sample()
            await asyncio.sleep(self.interval)  # the period between samples, not a wait on anything

    def start(self) -> None:
        """Start sampling (event loop)."""
        self.task = asyncio.ensure_future(self.run())

    def stop(self) -> None:
        """Stop sampling, and take the last sample (the cluster closes)."""
        if self.task is not None and not self.task.done():
            self.task.cancel()
            self.sample()


__all__ = ["Sampler", "group_of", "key", "snapshot", "workers_by_group"]
