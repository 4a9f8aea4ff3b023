"""The owner's side of a named cluster: its :class:`Entry` in the state directory
(claimed when its start begins, published once the workers run, removed when it
closes), the scheduler plugins that keep the record current (:class:`EntryWatch`) and
give each handle its own worker-status subscription (:class:`HandleWatch`), and the
handlers on its scheduler (:data:`SCALE`, :data:`ADAPT`, :data:`CLOSE`,
:data:`SUBSCRIBE`) through which a :class:`~spark_dask.named.NamedCluster` of another
process has the owner carry out ``scale``, ``adapt`` and ``close``. Only holders of the
cluster's credentials reach them (TLS with client certificates).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import threading
import time
import uuid
import warnings
from contextlib import suppress
from functools import partial

from distributed.diagnostics.plugin import SchedulerPlugin
from distributed.scheduler import WorkerStatusPlugin

from spark_dask.aio import blocking
from spark_dask.errors import ClusterError, SparkDaskError
from spark_dask.events import outside_package
from spark_dask.named.store import (
    LOCK_WAIT,
    RECORD_FILE,
    extra_groups,
    fallback_root,
    name_taken_message,
    private_dir,
    process_identity,
    read_record,
    state_root,
    take_over,
)
from spark_dask.options import check_name

logger = logging.getLogger("spark_dask")

# The handlers a NamedCluster of another process calls on the owner's scheduler
SCALE, ADAPT, CLOSE = "spark_dask_cluster_scale", "spark_dask_cluster_adapt", "spark_dask_cluster_close"
# A handle's worker-status subscription (HandleWatch): a handler of its own beside
# distributed's subscribe_worker_status, which stays as distributed made it
SUBSCRIBE = "spark_dask_subscribe_worker_status"


class Entry:
    """A cluster's entry in the state directory (``ClusterParts.entry``): claimed when its
    start begins (entering it), published once the workers run (:meth:`publish`),
    removed when the cluster closes (leaving it). A no-op where listing is off.

    Parameters
    ----------
    name : str
        The cluster's name (checked, :func:`spark_dask.options.check_name`).
    tag : str
        Its Spark job tag.
    root : str or None
        The state directory (:func:`~spark_dask.named.store.configured_root`); None: not listed.
    warn : callable, optional
        ``warn(text)``: how to say that the cluster could not be listed (a state
        directory that cannot be written, or is not the user's); default a Python warning.
    lock_wait : float
        Seconds to wait for the state directory's lock when the name's entry is stale
        (:func:`~spark_dask.named.store.take_over`); then the claim fails, saying so.
    """

    def __init__(self, name: str, tag: str, root: str | None, warn=None, lock_wait: float = LOCK_WAIT):
        self.name = check_name(name)
        self.lock_wait = lock_wait  # for the state directory's lock, when taking over a stale entry
        self.tag = tag
        self.root = root
        self.warn = warn or (lambda text: warnings.warn(text, UserWarning, **outside_package()))
        self.directory = os.path.join(root, name) if root is not None else None
        self.record: dict | None = None  # as written last; None until claimed
        self.on_close_request = None  # a handle asked to close: None closes in a thread
        self._lock = threading.Lock()

    def __enter__(self) -> Entry:
        self.claim()
        return self

    def __exit__(self, *exc) -> None:
        self.remove()

    def claim(self) -> None:
        """Take the name: make the entry's directory (one process wins ``os.mkdir``) and
        write the record, status ``starting``; a live holder of the name is an error."""
        if self.directory is None:
            return
        try:
            private_dir(self.root)
        except (OSError, SparkDaskError) as e:
            return self.unlisted(e)
        pid = os.getpid()
        record = {
            "name": self.name,
            "tag": self.tag,
            "status": "starting",
            "pid": pid,
            "pid_start": process_identity(pid) or "",
            "host": socket.gethostname(),
            "started": time.time(),
            "address": None,
            "dashboard": None,
            "workers": 0,
            "tls": None,
            "token": uuid.uuid4().hex,
        }
        for _ in range(3):
            try:
                os.mkdir(self.directory, 0o700)
            except FileExistsError:
                free, other = take_over(self.directory, record["host"], self.lock_wait)
                if not free:
                    raise ClusterError(name_taken_message(self.name, other)) from None
                continue
            except FileNotFoundError:  # the last entry's close removed the empty root meanwhile
                private_dir(self.root)
                continue
            except OSError as e:
                return self.unlisted(e)
            os.chmod(self.directory, 0o700)
            self.record = record
            self.update()
            return
        raise ClusterError(name_taken_message(self.name, None))

    def unlisted(self, problem: Exception) -> None:
        """Say that the cluster runs without an entry (it starts all the same)."""
        self.record = None
        self.warn(
            f"spark-dask: the cluster {self.name!r} is not listed ({problem}): SparkCluster.from_name() "
            "and spark-dask list will not find it"
        )

    def update(self, **changes) -> None:
        """Rewrite the record with ``changes`` (atomically: readers see the old or the new)."""
        if self.record is None:
            return
        with self._lock:
            self.record = {**self.record, **changes}
            path = os.path.join(self.directory, RECORD_FILE)
            temporary = f"{path}.{os.getpid()}.{threading.get_ident()}"
            try:
                fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    json.dump(self.record, f, indent=2)
                os.replace(temporary, path)
            except OSError as e:
                with suppress(OSError):
                    os.unlink(temporary)
                logger.warning(
                    "spark-dask: the record %s of cluster %r could not be rewritten (%s): spark-dask list and "
                    "from_name() read its previous one",
                    path,
                    self.name,
                    e,
                )

    def groups_changed(self, pools: dict) -> None:
        """A worker group was added or removed: the record's ``groups`` (``spark-dask
        list``) from the cluster's pools (by group, the default one first)."""
        self.update(groups=extra_groups(pools))

    def publish(self, cluster, parts) -> None:
        """The cluster runs: its connection files and record (address, dashboard,
        workers), the worker count kept current, the handlers that let handles scale,
        adapt and close it, and status ``closing`` as soon as its teardown begins.
        ``parts``: the cluster's (:class:`spark_dask.parts.ClusterParts`)."""
        if self.record is None:
            return
        scheduler, security = cluster.scheduler, cluster.security
        # the handlers first: a handle may come as soon as the record says running
        scheduler.handlers.update(owner_handlers(cluster, self, parts.events))
        scheduler.handlers[SUBSCRIBE] = subscribe_handler(scheduler)
        scheduler.add_plugin(EntryWatch(self))
        try:
            cluster.write_connection(self.directory)
        except (OSError, SparkDaskError) as e:
            self.remove()
            return self.unlisted(e)
        self.update(
            status="running",
            address=scheduler.address,
            dashboard=cluster.dashboard_link or None,
            workers=len(scheduler.workers),
            tls=bool(security is not None and security.require_encryption),
            groups=extra_groups(parts.pools),
        )
        cluster.add_close_hook(partial(self.update, status="closing"))

    def request_close(self, cluster) -> None:
        """A handle asked the cluster to close: ``on_close_request()`` (``spark-dask
        serve`` closes it from its main thread), else ``cluster.close()`` in a thread."""
        if self.on_close_request is not None:
            self.on_close_request()
        else:
            threading.Thread(target=cluster.close, name="spark-dask-close-request").start()

    def remove(self) -> None:
        """Remove the entry, if it is still this cluster's."""
        if self.record is None:
            return
        found = read_record(self.directory)
        if found is None or found.get("token") == self.record["token"]:
            shutil.rmtree(self.directory, ignore_errors=True)
        if self.root in (state_root("auto"), fallback_root()):  # the default one (not a directory a user named)
            with suppress(OSError):  # removed too when no other entry is left: nothing stays in /tmp
                os.rmdir(self.root)
        self.record = None


class EntryWatch(SchedulerPlugin):
    """Keeps the entry's worker count current (``spark-dask list`` reads it) while the
    cluster runs; once its record says ``closing`` the count is left as it was: the
    teardown removes every worker, and a rewrite of the record for each of them was
    work that grew with the cluster (issue 57), for an entry removed moments later."""

    name = "spark-dask-entry"

    def __init__(self, entry: Entry):
        self.entry = entry

    def closing(self) -> bool:
        """Whether the record says the cluster closes (or there is none)."""
        return (self.entry.record or {}).get("status", "closing") == "closing"

    def add_worker(self, scheduler, worker):
        if not self.closing():
            self.entry.update(workers=len(scheduler.workers))

    def remove_worker(self, scheduler, worker, **kwargs):
        if not self.closing():
            self.entry.update(workers=len(scheduler.workers) - (worker in scheduler.workers))


class HandleWatch(WorkerStatusPlugin):
    """distributed's ``WorkerStatusPlugin`` (what keeps a ``Cluster``'s
    ``scheduler_info`` current), under a name of its own: the scheduler keeps one plugin
    per name, and the stock one's fixed name would make each handle's subscription end
    the owner's (and the previous handle's)."""

    def __init__(self, scheduler, comm):
        self.name = f"worker-status-{uuid.uuid4().hex[:12]}"
        super().__init__(scheduler, comm)


def subscribe_handler(scheduler):
    """The scheduler's :data:`SUBSCRIBE` handler once the cluster is published: as
    distributed's ``subscribe_worker_status`` (the worker identities, then their changes
    on the comm), each subscriber with a :class:`HandleWatch` of its own."""

    def subscribe_worker_status(comm) -> dict:
        for name, plugin in list(scheduler.plugins.items()):  # those of handles that left
            if isinstance(plugin, HandleWatch) and (plugin.bcomm.comm is None or plugin.bcomm.comm.closed()):
                scheduler.remove_plugin(name=name)
        HandleWatch(scheduler, comm)
        identity = scheduler.identity()
        for worker in identity["workers"].values():
            worker.pop("metrics", None)
            worker.pop("last_seen", None)
        return identity

    return subscribe_worker_status


async def carry_out(events, fn, *args, **kwargs) -> dict:
    """Run the owner's ``fn(*args, **kwargs)`` (its public, blocking ``scale`` or
    ``adapt``) in a thread, as a user's call would; the reply names the warnings it gave
    (its own: not those of a user's ``scale()`` at the same time), held by the cluster's
    ``events``."""
    with events.hold(issue=False) as said:
        result = await blocking(partial(fn, *args, **kwargs))
    reply = {"warnings": list(said)}
    if result is not None and hasattr(result, "minimum"):  # adapt(): distributed's Adaptive
        reply.update(minimum=result.minimum, maximum=result.maximum)
    return reply


def owner_handlers(cluster, entry: Entry, events) -> dict:
    """The scheduler handlers a :class:`~spark_dask.named.NamedCluster` calls (``rpc``): the owner's
    ``scale``, ``adapt`` and ``close`` on its own cluster."""

    async def scale(n=0, memory=None, cores=None, group=None):
        by_group = {"group": group} if group else {}  # a handle named a worker group
        return await carry_out(events, cluster.scale, n, memory=memory, cores=cores, **by_group)

    async def adapt(**kwargs):
        return await carry_out(events, cluster.adapt, **kwargs)

    def close():
        entry.request_close(cluster)  # the reply goes out before the scheduler closes
        return {"status": "closing"}

    return {SCALE: scale, ADAPT: adapt, CLOSE: close}
