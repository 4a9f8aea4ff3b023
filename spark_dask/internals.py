"""The parts of distributed that spark-dask uses beyond its documented API, in one place.

distributed's public surface (``Client``, ``Scheduler``/``Worker`` construction,
``SchedulerPlugin``/``WorkerPlugin`` hooks, ``Cluster``/``Adaptive``, ``Security``) is not
listed. What is listed here can change in any release: :data:`DISTRIBUTED` names each
such internal, where the package uses it and what it relies on, and :func:`problems`
checks them against the installed distributed (``tests/unit/test_internals.py`` runs it, so
a release that renames or reshapes one fails there with the internal's name, before a
user's cluster does).

A cluster of Python workers changes none of the scheduler's own methods or handlers:
:func:`replaced` asks a running scheduler which ones it runs as distributed did not make
them (``[]`` for a plain cluster; the cross-language placement's, once a worker of
another language joined, :mod:`spark_dask.xlang.scheduler`).
"""

from __future__ import annotations

import inspect
from typing import NamedTuple

import distributed
import distributed.scheduler
from distributed import Scheduler
from distributed.active_memory_manager import RetireWorker
from distributed.core import Server
from distributed.deploy.cluster import Cluster
from distributed.diagnostics.plugin import SchedulerPlugin
from distributed.scheduler import TaskPrefix, TaskState, WorkerState, WorkerStatusPlugin


class Internal(NamedTuple):
    """One internal of distributed: ``what`` (``Class.name``, a handler name),
    ``where`` (the modules of spark-dask that use it), ``relies`` (on what, in words)."""

    what: str
    where: str
    relies: str


DISTRIBUTED: tuple[Internal, ...] = (
    # the cross-language placement (engaged by the first worker of another language)
    Internal("Scheduler.valid_workers(ts)", "xlang_scheduler", "wrapped: the workers an ordinary task may run on"),
    Internal(
        "Scheduler.decide_worker_non_rootish(ts)", "xlang_scheduler", "wrapped: the placement of a restricted task"
    ),
    Internal(
        "Scheduler.check_idle_saturated(ws, occ)",
        "xlang_scheduler",
        "wrapped; called right after handle_worker_status_change puts a worker back into running",
    ),
    Internal("Scheduler.worker_objective(ts, ws)", "xlang_scheduler", "the objective decide_worker minimises"),
    Internal(
        "distributed.scheduler.decide_worker(ts, all_workers, valid_workers, objective)",
        "xlang_scheduler",
        "picks a worker among the valid ones",
    ),
    Internal(
        "Scheduler.stream_handlers['task-erred']",
        "xlang_scheduler",
        "wrapped: a foreign worker's error text becomes an exception",
    ),
    Internal(
        "Scheduler.running, .idle, .idle_task_count, .saturated",
        "xlang_scheduler",
        "the sets every placement of an unrestricted task picks from",
    ),
    Internal(
        "Scheduler.transition(key, finish, stimulus_id, **kwargs), .transitions(recommendations, stimulus_id)",
        "xlang_scheduler, scheduler",
        "err tasks that wait for a worker that cannot come",
    ),
    Internal("Scheduler.client_desires_keys(keys, client)", "xlang_scheduler", "a Future of an existing task"),
    # the status of workers (public hook: SchedulerPlugin.log_event)
    Internal(
        "Scheduler.handle_worker_status_change(status, worker, stimulus_id)",
        "scheduler",
        "logs the event 'worker-status-change' (topic: the worker's address) once ws.status is the new one; "
        "retire_workers calls it",
    ),
    Internal("Scheduler.unrunnable, .queued", "scheduler, idle", "the tasks that wait for a worker"),
    Internal("Scheduler.transition_counter, .clients", "idle", "activity: task state changes, connected clients"),
    Internal("Scheduler.workers_to_close(n, key, attribute)", "pool", "which workers a scale-down retires"),
    Internal("Scheduler.time_started", "connection", "the start time a connection file records"),
    # named clusters
    Internal(
        "Cluster._start() subscribing with {'op': 'subscribe_worker_status'} on scheduler_comm.live_comm(); "
        "WorkerStatusPlugin(scheduler, comm).bcomm; Scheduler.identity()",
        "named",
        "a handle subscribes through a handler of its own, one WorkerStatusPlugin each "
        "(the stock one's fixed name would end the owner's subscription)",
    ),
    # the Cluster subclass protocol (as SpecCluster uses it)
    Internal(
        "Cluster._start(), ._loop_runner, .scheduler_comm, ._watch_worker_status_task, .scheduler_info",
        "cluster, named",
        "the subscription that keeps scheduler_info current",
    ),
    Internal("Cluster._get_logs(cluster, scheduler, workers)", "cluster", "extended with the Spark tasks' logs"),
    Internal("distributed.utils.silence_logging_cmgr(level)", "events", "the silence_logs option (SharedSilence)"),
    # workers
    Internal("Worker.handlers", "preload, handoff_task", "operations added to each worker (close, hand-off files)"),
    # the drain of a decommissioned executor and a worker group's adaptive target
    Internal(
        "WorkerState.has_what, .processing, .nbytes, .memory_limit, .extra; TaskState.who_has, .get_nbytes(), "
        ".resource_restrictions, .prefix.duration_average",
        "drain, group_adapt",
        "the results only some workers hold; a group's work and its workers' load",
    ),
    Internal(
        "RetireWorker.done() is True once its worker left the scheduler",
        "pool",
        "a drain past its window ends the workers, then the retire_workers call ends by itself",
    ),
)


def params(fn) -> list[str]:
    """The parameter names of ``fn`` (without ``self``)."""
    return [p for p in inspect.signature(fn).parameters if p != "self"]


def takes(owner, attribute: str, *names: str) -> str | None:
    """None if ``owner.<attribute>`` takes every parameter of ``names`` (by name); else
    what is wrong."""
    fn = getattr(owner, attribute, None)
    if fn is None:
        return f"{getattr(owner, '__qualname__', owner)}.{attribute} is gone"
    missing = [n for n in names if n not in params(fn)]
    if missing:
        return f"{fn.__qualname__}({', '.join(params(fn))}) has no parameter {', '.join(missing)}"
    return None


def calls(owner, attribute: str, *words: str) -> str | None:
    """None if the source of ``owner.<attribute>`` names every one of ``words``; else what
    is missing."""
    fn = getattr(owner, attribute, None)
    try:
        source = inspect.getsource(fn)
    except (OSError, TypeError):
        return None if fn is not None else f"{owner.__qualname__}.{attribute} is gone"
    missing = [w for w in words if w not in source]
    return f"{fn.__qualname__} no longer mentions {', '.join(missing)}" if missing else None


def coroutine(owner, attribute: str) -> str | None:
    """None if ``owner.<attribute>`` is a coroutine function; else what it is not."""
    if inspect.iscoroutinefunction(getattr(owner, attribute, None)):
        return None
    return f"{owner.__qualname__}.{attribute} is no longer a coroutine function"


def problems(scheduler: Scheduler | None = None) -> list[str]:
    """What of :data:`DISTRIBUTED` the installed distributed no longer has as described
    (``[]``: all of it). ``scheduler``: an unstarted or running one, for the attributes
    and handlers only an instance has (``Scheduler(validate=False)`` is enough)."""
    found = [
        takes(Scheduler, "valid_workers", "ts"),
        takes(Scheduler, "decide_worker_non_rootish", "ts"),
        takes(Scheduler, "check_idle_saturated", "ws", "occ"),
        takes(Scheduler, "worker_objective", "ts", "ws"),
        takes(distributed.scheduler, "decide_worker", "ts", "all_workers", "valid_workers", "objective"),
        takes(Scheduler, "transition", "key", "finish", "stimulus_id"),
        takes(Scheduler, "transitions", "recommendations", "stimulus_id"),
        takes(Scheduler, "client_desires_keys", "keys", "client"),
        takes(Scheduler, "handle_worker_status_change", "status", "worker", "stimulus_id"),
        calls(Scheduler, "handle_worker_status_change", "log_event", '"worker-status-change"', "check_idle_saturated"),
        calls(Scheduler, "retire_workers", "handle_worker_status_change"),
        takes(Scheduler, "workers_to_close", "n", "key", "attribute"),
        takes(Scheduler, "subscribe_worker_status", "comm"),
        takes(WorkerStatusPlugin, "__init__", "scheduler", "comm"),
        calls(WorkerStatusPlugin, "__init__", "self.bcomm"),
        takes(SchedulerPlugin, "log_event", "topic", "msg"),
        takes(Cluster, "_get_logs", "cluster", "scheduler", "workers"),
        coroutine(Cluster, "_start"),
        calls(
            Cluster, "_start", "scheduler_comm.live_comm()", '"subscribe_worker_status"', "_watch_worker_status_task"
        ),
        None
        if callable(getattr(distributed.utils, "silence_logging_cmgr", None))
        else "distributed.utils.silence_logging_cmgr is gone",
        calls(Server, "__init__", "self.handlers"),  # Worker.handlers
        calls(WorkerState, "__init__", "self.processing", "self.nbytes", "self.memory_limit", "self.extra"),
        calls(TaskState, "__init__", "self.who_has", "self.resource_restrictions"),
        calls(TaskPrefix, "__init__", "self.duration_average"),
        None if hasattr(WorkerState, "has_what") else "WorkerState.has_what is gone",
        None
        if hasattr(TaskState, "get_nbytes") and hasattr(TaskState, "prefix")
        else "TaskState.get_nbytes/prefix is gone",
        calls(RetireWorker, "done", "scheduler.workers.get"),
    ]
    if scheduler is not None:
        found += [
            f"Scheduler has no attribute {name!r}"
            for name in (
                "running",
                "idle",
                "idle_task_count",
                "saturated",
                "unrunnable",
                "queued",
                "transition_counter",
                "clients",
                "time_started",
                "handlers",
                "stream_handlers",
            )
            if not hasattr(scheduler, name)
        ]
        found += [
            f"Scheduler has no stream handler {name!r}"
            for name in ("task-erred", "worker-status-change")
            if name not in scheduler.stream_handlers
        ]
        found += [
            f"Scheduler has no handler {name!r}"
            for name in ("subscribe_worker_status",)
            if name not in scheduler.handlers
        ]
    return [p for p in found if p]


# the scheduler's own methods and handlers that spark-dask may replace on an instance:
# attribute or handler -> the function distributed made it from
OWN_METHODS = ("valid_workers", "decide_worker_non_rootish", "check_idle_saturated")
OWN_STREAM_HANDLERS = {"task-erred": "handle_task_erred", "worker-status-change": "handle_worker_status_change"}
OWN_HANDLERS = {"subscribe_worker_status": "subscribe_worker_status"}


def replaced(scheduler: Scheduler) -> list[str]:
    """The methods and handlers that ``scheduler`` runs as distributed did not make them,
    e.g. ``['valid_workers', "stream_handlers['task-erred']"]``; ``[]`` for a plain
    spark-dask cluster (run it on the scheduler: ``client.run_on_scheduler(replaced)``)."""
    cls = type(scheduler)

    def own(bound, name: str) -> bool:
        return getattr(bound, "__func__", None) is getattr(cls, name)

    found = [name for name in OWN_METHODS if not own(getattr(scheduler, name), name)]
    found += [
        f"stream_handlers[{key!r}]"
        for key, name in OWN_STREAM_HANDLERS.items()
        if not own(scheduler.stream_handlers.get(key), name)
    ]
    found += [f"handlers[{key!r}]" for key, name in OWN_HANDLERS.items() if not own(scheduler.handlers.get(key), name)]
    return found
