"""Blocking calls (py4j, thread joins) from the cluster's event loop, tasks nobody
awaits, named and bounded waits (:func:`bounded`), the hooks a cluster runs when it
closes, and ``await cluster`` (:class:`StartedOnAwait`)."""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading

from distributed.core import Status

logger = logging.getLogger("spark_dask")


async def blocking(fn, *args):
    """Run a blocking call in a thread of its own and await its result.

    Not ``asyncio.to_thread``: its executor refuses work once the interpreter is
    shutting down, which is exactly when the atexit hook has to close clusters. As
    ``to_thread``, ``fn`` runs in a copy of the caller's context (its warnings reach the
    caller's :meth:`~spark_dask.events.Events.hold`).
    """
    loop = asyncio.get_running_loop()
    future = loop.create_future()
    job = (loop, future, contextvars.copy_context(), fn, args)
    threading.Thread(target=run_and_hand_over, args=job, name="spark-dask-blocking", daemon=True).start()
    return await future


def run_and_hand_over(loop, future: asyncio.Future, context, fn, args) -> None:
    """In a thread: ``fn(*args)`` in ``context``, its result (or exception) handed to
    ``future`` on ``loop``, unless the future is done (its awaiter was cancelled) or the
    loop closed meanwhile (its cluster's start failed: nobody awaits it)."""
    try:
        result, error = context.run(fn, *args), None
    except BaseException as e:  # noqa: BLE001 - handed to the awaiting coroutine
        result, error = None, e
    try:
        loop.call_soon_threadsafe(settle, future, result, error)
    except RuntimeError:
        logger.debug("spark-dask: %s ended after its event loop closed", getattr(fn, "__name__", fn))


def settle(future: asyncio.Future, result=None, error: BaseException | None = None) -> None:
    """Hand ``result`` (or ``error``) to ``future`` unless it is done (cancelled) already."""
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


_unawaited: set[asyncio.Task] = set()  # the event loop keeps only weak references


def background(coro, what: str) -> asyncio.Task:
    """Run ``coro`` as a task nobody awaits (event loop): kept until it ends, and its
    exception logged at WARNING (``spark-dask: <what> failed: ...``) instead of lost."""
    task = asyncio.ensure_future(coro)
    _unawaited.add(task)

    def ended(t: asyncio.Task) -> None:
        _unawaited.discard(t)
        if not t.cancelled() and t.exception() is not None:
            e = t.exception()
            logger.warning("spark-dask: %s failed: %s: %s", what, type(e).__name__, e, exc_info=e)

    task.add_done_callback(ended)
    return task


class CloseHooks:
    """Callables run when a cluster closes, newest first; a coroutine function's
    coroutine is awaited for at most ``timeout`` seconds; a hook that fails does not
    stop the others."""

    def __init__(self):
        self._hooks: list = []

    def add(self, hook) -> None:
        """Run ``hook()`` at close."""
        self._hooks.append(hook)

    async def run(self, timeout: float) -> None:
        """Run every hook once (and forget them); one that fails, or does not finish
        within ``timeout``, is logged at WARNING."""
        hooks, self._hooks = self._hooks, []
        for hook in reversed(hooks):
            try:
                result = hook()
                if asyncio.iscoroutine(result):
                    await asyncio.wait_for(result, timeout)
            except asyncio.TimeoutError:
                logger.warning(
                    "spark-dask: the close hook %r did not finish within %gs; the close goes on",
                    hook,
                    timeout,
                )
            except Exception as e:
                logger.warning(
                    "spark-dask: the close hook %r failed (%s: %s); the close goes on",
                    hook,
                    type(e).__name__,
                    e,
                    exc_info=e,
                )


def gave_up_message(what: str, timeout: float, then: str) -> str:
    """What a named wait (:func:`bounded`) says when its bound passed: ``what`` was
    waited for, ``then`` happens instead.

    >>> gave_up_message("the nanny of Dask worker spark-3 (tcp://h:1) to end it", 10, "its Spark task ends it")
    'spark-dask: waited 10s for the nanny of Dask worker spark-3 (tcp://h:1) to end it, without an answer (frozen?); its Spark task ends it'
    """
    return f"spark-dask: waited {timeout:g}s for {what}, without an answer (frozen?); {then}"


async def bounded(aw, timeout: float, what: str, then, say) -> bool:
    """A named, bounded wait: await ``aw`` for at most ``timeout`` seconds.

    Parameters
    ----------
    aw : awaitable
        What is waited for; its exception, if it ends in time with one, is raised.
    timeout : float
        Seconds.
    what : str
        What is waited for, as :func:`gave_up_message` words it ("the nanny of ...").
    then : str or callable
        What happens instead when the bound passes (a callable is called then, and its
        text said: it acts, e.g. ends the worker through its Spark task).
    say : callable
        ``say(line)``: one WARNING line, kept in the cluster's events
        (``Events.warn(line, python_warning=False)``).

    Returns
    -------
    bool
        True when ``aw`` ended in time; False when the bound passed (``aw`` is cancelled).
    """
    task = asyncio.ensure_future(aw)
    try:
        done, _ = await asyncio.wait({task}, timeout=timeout)
    except asyncio.CancelledError:
        task.cancel()
        raise
    if done:
        task.result()
        return True
    task.cancel()
    say(gave_up_message(what, timeout, then() if callable(then) else then))
    return False


class StartedOnAwait:
    """``await cluster`` starts a ``distributed.deploy.Cluster`` made with
    ``asynchronous=True`` (its ``_start``, once) and returns it, as distributed's
    ``SpecCluster`` does; the base class's ``__await__`` returns at once. A mixin of
    :class:`~spark_dask.cluster.SparkCluster` and of a named cluster's handle, ahead of
    ``Cluster`` in their bases."""

    status: Status

    def __await__(self):
        async def started():
            if self.status == Status.created:
                await self._start()
            return self

        return started().__await__()

    async def _start(self) -> None:
        await super()._start()  # the next base's (distributed's Cluster): the cluster overrides it
