"""What a cluster tells its user while it starts and runs, and keeps in
``get_logs()["Cluster"]``: four kinds, from quiet to loud."""

from __future__ import annotations

import datetime
import logging
import os
import sys
import warnings

logger = logging.getLogger("spark_dask")

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
    """While entered, the Python warnings of an :class:`Events` wait; at the exit they
    are issued by the thread that entered (the user's, in sync mode, where the start
    and ``scale()`` run on the event loop's thread, whose stack has no user line)."""

    def __init__(self, events: Events):
        self.events = events

    def __enter__(self) -> None:
        self.events.held = []

    def __exit__(self, *exc) -> None:
        held, self.events.held = self.events.held or [], None
        for msg in held:
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
        self.held: list[str] | None = None  # Python warnings waiting (see hold)
        self.warned: list[str] = []  # every Python warning given (a handle's scale() hears its own)

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
        held = self.held
        if python_warning:
            self.warned.append(msg)
        if python_warning and held is not None:
            held.append(msg)
        elif python_warning:
            warnings.warn(msg, UserWarning, **outside_package())
        else:
            logger.warning(msg)

    def hold(self) -> Held:
        """``with events.hold(): ...``: the Python warnings given meanwhile (from any
        thread) are issued at the end by this thread, pointing at its caller's line."""
        return Held(self)

    def error(self, msg: str) -> None:
        """The cluster failed: kept, logged at ERROR and printed (unless quiet)."""
        logger.error(msg)
        self.log(msg)
