"""Blocking calls (py4j, thread joins) from the cluster's event loop, tasks nobody
awaits, and the hooks a cluster runs when it closes."""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading

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
    context = contextvars.copy_context()

    def hand_over(settle) -> None:
        try:
            loop.call_soon_threadsafe(settle)
        except RuntimeError:  # the loop closed meanwhile (its cluster's start failed): nobody awaits it
            logger.debug("spark-dask: %s ended after its event loop closed", getattr(fn, "__name__", fn))

    def run():
        try:
            result = context.run(fn, *args)
        except BaseException as e:  # noqa: BLE001 - handed to the awaiting coroutine
            error = e  # `e` is unbound when the except clause ends; the callback runs later
            hand_over(lambda: future.done() or future.set_exception(error))
        else:
            hand_over(lambda: future.done() or future.set_result(result))

    threading.Thread(target=run, name="spark-dask-blocking", daemon=True).start()
    return await future


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
