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

The directory is created with mode 0700 when it does not exist. The files (and a
directory this module created) are removed when the cluster closes: the credentials
are the cluster's own and useless afterwards.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
import warnings
from contextlib import suppress

import yaml

from spark_dask.errors import ClusterError
from spark_dask.executor.gang_task import write_private
from spark_dask.parts import parts_if_any

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


def proxied_dashboard_link(cluster) -> str | None:
    """The dashboard link clients should show: the cluster's proxy URL on Databricks, else
    None (a client's own default, built from the scheduler's address, is right there)."""
    made = parts_if_any(cluster)
    settings = made.dashboard_settings if made is not None else None
    if settings is None or settings.databricks is None:
        return None
    return cluster.dashboard_link or None


def _private_directory(directory) -> tuple[str, bool]:
    """``directory`` (absolute), made with mode 0700 where missing (a new temporary one
    for None), and whether this call made it; warns when others can list it."""
    if directory is None:
        return tempfile.mkdtemp(prefix="spark-dask-connection-"), True  # mode 0700
    directory = os.path.abspath(os.fspath(directory))
    if not os.path.isdir(directory):
        os.makedirs(directory, mode=0o700)
        os.chmod(directory, 0o700)  # makedirs' mode is filtered by the umask
        return directory, True
    if stat.S_IMODE(os.stat(directory).st_mode) & 0o077:
        warnings.warn(
            f"spark-dask: {directory} can be listed by other users; the key files in it are "
            "mode 0600, but a private directory (mode 0700) is safer",
            stacklevel=4,
        )
    return directory, False


def _remove(paths: list[str], directory: str | None) -> None:
    """Remove the files written (and the directory, where the call made it)."""
    for p in paths:
        with suppress(OSError):
            os.unlink(p)
    if directory is not None:
        with suppress(OSError):
            os.rmdir(directory)


def write_connection(cluster, directory: str | os.PathLike | None = None) -> str:
    """Write the files another process needs to join a running ``cluster``; the path
    of ``scheduler.json`` (what ``SparkCluster.write_connection`` does).

    ``directory`` (created with mode 0700 if missing; default: a new private
    temporary directory) receives:

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
    >>> path = write_connection(cluster, "/tmp/my-cluster")       # doctest: +SKIP
    >>> # in another process: DASK_CONFIG=/tmp/my-cluster python -c \\
    >>> #     "from distributed import Client; print(Client())"
    """
    scheduler = getattr(cluster, "scheduler", None)
    if scheduler is None or cluster.status.name not in ("running", "starting"):
        raise ClusterError(
            f"spark-dask: write_connection() needs a running cluster; this one is "
            f"{cluster.status.name}. Start it (SparkCluster(spark) or spark_dask.start(spark)) first."
        )
    directory, created = _private_directory(directory)
    written: list[str] = []

    def put(name: str, text: str) -> str:
        path = os.path.join(directory, name)
        write_private(path, text, replace=True)  # mode 0600 also when the file existed
        written.append(path)
        return path

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
        + yaml.safe_dump(client_config(scheduler.address, tls_files, proxied_dashboard_link(cluster)), sort_keys=False),
    )
    path = put(SCHEDULER_FILE, json.dumps(scheduler_identity(scheduler), indent=2) + "\n")

    cluster.add_close_hook(lambda: _remove(written, directory if created else None))
    return path
