"""The transfers of each spark-dask cluster: their directories on the workers' machines,
the loading keys that still need them, and their removal.

Lives in the driver process beside the scheduler (:class:`TransferFiles`, a scheduler
plugin): when the scheduler forgets the last loading key of a ``to_dask`` transfer, the
workers remove its files; the cluster's close removes what is left.
:mod:`spark_dask.handoff.driver` registers each transfer here.
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
from functools import partial

import dask.config
from dask.utils import parse_timedelta

from spark_dask import handoff
from spark_dask.aio import bounded
from spark_dask.errors import HandoffError
from spark_dask.handoff import files, transfer
from spark_dask.handoff.files import transfer_of_key, unloaded_keys
from spark_dask.sizes import human_bytes
from spark_dask.spark.shipping import ship_by_value

logger = logging.getLogger("spark_dask")

__all__ = ["TransferFiles", "files_left", "handoff_task_op", "refuse_unloaded", "transfer_files"]


class TransferFiles:
    """Per cluster: transfer directories and the loading keys that still need them.

    Lives in the driver process beside the scheduler (a scheduler plugin): when the
    scheduler forgets the last loading key of a transfer, the workers remove its files.
    """

    def __init__(self, cluster, close_timeout: float | None = None, say=None):
        from distributed.diagnostics.plugin import SchedulerPlugin

        transfers = self

        class Plugin(SchedulerPlugin):
            name = "spark-dask-handoff"

            def transition(self, key, start, finish, *args, **kwargs):
                if finish == "forgotten":
                    transfers._forgotten(key)

            def log_event(self, topic, msg):
                if topic == transfer.PULLED:
                    transfers.pulled(msg)

        self.cluster = cluster
        # how long a removal waits for the workers, and who says it gave up: the
        # cluster's close-timeout and events (a stand-in's: the config's and the log)
        self.close_timeout, self.say = close_timeout, say
        self.lock = threading.Lock()
        self.transfers: dict[str, dict] = {}
        self.said_pulled: set[str] = set()  # transfer directories whose files were read across hosts
        self.removed: list[tuple[str, str]] = []
        self.pending: set = set()  # removals under way (awaited at close)
        cluster.scheduler.add_plugin(Plugin(), name="spark-dask-handoff")

    def add(self, tid: str, dirs, keys=()) -> None:
        with self.lock:
            entry = self.transfers.setdefault(tid, {"dirs": set(), "keys": set()})
            entry["dirs"].update(dirs)
            entry["keys"].update(keys)

    def _forgotten(self, key) -> None:
        """Scheduler thread: a key was forgotten; remove its transfer's files when it was the last."""
        tid = transfer_of_key(key)
        if tid is None:
            return
        with self.lock:
            entry = self.transfers.get(tid)
            if entry is None:
                return
            entry["keys"].discard(key)
            if entry["keys"]:
                return
            del self.transfers[tid]
        import asyncio

        task = asyncio.ensure_future(self._remove(sorted(entry["dirs"])))
        self.pending.add(task)
        task.add_done_callback(self.pending.discard)

    async def _remove(self, dirs) -> None:
        """Every worker removes the transfer directories ``dirs`` of its host; a worker
        that does not answer within close-timeout (frozen) is said, and waited for no more."""
        scheduler = self.cluster.scheduler
        if scheduler is None or not dirs:
            return
        timeout, say = self.close_timeout, self.say or logger.warning
        if timeout is None:
            timeout = parse_timedelta(dask.config.get("spark-dask.close-timeout"))
        where = ", ".join(f"{host}:{path}" for host, path in dirs)
        try:
            removing = scheduler.broadcast(msg={"op": handoff_task_op("remove"), "dirs": list(dirs)}, on_error="ignore")
            if not await bounded(
                removing,
                timeout,
                f"every Dask worker to remove the transfer files in {where}",
                "a worker that did not answer leaves those of its host until its executor stops",
                say,
            ):
                return
        except Exception as e:  # noqa: BLE001 - said; the transfer itself is done
            files_left(dirs, e)
            return
        self.removed.extend(dirs)

    def pulled(self, msg: dict) -> None:
        """A worker streamed a file of a Dask → Spark transfer to a Spark task on another
        machine (Spark ran the read task away from the file's host): said once per
        transfer (WARNING)."""
        name = os.path.basename(os.path.dirname(msg["path"]))
        with self.lock:
            first = name not in self.said_pulled
            self.said_pulled.add(name)
        if first:
            logger.warning(
                "spark-dask: to_spark read %s on %s across hosts: Spark ran its read task on %s, not on %s where "
                "the file is, and the file was streamed over the network (%s). Spark runs a read task elsewhere "
                "when no task slot of its file's host frees within spark.locality.wait (3s by default); free slots "
                "beside the Dask workers, or a longer spark.locality.wait, keep the reads local",
                os.path.basename(msg["path"]),
                name,
                files.worker_host(msg.get("to") or "?"),
                files.worker_host(msg.get("from") or "?"),
                human_bytes(int(msg.get("bytes", 0))),
            )

    def remove_now(self, tid: str) -> None:
        """Driver thread: remove a transfer's files at once (failed transfer, to_spark done);
        returns within close-timeout even when a worker is frozen (:meth:`_remove`)."""
        with self.lock:
            entry = self.transfers.pop(tid, None)
        if entry and entry["dirs"]:
            try:
                self.cluster.sync(self._remove, sorted(entry["dirs"]))
            except Exception as e:  # noqa: BLE001 - said; the transfer's own outcome stands
                files_left(sorted(entry["dirs"]), e)

    async def close(self) -> None:
        """Cluster teardown, before the workers stop: remove every transfer's files,
        and let the removals of released transfers under way finish (the client's
        close releases its keys just before the cluster closes)."""
        import asyncio

        with self.lock:
            dirs = sorted({d for e in self.transfers.values() for d in e["dirs"]})
            self.transfers.clear()
        await self._remove(dirs)
        if self.pending:
            await asyncio.gather(*list(self.pending), return_exceptions=True)


def files_left(dirs, problem: BaseException) -> None:
    """Say (WARNING) that the Dask workers could not remove the transfer directories
    ``dirs`` (``(hostname, path)``) and why."""
    where = ", ".join(f"{host}:{path}" for host, path in dirs)
    logger.warning(
        "spark-dask: the transfer files in %s (the executors' SPARK_LOCAL_DIRS) could not be removed (%s: %s); "
        "they stay until the executors stop, when Spark removes its local directories, or are removed by hand",
        where,
        type(problem).__name__,
        problem,
    )


def handoff_task_op(what: str) -> str:
    return {"put": transfer.PUT, "get": transfer.GET, "remove": transfer.REMOVE}[what]


_setup_lock = threading.Lock()
_local_check = None  # the dask.callbacks.Callback of refuse_unloaded, registered by the first transfer


def refuse_unloaded(graph) -> None:
    """Before one of Dask's local schedulers runs ``graph``: refuse a graph whose
    ``to_dask`` partitions are not in it (computed after their cluster closed, or
    outside its client), which dask would answer with ``Missing dependency
    spark-to-dask-...`` (dask with ``dask._task_spec``) or a column of Future objects (older dask)."""
    keys = unloaded_keys(graph)
    if keys:
        raise HandoffError(
            f"spark-dask: a Dask DataFrame of to_dask (transfer {transfer_of_key(keys[0])}) was computed without "
            "the Dask cluster that holds its partitions: the cluster closed (its partitions went with it), or the "
            "computation ran on another scheduler (scheduler='threads'). Compute it while the cluster runs "
            "(inside its with-block, e.g. .compute() or .to_parquet(...)), or call to_dask again on a new cluster"
        )


_registries: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # cluster -> TransferFiles


def transfer_files(cluster, client, parts) -> TransferFiles:
    """The transfers of ``cluster`` (made with its first transfer); ``parts``: the
    cluster's (:class:`spark_dask.parts.ClusterParts`)."""
    global _local_check
    with _setup_lock:
        if _local_check is None:
            from dask.callbacks import Callback

            _local_check = Callback(start=refuse_unloaded)
            _local_check.register()
        transfers = _registries.get(cluster)
        if transfers is None:
            ship_by_value(*handoff.SHIPPED)  # neither executors nor Dask workers need spark_dask installed
            client.register_plugin(transfer.worker_plugin(), name="spark-dask-handoff")
            say = partial(parts.events.warn, python_warning=False)
            transfers = _registries[cluster] = TransferFiles(cluster, parts.options.close_timeout, say)
            cluster.add_close_hook(transfers.close)  # its files, while the workers can remove them
        return transfers
