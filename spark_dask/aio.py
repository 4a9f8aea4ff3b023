"""Blocking calls (py4j, thread joins) from the cluster's event loop, and the hooks a
cluster runs when it closes."""

from __future__ import annotations

import asyncio
import threading
from contextlib import suppress


async def blocking(fn, *args):
    """Run a blocking call in a thread of its own and await its result.

    Not ``asyncio.to_thread``: its executor refuses work once the interpreter is
    shutting down, which is exactly when the atexit hook has to close clusters.
    """
    loop = asyncio.get_running_loop()
    future = loop.create_future()

    def run():
        try:
            result = fn(*args)
        except BaseException as e:  # noqa: BLE001 - handed to the awaiting coroutine
            error = (
                e  # `e` is unbound when the except clause ends; the callback runs later
            )
            loop.call_soon_threadsafe(
                lambda: future.done() or future.set_exception(error)
            )
        else:
            loop.call_soon_threadsafe(
                lambda: future.done() or future.set_result(result)
            )

    threading.Thread(target=run, name="spark-dask-blocking", daemon=True).start()
    return await future


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
        """Run every hook once (and forget them)."""
        hooks, self._hooks = self._hooks, []
        for hook in reversed(hooks):
            with suppress(Exception):
                result = hook()
                if asyncio.iscoroutine(result):
                    await asyncio.wait_for(result, timeout)
