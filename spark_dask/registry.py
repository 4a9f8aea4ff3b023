"""The clusters of this process, each with its parts, while they run (from the start of
their start to the end of their close). What starts from a cluster it did not make
finds it here: the atexit hook and the signal handlers (every cluster), the slot counts
(the application's other clusters), the hand-off (the cluster of the user's client or
argument) and the commands (the cluster they started). Everything else is handed the
parts it needs by the cluster itself. Leaf module: weakly keyed, it keeps no cluster
alive."""

from __future__ import annotations

import weakref

_running: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # cluster -> its parts (ClusterParts)


def add(cluster, parts) -> None:
    """A cluster that is starting, and its parts (:class:`spark_dask.parts.ClusterParts`)."""
    _running[cluster] = parts


def discard(cluster) -> None:
    """A cluster that closed."""
    _running.pop(cluster, None)


def clusters() -> list:
    """Every cluster added and not discarded (nor collected)."""
    return list(_running.keys())


def live() -> list:
    """The clusters not closing or closed."""
    return [c for c in clusters() if c.status.name not in ("closing", "closed")]


def parts_of(cluster):
    """The parts of ``cluster``, a cluster of this process that has not closed; None for
    anything else (a closed cluster, a handle found by name, a stand-in)."""
    try:
        return _running.get(cluster)
    except TypeError:  # not weakly referenceable: not a cluster of this process
        return None


__all__ = ["add", "clusters", "discard", "live", "parts_of"]
