"""Another process's side of a named cluster: :func:`from_name` finds the running
cluster of that name in the state directory and gives a :class:`NamedCluster`, a
``distributed.deploy.Cluster`` for it. Clients connect with the cluster's TLS
credentials; ``scale``, ``adapt`` and ``close`` are carried out by the owner, through
the handlers :mod:`spark_dask.named.owner` adds to its scheduler. :func:`discover` is
dask-ctl's ``dask_cluster_discovery`` entry point.
"""

from __future__ import annotations

import asyncio
import html
import os
import time
import warnings
from contextlib import suppress

from distributed.core import CommClosedError, Status, rpc
from distributed.deploy.cluster import Cluster
from distributed.security import Security

from spark_dask import connection, report
from spark_dask.aio import StartedOnAwait
from spark_dask.errors import ClusterError, ClusterTimeoutError
from spark_dask.events import outside_package
from spark_dask.named.owner import ADAPT, CLOSE, SCALE, SUBSCRIBE
from spark_dask.named.store import (
    configured_root,
    list_clusters,
    list_rows,
    not_running_message,
    read_record,
    scan,
    unknown_name_message,
)
from spark_dask.options import check_name
from spark_dask.options.groups import chosen_group
from spark_dask.sizes import plural

# How long a handle waits for the owner to carry out scale() / adapt(), and for a
# cluster it asked to close to be gone (the owner's close-timeout is 10 s by default).
CALL_TIMEOUT = 60.0
CLOSE_WAIT = 60.0


def entry_security(directory: str, record: dict) -> Security:
    """The client credentials of an entry's cluster (read into memory), or plain TCP."""
    if not record.get("tls"):
        return Security()

    def read(name):
        with open(os.path.join(directory, name), encoding="ascii") as f:
            return f.read()

    return Security(
        tls_ca_file=read(connection.CA_FILE),
        tls_client_cert=read(connection.CERT_FILE),
        tls_client_key=read(connection.KEY_FILE),
        require_encryption=True,
    )


def from_name(name: str, *, asynchronous: bool = False, loop=None, timeout: float = 10) -> NamedCluster:
    """The running cluster called ``name`` of another Python process of this user on this
    host (``spark-dask serve --name NAME``, a notebook's ``SparkCluster(spark, name=NAME)``).

    Returns a :class:`~spark_dask.named.NamedCluster`, a ``distributed.deploy.Cluster``:
    ``get_client()`` connects with the cluster's TLS credentials; ``scale()``, ``adapt()``
    and ``close()`` are carried out by the process that owns the cluster; leaving a
    ``with`` block (or ``disconnect()``) only lets go of it.

    Parameters
    ----------
    name : str
        The cluster's name (``spark-dask list`` shows them).
    asynchronous : bool
        ``await SparkCluster.from_name(name, asynchronous=True)`` inside an event loop.
    loop : IOLoop, optional
        The event loop to run on.
    timeout : float
        Seconds to reach the cluster's scheduler before giving up.

    Returns
    -------
    NamedCluster

    Raises
    ------
    SparkDaskError
        No cluster of that name runs (the message names those that do), it is still
        starting or closing, or its scheduler cannot be reached within ``timeout``.

    Examples
    --------
    >>> cluster = spark_dask.SparkCluster.from_name("etl")   # doctest: +SKIP
    >>> client = cluster.get_client()                        # doctest: +SKIP
    >>> cluster.scale(4)                                     # doctest: +SKIP
    """
    check_name(name)
    root = configured_root()
    if root is None:
        raise ClusterError(
            "spark-dask: spark-dask.state-dir is false, so clusters are not listed and none can be found by name"
        )
    found = scan(root)
    if name not in found:
        raise ClusterError(unknown_name_message(name, found, root))
    directory, record = found[name]
    if record.get("status") != "running":
        raise ClusterError(not_running_message(name, record))
    return NamedCluster(
        directory, record, entry_security(directory, record), asynchronous=asynchronous, loop=loop, timeout=timeout
    )


class HandleRpc:
    """A handle's ``scheduler_comm``: the scheduler's ``rpc``, whose live comms (what
    ``Cluster._start`` subscribes on) send the subscription to :data:`SUBSCRIBE`."""

    def __init__(self, scheduler_rpc):
        self.rpc = scheduler_rpc

    def __getattr__(self, name):
        return getattr(self.rpc, name)

    async def live_comm(self):
        return SubscribingComm(await self.rpc.live_comm())


class SubscribingComm:
    """A comm whose ``{"op": "subscribe_worker_status"}`` goes to :data:`SUBSCRIBE`
    (everything else as the comm's own)."""

    def __init__(self, comm):
        object.__setattr__(self, "comm", comm)

    def __getattr__(self, name):
        return getattr(self.comm, name)

    def __setattr__(self, name, value):
        setattr(self.comm, name, value)

    async def write(self, msg, *args, **kwargs):
        if isinstance(msg, dict) and msg.get("op") == "subscribe_worker_status":
            msg = {**msg, "op": SUBSCRIBE}
        return await self.comm.write(msg, *args, **kwargs)


class NamedCluster(StartedOnAwait, Cluster):
    """A running spark-dask cluster owned by another process, found by name
    (:func:`from_name`). A ``distributed.deploy.Cluster``: ``get_client()``,
    ``scheduler_info``, ``dashboard_link``, ``wait_for_workers``, ``get_logs``, the
    notebook widget; ``scale``, ``adapt`` and ``close`` are carried out by the owner.

    Parameters
    ----------
    directory : str
        The cluster's entry (its connection files).
    record : dict
        Its record (``cluster.json``).
    security : distributed.security.Security
        Its client credentials.
    asynchronous, loop
        As for any ``distributed.deploy.Cluster``.
    timeout : float
        Seconds to reach the scheduler.
    """

    _supports_scaling = True

    @classmethod
    def from_name(cls, name: str, **kwargs) -> NamedCluster:
        """The running cluster called ``name``: :func:`spark_dask.named.from_name`
        (dask-ctl's way to get a cluster that :func:`discover` named)."""
        return from_name(name, **kwargs)

    def __init__(
        self, directory: str, record: dict, security: Security, *, asynchronous=False, loop=None, timeout: float = 10
    ):
        super().__init__(asynchronous=asynchronous, loop=loop, name=record["name"], quiet=True)
        self.directory = directory
        self.record = record
        self.security = security
        self.timeout = timeout
        if not self.asynchronous:
            self._loop_runner.start()
            try:
                self.sync(self._start)
            except BaseException:
                self._loop_runner.stop()
                raise

    async def _start(self):
        address = self.record["address"]
        self.scheduler_comm = HandleRpc(rpc(address, connection_args=self.security.get_connection_args("client")))
        try:
            await asyncio.wait_for(super()._start(), self.timeout)
        except Exception as e:
            with suppress(Exception):
                await Cluster._close(self)
            error = ClusterTimeoutError if isinstance(e, asyncio.TimeoutError) else ClusterError
            raise error(
                f"spark-dask: the cluster named {self.name!r} is listed (owner pid {self.record.get('pid')}) but "
                f"its scheduler {address} could not be reached within {self.timeout:g}s: {type(e).__name__}: {e}"
            ) from e

    # ------------------------------------------------------------------ carried out by the owner
    async def _ask(self, op: str, **kwargs) -> dict:
        try:
            return await asyncio.wait_for(getattr(self.scheduler_comm, op)(**kwargs), CALL_TIMEOUT)
        except asyncio.TimeoutError:
            raise ClusterTimeoutError(
                f"spark-dask: no answer from the owner of the cluster named {self.name!r} (pid "
                f"{self.record.get('pid')}) within {CALL_TIMEOUT:g}s to {op.removeprefix('spark_dask_cluster_')}(); "
                "it may be busy or stuck: "
                "try again, or check the owner process"
            ) from None

    def _carry_out(self, op: str, **kwargs):
        """The owner's answer to ``op``; its warnings issued here, as the owner's own
        ``scale()`` issues them (an awaitable in asynchronous mode)."""
        if self.asynchronous:
            return self._ask_and_warn(op, **kwargs)
        return self._warn(self.sync(self._ask, op, **kwargs))

    async def _ask_and_warn(self, op: str, **kwargs):
        return self._warn(await self._ask(op, **kwargs))

    @staticmethod
    def _warn(reply: dict) -> dict:
        for msg in reply.get("warnings", ()):
            warnings.warn(msg, UserWarning, **outside_package())
        return {k: v for k, v in reply.items() if k != "warnings"}

    def scale(self, n: int = 0, memory=None, cores=None, group: str | None = None, worker_group: str | None = None):
        """Scale the cluster to ``n`` workers (or enough for ``cores`` threads or
        ``memory`` bytes; with ``group``, or ``worker_group`` as dask-kubernetes names it,
        that worker group), as the owner's ``SparkCluster.scale`` does; its warnings (more
        than the free Spark task slots allow, ...) are issued here. Returns once the owner
        has taken the request; ``wait_for_workers(n)`` waits for the workers."""
        group = chosen_group(group, worker_group)
        # ``group`` only when given: an owner of an older spark-dask takes no such argument
        out = self._carry_out(SCALE, n=n, memory=memory, cores=cores, **({"group": group} if group else {}))
        return out if self.asynchronous else None

    def adapt(self, Adaptive=None, **kwargs):
        """Let the owner run distributed's ``Adaptive`` on the cluster (``minimum``,
        ``maximum``, ``minimum_cores``, ``maximum_memory``, ``interval``, ...: the
        keyword arguments of ``SparkCluster.adapt``). Returns the owner's reply: the
        ``minimum`` and ``maximum`` it adapts between."""
        if Adaptive is not None:
            raise ClusterError(
                "spark-dask: adapt(Adaptive=...) is not possible on a cluster found by name: its owner runs "
                "distributed's Adaptive; pass its keyword arguments (minimum=, maximum=, ...) only"
            )
        return self._carry_out(ADAPT, **kwargs)

    async def _close(self):
        """Ask the owner to close the cluster, then wait (at most :data:`CLOSE_WAIT`
        seconds) until its scheduler is gone and its entry removed: the name is free then."""
        if self.status == Status.closed:
            return
        # closing from here on, as distributed's own Cluster._close says first: a Client of this
        # handle (get_client()) whose connection then ends closes with it (Client._handle_report)
        # instead of reconnecting to the gone scheduler, which logged ConnectionRefusedError and,
        # cancelled at the process's exit, a CancelledError traceback (issue 68 point 6)
        self.status = Status.closing
        try:
            await self._ask(CLOSE)
        except (CommClosedError, OSError):
            pass
        except BaseException:  # no answer: the cluster may still run, and this handle with it
            self.status = Status.running
            raise
        deadline = time.monotonic() + CLOSE_WAIT
        watch = self._watch_worker_status_task
        if watch is not None:
            with suppress(Exception):
                await asyncio.wait_for(asyncio.shield(watch), CLOSE_WAIT)
        token = self.record.get("token")
        while time.monotonic() < deadline and (read_record(self.directory) or {}).get("token") == token:
            await asyncio.sleep(0.05)  # the owner removes the entry last, after its Spark jobs ended
        await Cluster._close(self)

    def close(self, timeout: float | None = None):
        """Close the cluster for everyone: the owner closes it (workers, Spark jobs,
        scheduler) as its own ``close()`` does. Returns once it is gone; the clients of
        this handle (``get_client()``) close with it."""
        out = super().close(timeout=timeout)
        if not self.asynchronous:
            with suppress(Exception):
                self._loop_runner.stop()
        return out

    def disconnect(self):
        """Let go of the cluster (this handle's connections) and leave it running."""
        if self.status == Status.closed:
            return None
        out = self.sync(Cluster._close, self)
        if not self.asynchronous:
            with suppress(Exception):
                self._loop_runner.stop()
        return out

    def __exit__(self, exc_type, exc_value, traceback):
        self.disconnect()

    async def __aexit__(self, exc_type, exc_value, traceback):
        await Cluster._close(self)

    # ------------------------------------------------------------------ what it shows
    @property
    def dashboard_link(self) -> str:
        """The dashboard link the owner shows (on Databricks the driver-proxy URL)."""
        return self.record.get("dashboard") or super().dashboard_link

    def owner_rows(self) -> dict:
        """The owner's facts the widget shows."""
        r = self.record
        started = list_rows([r])[0]["started"]
        return {
            "owner": f"pid {r.get('pid')} on {r.get('host')}",
            "started": started,
            "Spark job tag": r.get("tag"),
            "connection files": self.directory,
        }

    def _repr_html_(self, cluster_status=None):
        rows = "".join(
            f'<tr><td style="text-align: left;"><strong>{html.escape(k)}:</strong> {html.escape(str(v))}</td></tr>'
            for k, v in self.owner_rows().items()
        )
        workers = {} if self.status == Status.closed else dict(self.scheduler_info.get("workers", {}))
        return report.cluster_html(
            type(self).__name__,
            self.name,
            self.scheduler_info,
            workers,
            self.dashboard_link,
            (cluster_status or "") + f"<table>{rows}</table>",
        )

    def __repr__(self):
        n = 0 if self.status == Status.closed else len(self.scheduler_info.get("workers", {}))
        return (
            f"NamedCluster({self.name!r}, {self.scheduler_address!r}, {plural(n, 'worker')}, owner pid "
            f"{self.record.get('pid')}, status={self.status.name})"
        )


async def discover():
    """The running spark-dask clusters of this user on this host, for dask-ctl
    (``dask cluster list``, the JupyterLab extension's cluster list): the
    ``dask_cluster_discovery`` entry point's async generator of ``(name, class)``,
    ``class.from_name(name)`` giving the cluster (:meth:`NamedCluster.from_name`).
    Clusters still starting or closing are left out; nothing is started or touched."""
    for row in list_clusters():
        if row["status"] == "running":
            yield row["name"], NamedCluster
