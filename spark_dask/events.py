"""What a cluster tells its user while it starts and runs, and keeps in
``get_logs()["Cluster"]``: four kinds, from quiet to loud."""

from __future__ import annotations

import datetime
import logging
import warnings

logger = logging.getLogger("spark_dask")


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
        if python_warning:
            warnings.warn(msg, stacklevel=2)
        else:
            logger.warning(msg)

    def error(self, msg: str) -> None:
        """The cluster failed: kept, logged at ERROR and printed (unless quiet)."""
        logger.error(msg)
        self.log(msg)
