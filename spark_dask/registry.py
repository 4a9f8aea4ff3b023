"""The clusters of this process (one registry: the atexit hook, the signal handlers and
the hand-off's lookup by scheduler address all read it). Leaf module."""

from __future__ import annotations

import weakref

_clusters: weakref.WeakSet = weakref.WeakSet()


def add(cluster) -> None:
    """A cluster that is starting or running."""
    _clusters.add(cluster)


def discard(cluster) -> None:
    """A cluster that closed."""
    _clusters.discard(cluster)


def clusters() -> list:
    """Every cluster added and not discarded (nor collected)."""
    return list(_clusters)


def live() -> list:
    """The clusters not closing or closed."""
    return [c for c in list(_clusters) if c.status.name not in ("closing", "closed")]
