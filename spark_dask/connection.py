"""Connection files: how another process, in any language, joins a running cluster.

:func:`write_connection` writes, into one directory:

- ``scheduler.json``: distributed's scheduler-file format (what
  ``Scheduler(scheduler_file=...)`` writes: ``type``, ``id``, ``address``, ``services``,
  ``started``, ``workers``), read by ``Client(scheduler_file=...)``,
  ``dask worker --scheduler-file`` and clients in other languages;
- ``ca.pem``, ``client-cert.pem``, ``client-key.pem``: the cluster's client TLS
  credentials (mode 0600), when the cluster uses TLS;
- ``spark-dask-client.yaml``: a Dask config file setting ``scheduler-address``,
  ``distributed.comm.require-encryption`` and ``distributed.comm.tls.ca-file`` /
  ``client.cert`` / ``client.key`` (the files above), so that with
  ``DASK_CONFIG=<directory>`` a plain ``distributed.Client()`` in any other process
  joins the cluster.

The directory is created with mode 0700 when it does not exist; one that another user
owns or can write to (or change through a parent) is refused, and no link is followed:
each file is written to a new temporary file (``O_EXCL | O_NOFOLLOW``, mode 0600) renamed
onto its name (:func:`directory_problem`, :func:`write_file`). The files (and a
directory this module created) are removed when the cluster closes: the credentials
are the cluster's own and useless afterwards.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
import uuid
import warnings
from contextlib import suppress

import yaml

from spark_dask.errors import ClusterError

SCHEDULER_FILE = "scheduler.json"
CONFIG_FILE = "spark-dask-client.yaml"
CA_FILE = "ca.pem"
CERT_FILE = "client-cert.pem"
KEY_FILE = "client-key.pem"
# Set by ``spark-dask run`` for the script and its child processes, next to DASK_CONFIG.
ENV_SCHEDULER_FILE = "SPARK_DASK_SCHEDULER_FILE"


def scheduler_identity(scheduler) -> dict:
    """The scheduler file's content: what ``Scheduler(scheduler_file=...)`` writes when it
    starts (``Scheduler.identity()``), without the per-worker details (they change; ask
    the scheduler's ``identity`` operation for them)."""
    return {
        "type": type(scheduler).__name__,
        "id": str(scheduler.id),
        "address": scheduler.address,
        "services": {key: server.port for key, server in scheduler.services.items()},
        "started": scheduler.time_started,
        "workers": {},
    }


def client_config(address: str, tls: dict | None, dashboard_link: str | None = None, *, dotted: bool = False) -> dict:
    """The Dask config that makes a plain ``Client()`` join a cluster.

    Parameters
    ----------
    address : str
        The scheduler's address.
    tls : dict or None
        ``{"ca": ..., "cert": ..., "key": ...}``: the client's TLS credentials, as file
        paths or as in-memory PEM text (:class:`distributed.security.Security` accepts
        either in these keys); None (or empty) for plain TCP.
    dashboard_link : str, optional
        The dashboard URL clients show (the Databricks proxy URL), when not distributed's own.
    dotted : bool
        False: nested, as a YAML config file holds it. True: flat ``"a.b.c"`` keys, as
        ``dask.config.set`` takes them (a nested ``{"distributed": ...}`` given to
        ``dask.config.set`` would replace all of ``distributed``'s settings).

    Returns
    -------
    dict
    """
    cfg: dict = {"scheduler-address": address}
    if tls:
        cfg["distributed"] = {
            "comm": {
                "require-encryption": True,
                "tls": {
                    "ca-file": tls["ca"],
                    "client": {"cert": tls["cert"], "key": tls["key"]},
                },
            }
        }
    if dashboard_link:
        # A format template in distributed: braces would be placeholders.
        link = dashboard_link.replace("{", "{{").replace("}", "}}")
        cfg.setdefault("distributed", {})["dashboard"] = {"link": link}
    return _dotted(cfg) if dotted else cfg


def _dotted(cfg: dict, prefix: str = "") -> dict:
    """``{"a": {"b": 1}}`` as ``{"a.b": 1}``, in the same order."""
    out = {}
    for key, value in cfg.items():
        if isinstance(value, dict):
            out.update(_dotted(value, f"{prefix}{key}."))
        else:
            out[prefix + key] = value
    return out


def proxied_dashboard_link(settings, link: str | None) -> str | None:
    """The dashboard link clients should show: the cluster's proxy URL (``link``) on
    Databricks (``settings``: the cluster's ``DashboardSettings``, None before its
    scheduler side exists), else None (a client's own default, built from the scheduler's
    address, is right there).

    >>> proxied_dashboard_link(None, "http://h:8787/status") is None
    True
    """
    if settings is None or settings.databricks is None:
        return None
    return link or None


# What to do instead, after each refusal of a directory.
USE_INSTEAD = (
    "pass a directory of your own that no other user can write to (a path that does not exist yet is made with "
    "mode 0700), or no directory (a new private temporary one)"
)


def directory_problem(path: str, info: os.stat_result, uid: int, inside: str | None = None) -> str | None:
    """Why :func:`write_connection` refuses to write into ``path`` (``info``: its
    ``lstat``), None where it may; ``inside``: the directory to write into, when
    ``path`` is one of its parents (``info`` then from ``stat``).

    The directory must be this user's (``uid``), no link, and no other user may write
    to it: a user who can (its owner, or anyone where it is group or world writable)
    could plant a link where a file goes, or replace a file once written (the Dask
    config, sending the clients to a scheduler of theirs). A parent must be this
    user's or root's, and writable by others only with the sticky bit (``/tmp``:
    nobody removes or renames another user's entries).

    >>> import os, stat
    >>> fake = lambda mode, uid: os.stat_result((mode, 0, 0, 1, uid, 0, 0, 0, 0, 0))
    >>> directory_problem("/tmp/c", fake(stat.S_IFDIR | 0o700, 1000), 1000) is None
    True
    >>> directory_problem("/tmp/c", fake(stat.S_IFDIR | 0o755, 1001), 1000)[:84]
    'spark-dask: write_connection() refuses /tmp/c: it belongs to another user (uid 1001)'
    >>> directory_problem("/tmp", fake(stat.S_IFDIR | 0o1777, 0), 1000, inside="/tmp/c") is None
    True
    """
    mode = stat.S_IMODE(info.st_mode)
    if inside is not None:
        if info.st_uid in (0, uid) and (not mode & 0o022 or mode & stat.S_ISVTX):
            return None
        return (
            f"spark-dask: write_connection() refuses {inside}: its parent directory {path} can be changed by another "
            f"user (owner uid {info.st_uid}, mode {mode:o}); {USE_INSTEAD}"
        )
    if stat.S_ISLNK(info.st_mode):
        reason = "it is a symbolic link, and no link is followed"
    elif not stat.S_ISDIR(info.st_mode):
        reason = "it is not a directory"
    elif info.st_uid != uid:
        reason = f"it belongs to another user (uid {info.st_uid}), who could replace the files written there"
    elif mode & 0o022:
        reason = f"other users can write to it (mode {mode:o}) and could replace the files written there"
    else:
        return None
    return f"spark-dask: write_connection() refuses {path}: {reason}; {USE_INSTEAD}"


def private_directory(directory) -> tuple[str, bool, int]:
    """``directory`` (absolute, ``~`` expanded; parents' links resolved), made with mode
    0700 where missing (a new temporary one for None), whether this call made it, and a
    descriptor of it (``O_NOFOLLOW``: the directory checked is the one written into).
    A directory :func:`directory_problem` finds fault with is a
    :class:`~spark_dask.errors.ClusterError`; one that others can list, a warning."""
    if directory is None:
        path, created = tempfile.mkdtemp(prefix="spark-dask-connection-"), True  # mode 0700
    else:
        given = os.path.abspath(os.path.expanduser(os.fspath(directory)))
        path = os.path.join(os.path.realpath(os.path.dirname(given)), os.path.basename(given))
        created = not os.path.lexists(path)
        if created:
            os.makedirs(path, mode=0o700)
            os.chmod(path, 0o700)  # makedirs' mode is filtered by the umask
    uid, info, fd = os.geteuid(), os.lstat(path), None
    try:
        if stat.S_ISDIR(info.st_mode):
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
            info = os.fstat(fd)
        problem = directory_problem(path, info, uid)
        parent = os.path.dirname(path)
        while problem is None and parent != os.path.dirname(parent):
            problem = directory_problem(parent, os.stat(parent), uid, inside=path)
            parent = os.path.dirname(parent)
        if problem:
            raise ClusterError(problem)
    except BaseException:
        if fd is not None:
            os.close(fd)
        if created:
            with suppress(OSError):
                os.rmdir(path)
        raise
    if stat.S_IMODE(os.fstat(fd).st_mode) & 0o077:
        warnings.warn(
            f"spark-dask: {path} can be listed by other users; the key files in it are "
            "mode 0600, but a private directory (mode 0700) is safer",
            stacklevel=4,
        )
    return path, created, fd


def write_file(dir_fd: int, name: str, text: str) -> None:
    """Write ``text`` to the file ``name`` of the directory ``dir_fd``, mode 0600, and
    no link followed: into a new temporary file (``O_CREAT | O_EXCL | O_NOFOLLOW``),
    renamed onto ``name`` (a file there is replaced, never written through; a link
    there is refused)."""
    temporary = f".{name}.{uuid.uuid4().hex[:12]}"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=dir_fd)
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), 0o600)  # whatever the umask
            f.write(text.encode())
        with suppress(FileNotFoundError):
            if stat.S_ISLNK(os.lstat(name, dir_fd=dir_fd).st_mode):
                raise ClusterError(
                    f"spark-dask: write_connection() found a symbolic link where its file {name} goes, and follows "
                    f"none; remove it, or {USE_INSTEAD}"
                )
        os.replace(temporary, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with suppress(OSError):
            os.unlink(temporary, dir_fd=dir_fd)
        raise


def _remove(paths: list[str], directory: str | None) -> None:
    """Remove the files written (and the directory, where the call made it)."""
    for p in paths:
        with suppress(OSError):
            os.unlink(p)
    if directory is not None:
        with suppress(OSError):
            os.rmdir(directory)


def write_connection(cluster, directory: str | os.PathLike | None = None, dashboard_link: str | None = None) -> str:
    """Write the files another process needs to join a running ``cluster``; the path
    of ``scheduler.json`` (what ``SparkCluster.write_connection`` does). ``dashboard_link``:
    the link clients should show where it is not their own default
    (:func:`proxied_dashboard_link`).

    ``directory`` (created with mode 0700 if missing; default: a new private
    temporary directory; refused where it is not this user's, is a link, or other users
    can write to it or to a parent of it without the sticky bit) receives:

    - ``scheduler.json``, distributed's scheduler-file format (``address``, ``id``,
      ``services``, ...): ``Client(scheduler_file=...)``, ``dask worker
      --scheduler-file`` and clients in other languages read it;
    - with TLS (the default), the client credentials ``ca.pem``,
      ``client-cert.pem``, ``client-key.pem`` (mode 0600);
    - ``spark-dask-client.yaml``, a Dask config file with ``scheduler-address``,
      ``distributed.comm.require-encryption`` and ``distributed.comm.tls.ca-file`` /
      ``client.cert`` / ``client.key``.

    With ``DASK_CONFIG=<directory>`` in its environment, a plain
    ``distributed.Client()`` in any other process on a machine that can reach the
    scheduler joins the cluster. The files (and a directory this call created) are
    removed when the cluster closes. ``spark-dask run`` does this for its script and
    sets ``DASK_CONFIG`` for the script's child processes.

    Parameters
    ----------
    cluster : SparkCluster
        A running cluster.
    directory : str or os.PathLike, optional
        Where to write the files.

    Returns
    -------
    str
        The path of ``scheduler.json``.

    Examples
    --------
    >>> path = write_connection(cluster, "~/my-cluster")          # doctest: +SKIP
    >>> # in another process: DASK_CONFIG=~/my-cluster python -c \\
    >>> #     "from distributed import Client; print(Client())"
    """
    scheduler = getattr(cluster, "scheduler", None)
    if scheduler is None or cluster.status.name not in ("running", "starting"):
        raise ClusterError(
            f"spark-dask: write_connection() needs a running cluster; this one is "
            f"{cluster.status.name}. Start it (SparkCluster(spark) or spark_dask.start(spark)) first."
        )
    directory, created, dir_fd = private_directory(directory)
    written: list[str] = []

    def put(name: str, text: str) -> str:
        write_file(dir_fd, name, text)
        written.append(os.path.join(directory, name))
        return written[-1]

    try:
        tls_files = None
        sec = getattr(cluster, "security", None)
        if sec is not None and sec.require_encryption and sec.tls_ca_file:
            tls_files = {
                "ca": put(CA_FILE, sec.tls_ca_file),
                "cert": put(CERT_FILE, sec.tls_client_cert),
                "key": put(KEY_FILE, sec.tls_client_key),
            }
        put(
            CONFIG_FILE,
            "# Written by spark-dask's write_connection() for one cluster; removed when it closes.\n"
            f"# DASK_CONFIG={directory} makes distributed.Client() join it.\n"
            + yaml.safe_dump(client_config(scheduler.address, tls_files, dashboard_link), sort_keys=False),
        )
        path = put(SCHEDULER_FILE, json.dumps(scheduler_identity(scheduler), indent=2) + "\n")
    except BaseException:
        _remove(written, directory if created else None)
        raise
    finally:
        os.close(dir_fd)
    cluster.add_close_hook(lambda: _remove(written, directory if created else None))
    return path
