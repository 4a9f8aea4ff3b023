"""The scheduler side of cross-language tasks (:mod:`spark_dask.xlang`): its plugins are
added to every spark-dask scheduler (and to a plain ``dask scheduler`` with
``--preload spark_dask.xlang.scheduler``), and they use distributed's public hooks only
until the first worker of another language registers: a cluster of Python workers runs
distributed's scheduler as distributed made it.

- **Placement.** A worker of another language (one declaring an ``xlang-<language>``
  resource, :func:`spark_dask.xlang.graph.language_of`) can run only that language's tasks.
  distributed sends an ordinary task to any running worker, so once such a worker
  registers (:meth:`Placement.engage`, from the ``add_worker`` hook, before the
  scheduler places anything on it) it is kept out of the scheduler's ``running``,
  ``idle`` and ``idle_task_count`` sets (what every placement of an unrestricted task
  picks from: ``decide_worker_rootish_*``, ``decide_worker_non_rootish``, work
  stealing's thieves, the memory manager's recipients), and only tasks restricted to
  its resource are placed on it. That wraps three scheduler methods and one stream
  handler (:data:`spark_dask.internals.DISTRIBUTED` lists them, and a test checks their
  signatures against the installed distributed).
- **Versions.** distributed's version check compares Python packages, which such a
  worker does not have: its entry mirrors the scheduler's (its own in ``extra``).
- **Errors.** Its ``task-erred`` carries the other language's text, not a pickled
  exception: the scheduler makes it a :class:`spark_dask.xlang.XLangTaskError`, so
  Python clients raise it as usual.
- **No worker of a language.** A task of a language no connected worker speaks errs
  after ``no_worker_timeout`` seconds (a worker that is starting may join in time),
  saying so, instead of waiting forever.
- **Operations** for clients that do not speak pickle (:class:`Gateway`):
  ``xlang_submit`` (a msgpack graph), ``xlang_gather``, ``xlang_release`` and
  ``xlang_workers``.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from functools import partial

import distributed
from distributed import Client, Future
from distributed.core import Status
from distributed.diagnostics.plugin import SchedulerPlugin
from distributed.protocol.pickle import dumps as dumps_pickle
from distributed.scheduler import decide_worker
from distributed.versions import get_versions

from spark_dask import internals
from spark_dask.xlang.client import submit_ordered
from spark_dask.xlang.graph import (
    XLangError,
    XLangTaskError,
    carry_problem,
    language_of,
    references,
    resource,
    task_order,
)

logger = logging.getLogger("spark_dask")

NO_WORKER_TIMEOUT = 5.0  # seconds a task of a language with no worker waits before it errs
HOLD_CHECK_INTERVAL = 2.0  # seconds between checks for holders whose connection closed


def no_worker_message(language: str, key, function: str) -> str:
    """The error of a task whose language no connected worker speaks."""
    return (
        f"spark-dask: no {language} worker is connected to this cluster's scheduler (none declares the "
        f"Dask resource {resource(language)!r}), so task {key!r} ({function}) cannot run. Start one "
        f"(for node: `node examples/workers/node/worker.mjs <connection directory>`; docs/other-languages.md)."
    )


class Placement(SchedulerPlugin):
    """Keeps ordinary tasks off the workers of other languages and places those
    languages' tasks on them (the module's docstring says how)."""

    name = "spark-dask-xlang"

    def __init__(self, scheduler, no_worker_timeout: float = NO_WORKER_TIMEOUT):
        self.scheduler = scheduler
        self.no_worker_timeout = no_worker_timeout
        self.foreign: dict[str, str] = {}  # worker address -> its language
        self.engaged = False

    def engage(self) -> None:
        """Wrap the scheduler's placement of ordinary tasks and its ``task-erred`` handler
        (once: called when the first worker of another language registers).

        ``handle_worker_status_change`` calls ``check_idle_saturated`` right after it puts
        a worker back into ``running`` (distributed 2024.8 to 2026.8), so the wrapped
        ``check_idle_saturated`` also keeps a worker that resumes out of the sets."""
        if self.engaged:
            return
        self.engaged = True
        scheduler = self.scheduler
        for problem in internals.problems(scheduler):
            logger.warning(
                "spark-dask: the placement of other languages' tasks may not work with distributed %s: %s",
                distributed.__version__,
                problem,
            )
        original_valid = scheduler.valid_workers
        original_decide = scheduler.decide_worker_non_rootish
        original_idle = scheduler.check_idle_saturated
        original_erred = scheduler.stream_handlers["task-erred"]

        def valid_workers(ts):
            language = language_of(ts.resource_restrictions)
            return original_valid(ts) if language is None else self.workers_for(ts)

        def decide_worker_non_rootish(ts):
            if language_of(ts.resource_restrictions) is None:
                return original_decide(ts)
            valid = self.workers_for(ts)
            return decide_worker(ts, valid, valid, partial(scheduler.worker_objective, ts)) if valid else None

        def check_idle_saturated(ws, occ=-1.0):
            original_idle(ws, occ)
            if ws.address in self.foreign:
                self.set_apart(ws)

        def task_erred(key=None, worker=None, exception=None, **msg):
            if exception is None and worker in self.foreign:
                exception = dumps_pickle(self.remote_error(key, worker, msg))
            return original_erred(key=key, worker=worker, exception=exception, **msg)

        scheduler.valid_workers = valid_workers
        scheduler.decide_worker_non_rootish = decide_worker_non_rootish
        scheduler.check_idle_saturated = check_idle_saturated
        scheduler.stream_handlers["task-erred"] = task_erred

    def set_apart(self, ws) -> None:
        """Out of the sets that ordinary tasks are placed from."""
        scheduler = self.scheduler
        scheduler.running.discard(ws)
        scheduler.idle.pop(ws.address, None)
        scheduler.idle_task_count.discard(ws)
        scheduler.saturated.discard(ws)

    def workers_for(self, ts) -> set:
        """The running workers of other languages whose resources satisfy ``ts``."""
        needs = ts.resource_restrictions or {}
        out = set()
        for address in self.foreign:
            ws = self.scheduler.workers.get(address)
            if (
                ws is not None
                and ws.status == Status.running
                and all(ws.resources.get(r, 0) >= n for r, n in needs.items())
            ):
                out.add(ws)
        return out

    def languages(self) -> dict[str, int]:
        """Running workers per language (``python`` included)."""
        out: dict[str, int] = {}
        for address, ws in self.scheduler.workers.items():
            if ws.status == Status.running:
                language = self.foreign.get(address, "python")
                out[language] = out.get(language, 0) + 1
        return out

    def remote_error(self, key, worker: str, msg: dict) -> XLangTaskError:
        ws = self.scheduler.workers.get(worker)
        ts = self.scheduler.tasks.get(key)
        function = ((ts.annotations or {}).get("xlang") or {}).get("function", "?") if ts is not None else "?"
        text = msg.get("exception_text") or "(no message)"
        name = ws.name if ws is not None else worker
        return XLangTaskError(
            f"spark-dask: {self.foreign[worker]} task {key!r} ({function}) failed on worker {name}: {text}",
            str(msg.get("traceback_text") or ""),
        )

    # ------------------------------------------------------------ SchedulerPlugin hooks
    def add_worker(self, scheduler, worker):
        ws = scheduler.workers.get(worker)
        language = language_of(ws.resources) if ws is not None else None
        if language is not None:
            self.engage()
            self.foreign[worker] = language
            self.set_apart(ws)
            # distributed compares the Python packages of every worker with each client's
            # and warns at every Client() when they differ; a worker of another language
            # has none (it exchanges msgpack only), so its entry mirrors the scheduler's
            # and its own versions move to extra["xlang"]["versions"].
            ws.extra.setdefault("xlang", {})["versions"] = ws.versions
            ws.versions = get_versions()

    def remove_worker(self, scheduler, worker, **kwargs):
        self.foreign.pop(worker, None)

    def transition(self, key, start, finish, *args, **kwargs):
        if finish != "no-worker":
            return
        ts = self.scheduler.tasks.get(key)
        if ts is not None and language_of(ts.resource_restrictions) is not None and not self.workers_for(ts):
            asyncio.get_running_loop().call_later(self.no_worker_timeout, self.expire, key)

    def expire(self, key) -> None:
        """Err ``key`` if it still waits for a worker of its language."""
        scheduler = self.scheduler
        ts = scheduler.tasks.get(key)
        if ts is None or ts.state != "no-worker" or self.workers_for(ts):
            return
        language = language_of(ts.resource_restrictions)
        function = ((ts.annotations or {}).get("xlang") or {}).get("function", "?")
        exception = dumps_pickle(XLangError(no_worker_message(language, key, function)))
        stimulus = f"spark-dask-xlang-no-worker-{uuid.uuid4().hex}"
        recommendations = scheduler.transition(key, "erred", exception=exception, cause=key, stimulus_id=stimulus)
        scheduler.transitions(recommendations, stimulus_id=stimulus)


class Gateway(SchedulerPlugin):
    """The operations of clients in other languages. Tasks are submitted by a client of
    the scheduler's own (in its process, made at the first request) and held for the
    requester (a *holder*) until ``xlang_release`` or until the requester's connection
    closes."""

    name = "spark-dask-xlang-gateway"

    def __init__(self, scheduler, placement: Placement):
        self.scheduler = scheduler
        self.placement = placement
        self.client: Client | None = None
        self._client_lock = asyncio.Lock()
        self.holders: dict[str, tuple] = {}  # holder -> (comm, {key: Future})
        self._watch: asyncio.Task | None = None

    def handlers(self) -> dict:
        return {
            "xlang_submit": self.submit,
            "xlang_gather": self.gather,
            "xlang_release": self.release,
            "xlang_workers": self.workers,
        }

    async def own_client(self) -> Client:
        async with self._client_lock:
            if self.client is None:
                s = self.scheduler
                self.client = await Client(
                    s.address, security=s.security, asynchronous=True, set_as_default=False, name="spark-dask-xlang"
                )
                self._watch = asyncio.ensure_future(self.watch_holders())
        return self.client

    async def submit(self, comm, graph=None, holder=None) -> dict:
        """Create the graph's tasks; their Futures are held for ``holder`` (a new one
        when not given). Answers ``{"status": "OK", "holder", "keys"}``."""
        order = task_order(graph)
        inside = {key for key, *_ in order}
        for key, _language, _function, args in order:
            for dep in references(args):
                if dep not in inside and dep not in self.scheduler.tasks:
                    raise XLangError(
                        f"spark-dask: task {key!r} refers to '@{dep}', which is neither in this graph nor on the scheduler"
                    )
        client = await self.own_client()
        holder = holder or f"xlang-{uuid.uuid4().hex}"
        _comm, held = self.holders.setdefault(holder, (comm, {}))
        held.update(submit_ordered(client, order, dict(held), lambda key: held.setdefault(key, self.want(key))))
        return {"status": "OK", "holder": holder, "keys": [key for key, *_ in order]}

    async def gather(self, comm, keys=(), holder=None, timeout=None) -> dict:
        """The results of ``keys`` (waiting for them, at most ``timeout`` seconds):
        ``{"status": "OK", "results": {key: value}}``, or ``{"status": "error", "key",
        "message"}`` for the first that failed or cannot cross languages."""
        await self.own_client()
        held = self.holders.get(holder, (None, {}))[1]
        results = {}
        for key in keys:
            if key not in held and key not in self.scheduler.tasks:
                return {"status": "error", "key": key, "message": f"no task {key!r} on the scheduler"}
            future = held[key] if key in held else self.want(key)
            try:
                value = await asyncio.wait_for(future.result(), timeout)
            except asyncio.TimeoutError:
                return {"status": "error", "key": key, "message": f"task {key!r} did not finish within {timeout} s"}
            except Exception as e:  # noqa: BLE001 - the task's own error, handed to the caller
                return {"status": "error", "key": key, "message": f"{type(e).__name__}: {e}"}
            problem = carry_problem(value, f"the result of task {key!r}")
            if problem:
                return {"status": "error", "key": key, "message": problem}
            results[key] = value
        return {"status": "OK", "results": results}

    def want(self, key) -> Future:
        """A Future of the scheduler's own client for an existing task (a
        ``Future(key, client)`` alone does not tell the scheduler)."""
        future = Future(key, self.client)
        self.scheduler.client_desires_keys(keys=[key], client=self.client.id)
        return future

    def release(self, comm, holder=None, keys=None) -> dict:
        """Let go of ``holder``'s Futures (only ``keys``, if given)."""
        _comm, held = self.holders.get(holder, (None, {}))
        for key in list(held) if keys is None else keys:
            future = held.pop(key, None)
            if future is not None:
                future.release()
        if not held:
            self.holders.pop(holder, None)
        return {"status": "OK"}

    def workers(self, comm) -> dict:
        """Running workers per language, e.g. ``{"python": 2, "node": 1}``."""
        return self.placement.languages()

    async def watch_holders(self) -> None:
        """Release the Futures of holders whose connection closed (a client that died
        without ``xlang_release``)."""
        while self.client is not None:
            await asyncio.sleep(HOLD_CHECK_INTERVAL)
            for holder, (comm, _held) in list(self.holders.items()):
                if comm is not None and comm.closed():
                    self.release(None, holder)

    async def before_close(self) -> None:
        """Its own client leaves before the scheduler closes (no reconnect attempts)."""
        if self._watch is not None:
            self._watch.cancel()
        client, self.client = self.client, None
        self.holders.clear()
        if client is not None:
            await client.close()


def install(scheduler, no_worker_timeout: float = NO_WORKER_TIMEOUT) -> Gateway:
    """Add cross-language placement and operations to ``scheduler`` (a running
    :class:`distributed.Scheduler`, called on its event loop)."""
    placement = Placement(scheduler, no_worker_timeout)
    scheduler.add_plugin(placement)
    gateway = Gateway(scheduler, placement)
    scheduler.add_plugin(gateway)
    scheduler.handlers.update(gateway.handlers())
    return gateway


async def dask_setup(scheduler) -> None:
    """``dask scheduler --preload spark_dask.xlang.scheduler``."""
    install(scheduler)
