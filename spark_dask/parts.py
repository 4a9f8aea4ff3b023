"""What a :class:`~spark_dask.cluster.SparkCluster` is made of, for the package's own
modules (the CLI, named clusters, the hand-off, the report, the GPU check) and the
tests: :func:`parts_of` a cluster, not attributes of the user-facing class, whose public
surface is ``distributed.deploy.Cluster``'s and what the docs describe.

The cluster keeps its parts itself (``cluster._parts``: a debugger shows them there);
the table below only finds them for the other modules, which may not read a private
attribute of another module's class (``tools/structure.py``), without a public
attribute on the user-facing class (``tests/unit/test_surface.py``). Weakly keyed: it
keeps no cluster alive.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Any

_of: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # cluster -> its ClusterParts (cluster._parts)


@dataclass(eq=False)
class ClusterParts:
    """The parts, made by the cluster (``pools``, ``makers``, ``facts``, ``log_dir`` and
    ``connect`` once its start has them). Every worker group, the default one too, is
    in ``pools`` and ``makers``.

    Attributes
    ----------
    options : spark_dask.options.ClusterOptions
    env : dict
        The workers' environment variables.
    events : spark_dask.events.Events
    driver_scheduler : spark_dask.scheduler.DriverScheduler
    makers : dict
        Every worker group's :class:`~spark_dask.gang_maker.GangMaker` by the group's name.
    credentials : spark_dask.gang_maker.WorkerCredentials
        The workers' Databricks credentials, read at the start (the default group's).
    entry : spark_dask.named.Entry
        The cluster's entry in the state directory.
    log_keeper : spark_dask.logdir.KeptLogs
    pools : dict
        Every worker group's pool by the group's name (:mod:`spark_dask.groups.spec`), the
        default group first.
    log_dir : str or None
        The cluster's log directory, once made (:class:`spark_dask.logdir.KeptLogs`).
    facts : spark_dask.capacity.ClusterFacts or None
    timings : dict
        Seconds of each start-up step.
    connect : bool
        Whether the session is Spark Connect.
    drains : list of dict
        What each drain of a decommissioned executor did (:func:`spark_dask.drain.drain_executor`).
    tracking : spark_dask.tracking.Tracking or None
        The cluster's record in an MLflow run (made with the start).
    handoff_bytes : int
        Bytes moved by ``to_dask`` / ``to_spark`` so far (the MLflow metric).
    """

    options: Any
    env: dict
    events: Any
    driver_scheduler: Any
    makers: dict = field(default_factory=dict)
    credentials: Any = None
    entry: Any = None
    log_keeper: Any = None
    pools: dict = field(default_factory=dict)
    log_dir: str | None = None
    facts: Any = None
    timings: dict = field(default_factory=dict)
    connect: bool = False
    drains: list = field(default_factory=list)
    tracking: Any = None
    handoff_bytes: int = 0

    @property
    def gangs(self) -> list:
        """Every gang (Spark job) submitted, in order, group by group."""
        return [g for pool in self.pools.values() for g in pool.gangs]

    @property
    def relaunches(self) -> int:
        """Gangs relaunched after a failure, so far, in every worker group."""
        return sum(pool.relaunches for pool in self.pools.values())

    @property
    def dashboard_settings(self):
        """How the dashboard is served and linked (Databricks driver proxy); None before
        the scheduler side exists."""
        return self.driver_scheduler.dashboard_settings if self.driver_scheduler is not None else None


def attach(cluster, made: ClusterParts) -> None:
    """Called by the cluster once, when it makes its parts."""
    _of[cluster] = made


def parts_of(cluster) -> ClusterParts:
    """The parts of ``cluster`` (a :class:`~spark_dask.cluster.SparkCluster`)."""
    return _of[cluster]


def parts_if_any(cluster) -> ClusterParts | None:
    """The parts of ``cluster`` when it is a SparkCluster of this process; None for
    anything else (a handle found by name, a stand-in)."""
    try:
        return _of.get(cluster)
    except TypeError:  # not weakly referenceable: not a cluster of this process
        return None


__all__ = ["ClusterParts", "attach", "parts_if_any", "parts_of"]
