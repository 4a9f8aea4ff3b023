"""The per-user state directory of named clusters: where it is (:func:`state_root`,
:func:`fallback_root` where another user made the default one first,
:func:`configured_root`), its entries and their records, which entries are alive
(:func:`entry_state`, :func:`scan`; a stale one is taken over under the directory's lock,
:func:`take_over`), what ``spark-dask list`` shows (:func:`list_clusters`,
:func:`format_rows`) and the messages. Plain functions and the file system: no
cluster, no scheduler.

Every running cluster has an **entry** in the state directory of the driver host
(``spark-dask.state-dir``): a directory ``<state-dir>/<name>/`` of mode 0700 holding
``cluster.json`` (the record: name, Spark job tag, scheduler address, dashboard link,
worker count, owner pid and host, start time, status) and the connection files of
:mod:`spark_dask.connection`. An entry whose owner process is gone (killed, crashed) is
stale: :func:`list_clusters` and :func:`scan` ignore it and remove it.
"""

from __future__ import annotations

import datetime
import fcntl
import json
import logging
import os
import shutil
import socket
import stat
import tempfile
import time
import uuid
import warnings
from contextlib import contextmanager, suppress

from spark_dask.errors import ClusterError
from spark_dask.events import outside_package
from spark_dask.executor.preload import stat_fields
from spark_dask.options import config

logger = logging.getLogger("spark_dask")

RECORD_FILE = "cluster.json"
# A directory without a record younger than this is a claim in progress (os.mkdir done,
# the record not written yet); older, its owner died in between: stale.
CLAIM_GRACE = 10.0
# How long a start taking over its name's stale entry waits for the state directory's lock
# (held by another process judging an entry: milliseconds, unless that process is stopped
# or hangs: then the start fails, saying so, rather than go on without the lock).
LOCK_WAIT = 5.0


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
        rows.append(
            {
                "name": r.get("name"),
                "status": r.get("status"),
                "workers": r.get("workers"),
                "groups": ",".join(r["groups"]) if r.get("groups") else None,
                "scheduler": r.get("address"),
                "dashboard": r.get("dashboard"),
                "pid": r.get("pid"),
                "started": datetime.datetime.fromtimestamp(started).isoformat(sep=" ", timespec="seconds")
                if started
                else None,
                "tag": r.get("tag"),
                "directory": r.get("directory"),
            }
        )
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
    """The error of :func:`~spark_dask.named.from_name` for a name no live entry has."""
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
    """The error of :func:`~spark_dask.named.from_name` for a cluster still starting, or closing."""
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
