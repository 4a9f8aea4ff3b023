"""The task's line to the scheduler (:class:`TaskLine`, the scheduler handler
:data:`TASK_LINE`): held open while the task's workers run; when the driver cuts it (a
frozen worker) or the scheduler closes, the task ends its workers' process groups
(:func:`line_cut`), frozen processes too.

Shipped by value with the task code (:mod:`spark_dask.executor`): ``distributed`` is
imported where the line opens, inside the task.
"""

from __future__ import annotations

import asyncio
import subprocess
import threading
import time

from spark_dask.executor.processes import stop_workers
from spark_dask.executor.task_spec import TaskSpec

# The scheduler handler each task opens its line with (TaskLine; the driver's side:
# spark_dask.scheduler.DriverScheduler.cut_line).
TASK_LINE = "spark_dask_task_line"


def line_cut(spec: TaskSpec, procs: list, row: dict) -> None:
    """The driver cut this task's line (a worker's nanny did not answer), or the
    scheduler closed: the workers get kill-grace to exit by themselves (at a close their
    nannies are ending them), then what is left of their process groups is killed,
    frozen processes too."""
    deadline = time.monotonic() + float(spec.kill_grace)
    for p in procs:
        try:
            p.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    if any(p.poll() is None for p in procs):
        row.setdefault("notes", []).append("spark-dask: the driver cut this task's line: its Dask workers were ended")
        stop_workers(procs, 0.0)


def _error_text(e: BaseException) -> str:
    """``Type: message`` of ``e``, with the errors it was raised from: distributed's
    ``connect`` reports every failure (TLS, refused, resolver) as a timeout, its cause
    says which."""
    parts, seen = [], set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        text = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
        if not parts or text not in parts[-1]:  # distributed's CommClosedError repeats its cause
            parts.append(text)
        e = e.__cause__ or (None if e.__suppress_context__ else e.__context__)
    return "; from ".join(parts)


class TaskLine:
    """This task's line to the scheduler (the :data:`TASK_LINE` handler): one connection
    held open while the task's workers run.

    The driver cuts it when a worker's nanny does not answer (frozen: SIGSTOP, a hang
    holding the GIL; it keeps its own connections open), and it closes with the
    scheduler: the task then ends its workers' process groups (``on_cut``), what a frozen
    process cannot do itself (a signal other than SIGKILL waits until it runs again).
    Where no line opens (no ``distributed`` in a custom ``worker_command``'s Python, a
    refused connection) the task goes on without; ``error`` says why.

    Parameters
    ----------
    spec : TaskSpec
        The scheduler's address and TLS credentials, the connect timeout.
    workers : list of str
        The names of this task's workers (what the driver cuts the line for).
    on_cut : callable
        Called from the line's thread once the scheduler side closed the line.
    """

    def __init__(self, spec: TaskSpec, workers: list[str], on_cut):
        self.error: str | None = None
        self._loop = asyncio.new_event_loop()
        self._hung_up = asyncio.Event()  # bound to the line's loop when first awaited there
        self._thread = threading.Thread(
            target=self._run, args=(spec, workers, on_cut), name="spark-dask-line", daemon=True
        )
        self._thread.start()

    def _run(self, spec: TaskSpec, workers: list[str], on_cut) -> None:
        try:
            cut = self._loop.run_until_complete(self._hold(spec, workers))
        except Exception as e:  # noqa: BLE001 - no line: the task runs on without one
            self.error, cut = _error_text(e), False
        finally:  # the resolver's threads too: a Python worker Spark reuses forks nannies only without threads
            self._loop.run_until_complete(self._loop.shutdown_default_executor())
            self._loop.close()
        if cut:
            on_cut()

    async def _hold(self, spec: TaskSpec, workers: list[str]) -> bool:
        """Open the line and hold it; True when the scheduler side closed it."""
        from distributed.comm import connect
        from distributed.security import Security

        tls = spec.tls
        security = (
            Security(
                tls_ca_file=tls["ca"], tls_worker_cert=tls["cert"], tls_worker_key=tls["key"], require_encryption=True
            )
            if tls
            else Security()
        )
        # distributed's import takes seconds in a Python worker that never had it (dask-cuda's
        # workers are new processes): the task may end, and its cluster close, before the
        # line opens. Hung up before it opened is no failure: the task no longer needs a line.
        if self._hung_up.is_set():
            return False
        opening = asyncio.ensure_future(
            connect(
                spec.scheduler_address, timeout=float(spec.connect_timeout), **security.get_connection_args("worker")
            )
        )
        hung_up = asyncio.ensure_future(self._hung_up.wait())
        await asyncio.wait({opening, hung_up}, return_when=asyncio.FIRST_COMPLETED)
        hung_up.cancel()
        if not opening.done():
            opening.cancel()
            await asyncio.gather(opening, hung_up, return_exceptions=True)
            return False
        await asyncio.gather(hung_up, return_exceptions=True)
        comm = opening.result()  # raises where the line could not open
        try:
            await comm.write({"op": TASK_LINE, "workers": workers, "reply": False})
            read = asyncio.ensure_future(comm.read())
            hung_up = asyncio.ensure_future(self._hung_up.wait())
            await asyncio.wait({read, hung_up}, return_when=asyncio.FIRST_COMPLETED)
            for waiting in (read, hung_up):
                waiting.cancel()
            await asyncio.gather(read, hung_up, return_exceptions=True)  # the closed comm's error retrieved
            return not self._hung_up.is_set()
        finally:
            comm.abort()

    def hang_up(self, wait: float) -> bool:
        """The task ends: close the line without ``on_cut`` and wait at most ``wait``
        seconds for its thread (a Python worker Spark reuses keeps no thread of it);
        True once the thread has ended."""
        try:
            self._loop.call_soon_threadsafe(self._hung_up.set)
        except RuntimeError:  # its loop ended already (the line was cut, or never opened)
            pass
        self._thread.join(wait)
        return not self._thread.is_alive()
