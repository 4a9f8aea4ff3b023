"""What a cluster tells its user while it starts and runs, and keeps in
``get_logs()["Cluster"]``: four kinds, from quiet to loud."""

from __future__ import annotations

import contextvars
import datetime
import logging
import os
import sys
import threading
import warnings
from contextlib import ExitStack, contextmanager

logger = logging.getLogger("spark_dask")

# The holds (Held) the calling code runs inside, innermost last. The event loop's work
# for a user's start() or scale() runs in a copy of the calling thread's context
# (distributed's sync, aio.blocking), so its warnings find their caller's hold.
_holds: contextvars.ContextVar[tuple] = contextvars.ContextVar("spark_dask_holds", default=())

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def outside_package() -> dict:
    """``warnings.warn`` keywords that point a warning at the first caller outside
    spark_dask (the user's ``start()`` / ``scale()`` line): ``skip_file_prefixes`` on
    Python >= 3.12, else the ``stacklevel`` of that frame, counted from the caller."""
    if sys.version_info >= (3, 12):
        return {"skip_file_prefixes": (PACKAGE_DIR,)}
    level, frame = 1, sys._getframe(1)
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(PACKAGE_DIR):
        level += 1
        frame = frame.f_back
    return {"stacklevel": level}


class Held:
    """While entered, the Python warnings of an :class:`Events` that the caller's work
    gives wait; at the exit they are issued by the thread that entered (the user's, in
    sync mode, where the start and ``scale()`` run on the event loop's thread, whose
    stack has no user line). Each hold gets its own caller's warnings, also when two
    overlap (a user's ``scale()`` and a handle's); ``issue=False``: only collected, in
    the list entering returns (what a handle's ``scale()`` hears)."""

    def __init__(self, events: Events, issue: bool = True):
        self.events = events
        self.issue = issue
        self.said: list[str] = []
        self.open = False
        self.token = None

    def __enter__(self) -> list[str]:
        with self.events.lock:
            self.open = True
            self.events.holds.append(self)
        self.token = _holds.set((*_holds.get(), self))
        return self.said

    def __exit__(self, *exc) -> None:
        _holds.reset(self.token)
        with self.events.lock:
            self.open = False
            self.events.holds.remove(self)
        if self.issue:
            for msg in self.said:
                warnings.warn(msg, UserWarning, **outside_package())


class Events:
    """The cluster manager's event log (distributed's ``Cluster._cluster_manager_logs``,
    a list of ``(time, text)``) and how each event reaches the user.

    Parameters
    ----------
    logs : list
        Where every event is kept (the cluster's ``_cluster_manager_logs``).
    quiet : bool
        ``log`` prints nothing (``Cluster(quiet=True)``).
    """

    def __init__(self, logs: list, quiet: bool = False):
        self.logs = logs
        self.quiet = quiet
        self.holds: list[Held] = []  # open, oldest first (see hold)
        self.lock = threading.Lock()
        self.warned: list[str] = []  # every Python warning given
        self.closing_said = False  # the close's line (closing)

    def _keep(self, msg: str) -> None:
        self.logs.append((datetime.datetime.now(), msg))

    def note(self, msg: str) -> None:
        """Kept and logged at INFO, not printed (scaling happens often under ``adapt``)."""
        self._keep(msg)
        logger.info(msg)

    def log(self, msg: str) -> None:
        """Kept and printed (unless quiet), as ``Cluster._log`` does."""
        self._keep(msg)
        if not self.quiet:
            print(msg)

    def tell(self, msg: str) -> None:
        """An event the user must see while the cluster runs: kept and logged at
        WARNING (shown even where logging is not set up; not printed too)."""
        self._keep(msg)
        logger.warning(msg)

    def warn(self, msg: str, python_warning: bool = True) -> None:
        """Tell the user once: a Python warning (start-up decisions) or a WARNING log
        record (events while the cluster runs); kept either way."""
        self._keep(msg)
        if not python_warning:
            logger.warning(msg)
            return
        self.warned.append(msg)
        if not self._held(msg):
            warnings.warn(msg, UserWarning, **outside_package())

    def _held(self, msg: str) -> bool:
        """Give ``msg`` to the open holds of the calling context (each collecting one, the
        innermost issuing one); given where no hold's context reaches (a thread of its
        own), to the oldest issuing hold. A context with only collecting holds (a named
        handle's call, :func:`spark_dask.named.owner.carry_out`) keeps its warnings: none goes
        to another caller's hold (a user's ``scale()`` at the same time). False where no
        hold issues it."""
        with self.lock:
            mine = [h for h in _holds.get() if h.events is self and h.open]
            issuing = [h for h in mine if h.issue] if mine else [h for h in self.holds if h.issue][:1]
            for h in [h for h in mine if not h.issue] + issuing[-1:]:
                h.said.append(msg)
            return bool(issuing)

    def hold(self, issue: bool = True) -> Held:
        """``with events.hold(): ...``: the Python warnings the work inside gives (on the
        event loop's thread too) are issued at the end by this thread, pointing at its
        caller's line; ``with events.hold(issue=False) as said:`` only collects them."""
        return Held(self, issue)

    def closing(self, name: str, workers: int, why: str | None = None) -> None:
        """The cluster's close begins: ``why`` told (an idle close says why), else
        :func:`closing_note` noted; once. Before the close hooks: the events an MLflow run
        keeps end with it."""
        if not self.closing_said:
            self.closing_said = True
            if why:
                self.tell(why)
            else:
                self.note(closing_note(name, workers))

    def error(self, msg: str) -> None:
        """The cluster failed: kept, logged at ERROR and printed (unless quiet)."""
        logger.error(msg)
        self.log(msg)


class SharedSilence:
    """distributed's log handlers quieted (``silence_logs``) while any cluster of this
    process asks for it. ``distributed.utils.silence_logging_cmgr`` quiets them for one
    and, leaving, puts back the levels it found: with two clusters, the first to close put
    the INFO lines of the other's scheduler back on the terminal (``Received
    'close-stream'``, ``Closing scheduler``: issue 68 point 6). Here the first cluster
    that asks enters it, and the last that leaves ends it; the first one's level holds
    meanwhile."""

    def __init__(self):
        self._lock = threading.Lock()
        self._holders = 0
        self._stack: ExitStack | None = None

    @contextmanager
    def hold(self, level):
        """Quiet distributed's handlers at ``level`` (as ``silence_logging_cmgr``) until
        the last holder leaves."""
        with self._lock:
            if not self._holders:
                from distributed.utils import silence_logging_cmgr  # distributed's: only the driver's clusters use it

                self._stack = ExitStack()
                self._stack.enter_context(silence_logging_cmgr(level))
            self._holders += 1
        try:
            yield
        finally:
            with self._lock:
                self._holders -= 1
                if not self._holders and self._stack is not None:
                    stack, self._stack = self._stack, None
                    stack.close()


SILENCE = SharedSilence()  # the clusters of this process


def closing_note(name: str, workers: int) -> str:
    """The cluster's last event before its teardown (its events in an MLflow run, its
    ``get_logs()``, ``cluster.log`` end with it; an idle close says its own).

    >>> closing_note("etl", 2)
    "spark-dask: closing cluster 'etl': 2 Dask workers connected; its Spark tasks end and their task slots return to Spark"
    """
    return (
        f"spark-dask: closing cluster {name!r}: {workers} Dask worker{'' if workers == 1 else 's'} connected; "
        "its Spark tasks end and their task slots return to Spark"
    )
