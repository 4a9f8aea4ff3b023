"""What a :class:`~spark_dask.cluster.SparkCluster` is made of (:class:`ClusterParts`),
typed. The cluster makes its parts and keeps them itself (``cluster._parts``: a
debugger shows them there); it hands them, or the pieces of them each needs, to the
modules that work for it (the start, the worker groups' pools, the report, the MLflow
record, its state-directory entry), and registers them with the cluster in
:mod:`spark_dask.registry`, where what starts from a cluster it did not make finds them
(the hand-off, the signal handlers, the commands). They are no attributes of the
user-facing class, whose public surface is ``distributed.deploy.Cluster``'s and what the
docs describe (``tests/unit/test_surface.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the types only: every one of them is made by the cluster, above
    from spark_dask.capacity import ClusterFacts
    from spark_dask.events import Events
    from spark_dask.gangs import GangMaker, GangPool, WorkerCredentials
    from spark_dask.logdir import KeptLogs
    from spark_dask.named.owner import Entry
    from spark_dask.options import ClusterOptions
    from spark_dask.scheduler import DriverScheduler
    from spark_dask.spark.databricks import DashboardSettings
    from spark_dask.tracking import Tracking


@dataclass(eq=False)
class ClusterParts:
    """The parts, made by the cluster (:func:`spark_dask.cluster.make_parts`; ``pools``,
    ``makers``, ``facts``, ``log_dir`` and ``connect`` once its start has them). Every
    worker group, the default one too, is in ``pools`` and ``makers``.

    Attributes
    ----------
    options : spark_dask.options.ClusterOptions
    env : dict
        The workers' environment variables.
    events : spark_dask.events.Events
    driver_scheduler : spark_dask.scheduler.DriverScheduler
    makers : dict
        Every worker group's :class:`~spark_dask.gangs.maker.GangMaker` by the group's name.
    credentials : spark_dask.gangs.maker.WorkerCredentials
        The workers' Databricks credentials, read at the start (the default group's).
    entry : spark_dask.named.Entry
        The cluster's entry in the state directory.
    log_keeper : spark_dask.logdir.KeptLogs
    pools : dict
        Every worker group's pool by the group's name (:mod:`spark_dask.options.groups`), the
        default group first.
    log_dir : str or None
        The cluster's log directory, once made (:class:`spark_dask.logdir.KeptLogs`).
    facts : spark_dask.capacity.ClusterFacts or None
    timings : dict
        Seconds of each start-up step.
    connect : bool
        Whether the session is Spark Connect.
    drains : list of dict
        What each drain of a decommissioned executor did (:func:`spark_dask.gangs.drain.drain_executor`).
    tracking : spark_dask.tracking.Tracking
        The cluster's record in an MLflow run (made with the cluster, in the thread that
        starts it: MLflow's active run is that thread's).
    handoff_bytes : int
        Bytes moved by ``to_dask`` / ``to_spark`` so far (the MLflow metric).
    """

    options: ClusterOptions
    env: dict[str, str]
    events: Events
    driver_scheduler: DriverScheduler
    credentials: WorkerCredentials
    entry: Entry
    log_keeper: KeptLogs
    tracking: Tracking
    makers: dict[str, GangMaker] = field(default_factory=dict)
    pools: dict[str, GangPool] = field(default_factory=dict)
    log_dir: str | None = None
    facts: ClusterFacts | None = None
    timings: dict[str, float] = field(default_factory=dict)
    connect: bool = False
    drains: list[dict] = field(default_factory=list)
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
    def dashboard_settings(self) -> DashboardSettings | None:
        """How the dashboard is served and linked (Databricks driver proxy); None before
        the scheduler side exists."""
        return self.driver_scheduler.dashboard_settings if self.driver_scheduler is not None else None


__all__ = ["ClusterParts"]
