"""The cluster in the user's MLflow run (``mlflow=`` / ``spark-dask.mlflow``,
:func:`log_cluster`): params at the start, metrics over time, artifacts at close.

MLflow is a boundary, as Spark is: only this subpackage imports it, and only where a
cluster is tracked (``import mlflow`` takes seconds, and it is an optional dependency,
the ``mlflow`` extra). A cluster's :class:`Tracking` is made in the thread that starts
the cluster, the one whose active run (MLflow keeps them per thread) it writes into;
:meth:`Tracking.begin` runs once the workers are connected, in the background: the start
never waits on MLflow, and a tracking server that is missing, refuses or does not
answer costs the cluster one line (:func:`spark_dask.tracking.run.off_message`), never
its work. Names of the params, metrics and artifacts: :mod:`.run`, :mod:`.sampler`,
:mod:`.artifacts`.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from contextlib import suppress

from spark_dask import registry
from spark_dask.aio import background, blocking
from spark_dask.errors import PlanError
from spark_dask.spark.conf import conf
from spark_dask.tracking import artifacts
from spark_dask.tracking.redact import Redactor
from spark_dask.tracking.run import (
    CLOSE_WAIT,
    FIRST_CALL_WAIT,
    Link,
    active_run_id,
    cluster_params,
    unreachable,
    versions,
    wanted,
)
from spark_dask.tracking.sampler import Sampler, snapshot, workers_by_group

BATCH = 1000  # metrics per log_batch: MLflow's limit (MAX_METRICS_PER_BATCH)


def _mlflow():
    """MLflow, imported (seconds) where a cluster is tracked; off the event loop."""
    try:
        import mlflow  # an optional dependency (the mlflow extra), imported only when used
    except ImportError as e:
        raise PlanError("spark-dask: MLflow is not installed in this Python: pip install 'spark-dask[mlflow]'") from e
    return mlflow


def _metrics(mlflow, step: int, sample: dict, timestamp: int) -> list:
    """A sample's metrics: its step (the sample's number) and the wall time it was taken
    (ms), not the time the link got to send it."""
    return [mlflow.entities.Metric(k, float(v), timestamp, step) for k, v in sample.items()]


class Tracking:
    """One cluster's record in an MLflow run.

    Parameters
    ----------
    mode : {'auto', True, False}
        The cluster's ``mlflow`` option (:func:`spark_dask.tracking.run.wanted`), read in
        the thread that starts the cluster.
    """

    def __init__(self, mode):
        self.on, self.run_id = wanted(mode)
        self.own_run = False  # the run is the cluster's own (made at the start, ended at close)
        self.link: Link | None = None
        self.client = None
        self.sampler: Sampler | None = None
        self.report: artifacts.ReportStart | None = None
        self.redactor = Redactor()
        self.began: asyncio.Future | None = None
        self.cluster = lambda: None  # a weak reference once begun (the cluster holds this object)
        self.parts = None  # the cluster's parts, once begun

    def begin(self, cluster, parts) -> None:
        """The workers are connected (event loop): begin in the background, once.
        ``parts``: the cluster's (:class:`spark_dask.parts.ClusterParts`)."""
        if self.on and self.began is None:
            self.cluster, self.parts = weakref.ref(cluster), parts
            self.began = background(self.start(cluster), "MLflow tracking")
            cluster.add_close_hook(self.end)

    async def start(self, cluster) -> str | None:
        """Open the run (within :data:`FIRST_CALL_WAIT` seconds), log the params, start
        the sampler; the run's id, or None where MLflow cannot be used."""
        p = self.parts
        scheduler = cluster.scheduler
        self.link = Link(cluster.name, lambda line: p.events.warn(line, python_warning=False))
        self.report = artifacts.ReportStart(scheduler)
        params = {
            **versions(),
            **cluster_params(
                p.facts,
                {n: pool.shape for n, pool in p.pools.items()},
                workers_by_group(scheduler),
                p.timings.get("start"),
            ),
        }
        self.redactor = Redactor(await blocking(conf, cluster.spark, "spark.redaction.regex", None))
        if not await blocking(self.link.wait, "opening the MLflow run", FIRST_CALL_WAIT, self.open_run, params):
            return None
        groups = list(p.pools)
        self.sampler = Sampler(
            lambda: snapshot(scheduler, groups, p.handoff_bytes), self.send_sample, p.options.mlflow_interval
        )
        self.sampler.start()
        return self.run_id

    def open_run(self, params: dict) -> None:
        """Link thread: the client, the run (made where the cluster has none), the params."""
        mlflow = _mlflow()
        problem = unreachable(mlflow.get_tracking_uri())
        if problem:
            return self.link.stop(problem)
        self.client = mlflow.tracking.MlflowClient()
        if self.run_id is None:
            # MLflow's own start: the experiment it would choose for the user's run
            # (mlflow.set_experiment(), MLFLOW_EXPERIMENT_ID/_NAME, a Databricks notebook's
            # own), the run active in the link thread only (MLflow keeps one per thread)
            run = mlflow.start_run(run_name=f"spark-dask {self.link.name}")
            self.run_id, self.own_run = run.info.run_id, True
        params = [mlflow.entities.Param(k, str(v)) for k, v in params.items()]
        self.client.log_batch(self.run_id, params=params)

    def send_sample(self, step: int, sample: dict, timestamp: int | None = None) -> None:
        """Event loop: hand a sample, taken at ``timestamp`` (ms since the epoch; default
        now), to the link (``log_batch`` in its thread)."""
        when = int(time.time() * 1000) if timestamp is None else int(timestamp)
        self.link.send(self.log_sample, step, sample, when)

    def log_sample(self, step: int, sample: dict, timestamp: int) -> None:
        """Link thread: one sample, in batches of at most MLflow's 1,000 metrics."""
        metrics = _metrics(_mlflow(), step, sample, timestamp)
        for i in range(0, len(metrics), BATCH):
            self.client.log_batch(self.run_id, metrics=metrics[i : i + BATCH])

    async def end(self) -> None:
        """Close hook (the workers still run): the last sample, the artifacts, the end of
        a run of the cluster's own; at most :data:`CLOSE_WAIT` seconds on MLflow."""
        if self.began is not None and not self.began.done():
            # a block shorter than the start of tracking: let it finish (it is bounded)
            with suppress(BaseException):
                await asyncio.wait_for(asyncio.shield(self.began), FIRST_CALL_WAIT + 1)
            self.began.cancel()
        if self.sampler is None or self.link is None or self.link.off or self.cluster() is None:
            return await self._close_link()
        self.sampler.stop()
        cluster = self.cluster()
        events = self.parts.events
        try:
            html = await self.report.html(cluster.scheduler)
        except Exception as e:  # noqa: BLE001 - distributed's report (bokeh's templates): the rest goes on
            html = None
            events.note(artifacts.no_report_message(cluster.name, e))
        logs = await artifacts.log_texts(cluster, self.parts)
        texts = artifacts.files(html, logs, artifacts.event_lines(events.logs), self.redactor)
        await blocking(self.link.wait, "sending the artifacts to MLflow", CLOSE_WAIT, self.finish, texts)
        await self._close_link()

    def finish(self, texts: dict) -> None:
        artifacts.upload(self.client, self.run_id, texts)
        if self.own_run:
            _mlflow().end_run()  # the link thread's active run: the cluster's own

    async def _close_link(self) -> None:
        if self.link is not None:
            self.link.close()


def log_cluster(cluster, run_id: str | None = None) -> str | None:
    """Keep what ``cluster`` does in an MLflow run, as ``mlflow=True`` does at its start:
    its params now, its metrics every ``mlflow-interval``, its performance report and
    logs when it closes.

    Parameters
    ----------
    cluster : SparkCluster
        A running cluster of this process (``client.cluster`` of ``spark_dask.start()``).
    run_id : str, optional
        The run; default: the run active in this thread, else a run of the cluster's own
        in the current experiment, ended at close.

    Returns
    -------
    str or None
        The run's id; None where MLflow could not be used (the cluster said so once,
        and runs on). A cluster already tracked is left as it is (its run's id).
    """
    p = registry.parts_of(cluster)
    if p is None:  # not a cluster of this process, or one that closed
        status = getattr(getattr(cluster, "status", None), "name", None)
        got = f"{type(cluster).__name__} ({status})" if status in ("closing", "closed") else type(cluster).__name__
        raise PlanError(f"spark-dask: log_cluster() takes a SparkCluster of this process, got {got}")
    _mlflow()
    tracking = p.tracking
    if tracking.began is None:
        tracking.on, tracking.run_id = True, run_id or active_run_id()
    return cluster.sync(_begun, cluster, p)


async def _begun(cluster, parts) -> str | None:
    """Begin (where not yet begun) and wait until the run answered (bounded)."""
    tracking = parts.tracking
    tracking.begin(cluster, parts)
    return await asyncio.shield(tracking.began)


__all__ = ["Tracking", "log_cluster"]
