"""Clusters other processes join by name: ``SparkCluster.from_name(name)``,
:func:`list_clusters`, ``spark-dask list`` and ``spark-dask serve``.

Every running cluster has an **entry** in the per-user state directory of the driver host
(``spark-dask.state-dir``; :func:`state_root`, or :func:`fallback_root` where another user
made the default one first: :func:`configured_root`): a directory ``<state-dir>/<name>/`` of
mode 0700 holding ``cluster.json`` (the record: name, Spark job tag, scheduler address,
dashboard link, worker count, owner pid and host, start time, status) and the connection
files of :mod:`spark_dask.connection` (``scheduler.json``, the client TLS credentials, a
Dask config file). The owner claims the name when its start begins (``os.mkdir``: one
winner, so two clusters of one name fail at once), publishes the record once the workers
run, keeps the worker count current (a scheduler plugin) and removes the directory when
the cluster closes. An entry whose owner process is gone (killed, crashed) is stale:
:func:`list_clusters` and :func:`from_name` ignore it and remove it.

Another process's :class:`NamedCluster` is a ``distributed.deploy.Cluster`` for it:
clients connect with the cluster's TLS credentials; ``scale``, ``adapt`` and ``close``
are carried out by the owner, through handlers on its scheduler
(``spark_dask_cluster_scale``, ``_adapt``, ``_close``), which only holders of the cluster's
credentials reach (TLS with client certificates). The decisions (which entries are
alive, what ``list`` shows, the messages) are plain functions here, tested without Spark.
"""

from __future__ import annotations

import asyncio
import datetime
import fcntl
import html
import json
import logging
import os
import shutil
import socket
import stat
import tempfile
import threading
import time
import uuid
import warnings
from contextlib import contextmanager, suppress
from functools import partial

from distributed.core import CommClosedError, Status, rpc
from distributed.deploy.cluster import Cluster
from distributed.diagnostics.plugin import SchedulerPlugin
from distributed.scheduler import WorkerStatusPlugin
from distributed.security import Security

from spark_dask import config, connection, report
from spark_dask.aio import blocking
from spark_dask.errors import ClusterError, ClusterTimeoutError, SparkDaskError
from spark_dask.events import outside_package
from spark_dask.executor.preload import stat_fields
from spark_dask.options import check_name
from spark_dask.parts import parts_of
from spark_dask.sizes import plural

logger = logging.getLogger("spark_dask")

RECORD_FILE = "cluster.json"
# A directory without a record younger than this is a claim in progress (os.mkdir done,
# the record not written yet); older, its owner died in between: stale.
CLAIM_GRACE = 10.0
# How long a start taking over its name's stale entry waits for the state directory's lock
# (held by another process judging an entry: milliseconds, unless that process is stopped
# or hangs: then the start fails, saying so, rather than go on without the lock).
LOCK_WAIT = 5.0
# How long a handle waits for the owner to carry out scale() / adapt(), and for a
# cluster it asked to close to be gone (the owner's close-timeout is 10 s by default).
CALL_TIMEOUT = 60.0
CLOSE_WAIT = 60.0
SCALE, ADAPT, CLOSE = "spark_dask_cluster_scale", "spark_dask_cluster_adapt", "spark_dask_cluster_close"
# A handle's worker-status subscription (HandleWatch): a handler of its own beside
# distributed's subscribe_worker_status, which stays as distributed made it
SUBSCRIBE = "spark_dask_subscribe_worker_status"


# ---------------------------------------------------------------------- pure decisions
def state_root(setting, environ=None, uid=None, tempdir: str | None = None) -> str | None:
    """The state directory for a ``spark-dask.state-dir`` setting.

    Parameters
    ----------
    setting : str, bool or None
        ``"auto"`` (or None, True): ``$XDG_RUNTIME_DIR/spark-dask`` where that variable is
        set, else ``spark-dask-<uid>`` in the temporary directory; ``False`` (or
        ``"false"``): None, clusters are not listed; any other string: that path.
    environ : mapping, optional
        The environment (default ``os.environ``).
    uid : int or str, optional
        The user's id (default ``os.getuid()``).
    tempdir : str, optional
        The temporary directory (default ``tempfile.gettempdir()``).

    Returns
    -------
    str or None
    """
    text = setting.strip() if isinstance(setting, str) else setting
    if text is False or (isinstance(text, str) and text.lower() in ("false", "no", "off", "")):
        return None
    if text in (None, True) or (isinstance(text, str) and text.lower() == "auto"):
        environ = os.environ if environ is None else environ
        if environ.get("XDG_RUNTIME_DIR"):
            return os.path.join(environ["XDG_RUNTIME_DIR"], "spark-dask")
        uid = os.getuid() if uid is None and hasattr(os, "getuid") else (uid if uid is not None else "user")
        return os.path.join(tempdir or tempfile.gettempdir(), f"spark-dask-{uid}")
    return os.path.abspath(os.path.expanduser(os.fspath(text)))


def fallback_root(home: str | None = None, host: str | None = None) -> str:
    """The state directory of the ``auto`` setting where the temporary directory's
    ``spark-dask-<uid>`` is not this user's (another user made it first):
    ``~/.cache/spark-dask/state-<host>``, in the user's home, where no other user makes
    it first (one per host: a home shared by several hosts holds each one's).

    >>> fallback_root("/home/ann", "node-1")
    '/home/ann/.cache/spark-dask/state-node-1'
    """
    home = home or os.path.expanduser("~")
    return os.path.join(home, ".cache", "spark-dask", f"state-{host or socket.gethostname()}")


def taken_root_message(root: str, owner: int, fallback: str) -> str:
    """The line said when the ``auto`` state directory is another user's (or a link or a
    file): where the entries go instead."""
    return (
        f"spark-dask: the state directory {root} is not this user's (owner uid {owner}; another user made it first, "
        f"or it is a link or a file): this user's clusters are listed in {fallback} instead; set "
        "spark-dask.state-dir to choose the directory"
    )


def entry_state(record, age: float, host: str, identity_of) -> str:
    """What an entry is: ``alive`` (its owner process runs on this host), ``stale`` (the
    owner is gone, or its pid now belongs to another process), ``elsewhere`` (written on
    another host: a state directory on a shared file system), or ``claiming`` (no record
    yet, for less than :data:`CLAIM_GRACE` seconds: a start that just took the name).

    Parameters
    ----------
    record : dict or None
        The entry's ``cluster.json`` (None: missing or unreadable).
    age : float
        Seconds since the entry's directory changed.
    host : str
        This host's name.
    identity_of : callable
        ``identity_of(pid)``: :func:`process_identity`.
    """
    if not isinstance(record, dict) or not isinstance(record.get("pid"), int):
        return "claiming" if age < CLAIM_GRACE else "stale"
    if record.get("host") != host:
        return "elsewhere"
    now = identity_of(record["pid"])
    if now is None:
        return "stale"
    started = record.get("pid_start") or ""
    if started and now and now != started:
        return "stale"  # the pid was reused
    return "alive"


def list_rows(records) -> list[dict]:
    """What :func:`list_clusters` returns for the live entries' records: one dict per
    cluster (``name``, ``status``, ``workers``, ``groups``: its worker groups beside the
    default one, ``scheduler``, ``dashboard``, ``pid``,
    ``started``: local time, ISO format; ``tag``, ``directory``), oldest first."""
    rows = []
    for r in sorted(records, key=lambda r: (r.get("started") or 0, r.get("name", ""))):
        started = r.get("started")
        rows.append({
            "name": r.get("name"),
            "status": r.get("status"),
            "workers": r.get("workers"),
            "groups": ",".join(r["groups"]) if r.get("groups") else None,
            "scheduler": r.get("address"),
            "dashboard": r.get("dashboard"),
            "pid": r.get("pid"),
            "started": datetime.datetime.fromtimestamp(started).isoformat(sep=" ", timespec="seconds") if started else None,
            "tag": r.get("tag"),
            "directory": r.get("directory"),
        })  # fmt: skip
    return rows


def extra_groups(pools) -> list[str]:
    """The names of a cluster's worker groups beside the default one (its first pool).

    >>> extra_groups({"default": None, "cpu": None})
    ['cpu']
    """
    return list(pools)[1:]


LIST_COLUMNS = ("name", "status", "workers", "groups", "pid", "started", "scheduler", "dashboard")


def format_rows(rows: list[dict], root: str | None) -> str:
    """``spark-dask list``'s text: a column per :data:`LIST_COLUMNS`, or one line saying
    that none runs (and where they would be listed)."""
    if not rows:
        where = f"state directory {root}" if root else "spark-dask.state-dir is false"
        return f"no spark-dask cluster of this user runs on this host ({where})"
    cells = [[c.upper() for c in LIST_COLUMNS]]
    cells += [["-" if r.get(c) is None else str(r[c]) for c in LIST_COLUMNS] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(LIST_COLUMNS))]
    return "\n".join("  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip() for row in cells)


def unknown_name_message(name: str, names, root: str) -> str:
    """The error of :func:`from_name` for a name no live entry has."""
    running = ", ".join(repr(n) for n in sorted(names))
    known = f"running: {running}" if running else "none is running"
    return (
        f"spark-dask: no cluster named {name!r} runs on this host for this user ({known}; "
        f"state directory {root}). 'spark-dask list' shows them; start one with "
        f"'spark-dask serve --name {name}' or SparkCluster(spark, name={name!r})"
    )


def name_taken_message(name: str, record) -> str:
    """The error of a start whose name a live cluster (or one starting) holds."""
    if not isinstance(record, dict):
        holder = "another start is claiming it right now"
    else:
        where = f" on host {record.get('host')}" if record.get("host") != socket.gethostname() else ""
        holder = f"pid {record.get('pid')}{where}, status {record.get('status')}"
    return (
        f"spark-dask: a cluster named {name!r} already runs for this user ({holder}); choose "
        "another name= (spark-dask --name), or close that one first (SparkCluster.from_name"
        f"({name!r}).close())"
    )


def locked_message(root: str, wait: float) -> str:
    """The error of a start whose name's stale entry cannot be taken over: the state
    directory's lock is still held after ``wait`` seconds."""
    return (
        f"spark-dask: the state directory {root} is still locked by another process after {wait:g}s (a process that "
        f"is stopped or hangs while it removes a stale entry; 'fuser -v {root}' names it): resume or end that "
        "process, or set spark-dask.state-dir to another directory"
    )


def not_running_message(name: str, record: dict) -> str:
    """The error of :func:`from_name` for a cluster still starting, or closing."""
    return (
        f"spark-dask: the cluster named {name!r} is {record.get('status')} (owner pid "
        f"{record.get('pid')}); it can be joined while it runs: try again when 'spark-dask "
        "list' shows it running"
    )


# ---------------------------------------------------------------------- the file system
def process_identity(pid: int) -> str | None:
    """None when no process ``pid`` runs (or it is a zombie); else its start time in
    clock ticks since boot (Linux ``/proc/<pid>/stat``), which tells a reused pid apart,
    or ``""`` where that is not known (no ``/proc``)."""
    if os.path.exists("/proc/self/stat"):
        fields = stat_fields(pid)
        return None if fields is None or fields[0] in ("Z", "X") else fields[19]
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        return ""
    return ""


def private_dir(path: str, create: bool = True) -> bool:
    """Make ``path`` a directory only this user can enter (mode 0700), parents too;
    False when it does not exist and ``create`` is false. A directory of another user,
    or a link, is refused (:class:`~spark_dask.errors.ClusterError`)."""
    if not os.path.lexists(path):
        if not create:
            return False
        os.makedirs(path, mode=0o700, exist_ok=True)
    info = os.lstat(path)
    mine = not hasattr(os, "getuid") or info.st_uid == os.getuid()
    if not stat.S_ISDIR(info.st_mode) or not mine:
        raise ClusterError(
            f"spark-dask: the state directory {path} is not a directory of this user (another "
            "user's, a link or a file); set spark-dask.state-dir to a directory of your own"
        )
    if stat.S_IMODE(info.st_mode) & 0o077:
        os.chmod(path, 0o700)
    return True


def read_record(directory: str) -> dict | None:
    """An entry's record; None where it is missing or unreadable."""
    try:
        with open(os.path.join(directory, RECORD_FILE), encoding="utf-8") as f:
            record = json.load(f)
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def scan(root: str, remove_stale: bool = True) -> dict[str, tuple[str, dict]]:
    """The live entries of ``root``: ``{name: (directory, record)}``; stale ones are
    removed (``remove_stale``), those of other hosts and claims in progress skipped."""
    if not private_dir(root, create=False):
        return {}
    host, found = socket.gethostname(), {}
    for name in sorted(os.listdir(root)):
        if name.startswith("."):  # a stale entry moved aside, being removed (take_over)
            continue
        directory = os.path.join(root, name)
        try:
            age = time.time() - os.stat(directory).st_mtime
        except OSError:
            continue
        if not os.path.isdir(directory):
            continue
        record = read_record(directory)
        state = entry_state(record, age, host, process_identity)
        if state == "alive":
            found[name] = (directory, {**record, "directory": directory})
        elif state == "stale" and remove_stale:
            with suppress(ClusterError):  # the lock is held: left for its holder, or for later
                take_over(directory, host, wait=0.0)
    return found


@contextmanager
def root_lock(root: str, wait: float = LOCK_WAIT):
    """Hold the state directory's lock (``flock`` of the directory itself) inside.

    Not had within ``wait`` seconds (its holder is stopped or hangs): a
    :class:`~spark_dask.errors.ClusterError` (:func:`locked_message`), never inside
    without it. Only where the file system has no such locks (or the directory cannot
    be opened) inside without it, logged at DEBUG."""
    fd, had, problem = None, None, None
    try:
        fd = os.open(root, os.O_RDONLY)
        had = flock_within(fd, wait)
    except OSError as e:  # not opened, or no flock on this file system
        problem = str(e)
    if had is False:
        os.close(fd)
        raise ClusterError(locked_message(root, wait))
    if problem:
        logger.debug(
            "spark-dask: the state directory %s is not locked (%s): a stale entry is taken over without", root, problem
        )
    try:
        yield
    finally:
        if fd is not None:
            os.close(fd)  # the lock goes with it


def flock_within(fd: int, wait: float) -> bool:
    """Take the exclusive ``flock`` of ``fd`` within ``wait`` seconds: True once had."""
    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)


def take_over(directory: str, host: str, wait: float = LOCK_WAIT) -> tuple[bool, dict | None]:
    """Remove the entry ``directory`` if it is stale: ``(True, None)``, its name is free;
    else ``(False, its record)`` (None: a claim in progress).

    Judged and moved aside (``os.rename`` to a hidden name, removed after) under the state
    directory's lock (:func:`root_lock`, had within ``wait`` seconds or a
    :class:`~spark_dask.errors.ClusterError`): of two processes that both found the entry
    stale, the second judges what the first put in its place, instead of removing it."""
    root = os.path.dirname(directory)
    aside = os.path.join(root, f".{os.path.basename(directory)}.stale-{uuid.uuid4().hex[:12]}")
    with root_lock(root, wait):
        record = read_record(directory)
        try:
            age = time.time() - os.stat(directory).st_mtime
        except OSError:  # removed meanwhile: the name is free
            return True, None
        if entry_state(record, age, host, process_identity) != "stale":
            return False, record
        try:
            os.rename(directory, aside)
        except FileNotFoundError:
            return True, None
        except OSError as e:
            logger.warning("spark-dask: the stale entry %s could not be removed (%s)", directory, e)
            return False, record
    shutil.rmtree(aside, ignore_errors=True)
    return True, None


def configured_root() -> str | None:
    """The state directory ``spark-dask.state-dir`` names (None: listing is off).

    For ``auto`` in the temporary directory, ``spark-dask-<uid>`` may have been made by
    another user first (anyone can make it in ``/tmp``): then :func:`fallback_root`,
    said once in a warning. The fallback is kept while it exists (until its last entry
    goes), so that every process of the user finds the clusters started there."""
    root = state_root(config.get("state-dir"))
    if root is None or root != state_root("auto"):
        return root
    fallback = fallback_root()
    if os.path.isdir(fallback):  # in use: clusters started while the other one was not this user's
        return fallback
    if not os.path.lexists(root):
        return root
    info = os.lstat(root)
    if stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid():
        return root
    warnings.warn(taken_root_message(root, info.st_uid, fallback), UserWarning, **outside_package())
    return fallback


def list_clusters() -> list[dict]:
    """The spark-dask clusters of this user running on this host (any process).

    Entries whose owner process is gone are left out and removed. Starts nothing, needs
    no Spark; the worker counts are those the owners recorded at the last change.

    Returns
    -------
    list of dict
        One per cluster, oldest first: ``name``, ``status`` (``starting``, ``running``,
        ``closing``), ``workers``, ``scheduler`` (address), ``dashboard`` (link),
        ``pid`` (of the owner), ``started`` (local time), ``tag`` (Spark job tag),
        ``directory`` (its connection files).

    Examples
    --------
    >>> [c["name"] for c in spark_dask.list_clusters()]      # doctest: +SKIP
    ['etl']
    """
    root = configured_root()
    if root is None:
        return []
    return list_rows(record for _, record in scan(root).values())


async def discover():
    """The running spark-dask clusters of this user on this host, for dask-ctl
    (``dask cluster list``, the JupyterLab extension's cluster list): the
    ``dask_cluster_discovery`` entry point's async generator of ``(name, class)``,
    ``class.from_name(name)`` giving the cluster (:meth:`NamedCluster.from_name`).
    Clusters still starting or closing are left out; nothing is started or touched."""
    for row in list_clusters():
        if row["status"] == "running":
            yield row["name"], NamedCluster


# ---------------------------------------------------------------------- the owner's side
class Entry:
    """A cluster's entry in the state directory (``parts_of(cluster).entry``): claimed when its
    start begins (entering it), published once the workers run (:meth:`publish`),
    removed when the cluster closes (leaving it). A no-op where listing is off.

    Parameters
    ----------
    name : str
        The cluster's name (checked, :func:`spark_dask.options.check_name`).
    tag : str
        Its Spark job tag.
    root : str or None
        The state directory (:func:`configured_root`); None: not listed.
    warn : callable, optional
        ``warn(text)``: how to say that the cluster could not be listed (a state
        directory that cannot be written, or is not the user's); default a Python warning.
    lock_wait : float
        Seconds to wait for the state directory's lock when the name's entry is stale
        (:func:`take_over`); then the claim fails, saying so.
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
        record = {"name": self.name, "tag": self.tag, "status": "starting", "pid": pid,
                  "pid_start": process_identity(pid) or "", "host": socket.gethostname(),
                  "started": time.time(), "address": None, "dashboard": None, "workers": 0,
                  "tls": None, "token": uuid.uuid4().hex}  # fmt: skip
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
                    "from_name() read its previous one", path, self.name, e,
                )  # fmt: skip

    def publish(self, cluster) -> None:
        """The cluster runs: its connection files and record (address, dashboard,
        workers), the worker count kept current, the handlers that let handles scale,
        adapt and close it, and status ``closing`` as soon as its teardown begins."""
        if self.record is None:
            return
        scheduler, security = cluster.scheduler, cluster.security
        # the handlers first: a handle may come as soon as the record says running
        scheduler.handlers.update(owner_handlers(cluster, self))
        scheduler.handlers[SUBSCRIBE] = subscribe_handler(scheduler)
        scheduler.add_plugin(EntryWatch(self))
        try:
            connection.write_connection(cluster, self.directory)
        except (OSError, SparkDaskError) as e:
            self.remove()
            return self.unlisted(e)
        self.update(status="running", address=scheduler.address, dashboard=cluster.dashboard_link or None,
                    workers=len(scheduler.workers), tls=bool(security is not None and security.require_encryption),
                    groups=extra_groups(parts_of(cluster).pools))  # fmt: skip
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
    """Keeps the entry's worker count current (``spark-dask list`` reads it)."""

    name = "spark-dask-entry"

    def __init__(self, entry: Entry):
        self.entry = entry

    def add_worker(self, scheduler, worker):
        self.entry.update(workers=len(scheduler.workers))

    def remove_worker(self, scheduler, worker, **kwargs):
        self.entry.update(workers=sum(1 for a in scheduler.workers if a != worker))


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


async def carry_out(cluster, fn, *args, **kwargs) -> dict:
    """Run the owner's ``fn(*args, **kwargs)`` (its public, blocking ``scale`` or
    ``adapt``) in a thread, as a user's call would; the reply names the warnings it gave
    (its own: not those of a user's ``scale()`` at the same time)."""
    with parts_of(cluster).events.hold(issue=False) as said:
        result = await blocking(partial(fn, *args, **kwargs))
    reply = {"warnings": list(said)}
    if result is not None and hasattr(result, "minimum"):  # adapt(): distributed's Adaptive
        reply.update(minimum=result.minimum, maximum=result.maximum)
    return reply


def owner_handlers(cluster, entry: Entry) -> dict:
    """The scheduler handlers a :class:`NamedCluster` calls (``rpc``): the owner's
    ``scale``, ``adapt`` and ``close`` on its own cluster."""

    async def scale(n=0, memory=None, cores=None, group=None):
        by_group = {"group": group} if group else {}  # a handle named a worker group
        return await carry_out(cluster, cluster.scale, n, memory=memory, cores=cores, **by_group)

    async def adapt(**kwargs):
        return await carry_out(cluster, cluster.adapt, **kwargs)

    def close():
        entry.request_close(cluster)  # the reply goes out before the scheduler closes
        return {"status": "closing"}

    return {SCALE: scale, ADAPT: adapt, CLOSE: close}


# ---------------------------------------------------------------------- another process
def entry_security(directory: str, record: dict) -> Security:
    """The client credentials of an entry's cluster (read into memory), or plain TCP."""
    if not record.get("tls"):
        return Security()

    def read(name):
        with open(os.path.join(directory, name), encoding="ascii") as f:
            return f.read()

    return Security(tls_ca_file=read(connection.CA_FILE), tls_client_cert=read(connection.CERT_FILE),
                    tls_client_key=read(connection.KEY_FILE), require_encryption=True)  # fmt: skip


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
    return NamedCluster(directory, record, entry_security(directory, record), asynchronous=asynchronous,
                        loop=loop, timeout=timeout)  # fmt: skip


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


class NamedCluster(Cluster):
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

    def __init__(self, directory: str, record: dict, security: Security, *, asynchronous=False, loop=None,
                 timeout: float = 10):  # fmt: skip
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

    def __await__(self):
        async def _():
            if self.status == Status.created:
                await self._start()
            return self

        return _().__await__()

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

    def scale(self, n: int = 0, memory=None, cores=None, group: str | None = None):
        """Scale the cluster to ``n`` workers (or enough for ``cores`` threads or
        ``memory`` bytes; with ``group``, that worker group), as the owner's
        ``SparkCluster.scale`` does; its warnings (more than the free Spark task slots
        allow, ...) are issued here. Returns once the owner has taken the request;
        ``wait_for_workers(n)`` waits for the workers."""
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
        with suppress(CommClosedError, OSError):
            await self._ask(CLOSE)
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
        scheduler) as its own ``close()`` does. Returns once it is gone."""
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
        return {"owner": f"pid {r.get('pid')} on {r.get('host')}", "started": started, "Spark job tag": r.get("tag"),
                "connection files": self.directory}  # fmt: skip

    def _repr_html_(self, cluster_status=None):
        rows = "".join(
            f'<tr><td style="text-align: left;"><strong>{html.escape(k)}:</strong> {html.escape(str(v))}</td></tr>'
            for k, v in self.owner_rows().items()
        )
        workers = {} if self.status == Status.closed else dict(self.scheduler_info.get("workers", {}))
        return report.cluster_html(type(self).__name__, self.name, self.scheduler_info, workers, self.dashboard_link,
                                   (cluster_status or "") + f"<table>{rows}</table>")  # fmt: skip

    def __repr__(self):
        n = 0 if self.status == Status.closed else len(self.scheduler_info.get("workers", {}))
        return (
            f"NamedCluster({self.name!r}, {self.scheduler_address!r}, {plural(n, 'worker')}, owner pid "
            f"{self.record.get('pid')}, status={self.status.name})"
        )
