"""Databricks: detect the runtime and serve the dashboard through the driver proxy.

A Databricks notebook reaches web servers on the driver only through the workspace's
*driver proxy*::

    https://<workspace>/driver-proxy/o/<org id>/<cluster id>/<port>/<path>

The proxy refuses port 8787, and the dashboard's pages use absolute paths, so the
scheduler serves its dashboard under the same prefix (``/driver-proxy/o/.../<port>``)
on a free port that is not 8787.

The first part of this module is pure (environment and Spark conf in, names and URLs
out) and is tested without Spark or Databricks. :func:`detect` and
:func:`dashboard_settings` read the session and pick a port.
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass

RUNTIME_ENV = "DATABRICKS_RUNTIME_VERSION"
WORKSPACE_URL = "spark.databricks.workspaceUrl"
CLUSTER_ID = "spark.databricks.clusterUsageTags.clusterId"
ORG_ID = "spark.databricks.clusterUsageTags.clusterOwnerOrgId"
ORG_ID_FALLBACK = "spark.databricks.clusterUsageTags.orgId"
REFUSED_PORTS = frozenset({8787})

# Azure workspaces are named adb-<org id>.<n>.azuredatabricks.net and GCP workspaces
# <org id>.<n>.gcp.databricks.com: the org id can be read from the host when the
# cluster-usage tag is missing. AWS hosts (dbc-<hash>.cloud.databricks.com or a custom
# name) do not carry it.
_ORG_IN_HOST = (
    re.compile(r"^adb-(\d+)\.\d+\.azuredatabricks\.net$"),
    re.compile(r"^(\d+)\.\d+\.gcp\.databricks\.com$"),
)


@dataclass(frozen=True)
class DatabricksInfo:
    """Where this driver runs on Databricks.

    Parameters
    ----------
    runtime_version : str
        ``DATABRICKS_RUNTIME_VERSION``, e.g. ``"15.4"``.
    workspace : str or None
        Workspace host name without scheme, e.g. ``"adb-123.4.azuredatabricks.net"``.
    org_id : str or None
        Workspace (organization) id.
    cluster_id : str or None
        Cluster id, e.g. ``"0123-456789-abcdefgh"``.
    """

    runtime_version: str
    workspace: str | None
    org_id: str | None
    cluster_id: str | None

    @property
    def has_proxy(self) -> bool:
        """Whether everything the driver-proxy URL needs is known."""
        return bool(self.workspace and self.org_id and self.cluster_id)

    @property
    def cloud(self) -> str:
        """``"azure"``, ``"gcp"``, ``"aws"`` or ``"unknown"``, from the workspace host."""
        host = self.workspace or ""
        if host.endswith(".azuredatabricks.net"):
            return "azure"
        if host.endswith(".gcp.databricks.com"):
            return "gcp"
        if host.endswith((".cloud.databricks.com", ".databricks.com")):
            return "aws"
        return "unknown"


def workspace_host(url: str | None) -> str | None:
    """The host name of a workspace URL (scheme, path and trailing slash removed).

    >>> workspace_host("https://adb-1.2.azuredatabricks.net/")
    'adb-1.2.azuredatabricks.net'
    >>> workspace_host("dbc-a1b2.cloud.databricks.com")
    'dbc-a1b2.cloud.databricks.com'
    """
    if not url or not url.strip():
        return None
    text = url.strip()
    text = re.sub(r"^[a-zA-Z][a-zA-Z0-9+.-]*://", "", text)
    return text.split("/", 1)[0].lower() or None


def org_from_host(host: str | None) -> str | None:
    """The org id encoded in an Azure or GCP workspace host name, else None.

    >>> org_from_host("adb-8812345678901234.5.azuredatabricks.net")
    '8812345678901234'
    """
    for pattern in _ORG_IN_HOST:
        m = pattern.match(host or "")
        if m:
            return m.group(1)
    return None


def parse(env: Mapping[str, str], conf: Callable[[str], str | None]) -> DatabricksInfo | None:
    """Databricks facts from the environment and a Spark conf reader; None elsewhere.

    Parameters
    ----------
    env : mapping
        The process environment (``os.environ``).
    conf : callable
        ``conf(key)`` returns the Spark conf value or None.
    """
    version = env.get(RUNTIME_ENV)
    if not version:
        return None
    host = workspace_host(conf(WORKSPACE_URL))
    org = conf(ORG_ID) or conf(ORG_ID_FALLBACK) or org_from_host(host)
    cluster = conf(CLUSTER_ID)
    return DatabricksInfo(version, host, org or None, cluster or None)


def proxy_prefix(info: DatabricksInfo, port: int) -> str:
    """The driver-proxy path prefix of a driver port: ``/driver-proxy/o/<org>/<cluster>/<port>``."""
    if not info.has_proxy:
        raise ValueError("the Databricks workspace, org id or cluster id is unknown")
    return f"/driver-proxy/o/{info.org_id}/{info.cluster_id}/{int(port)}"


def proxy_url(info: DatabricksInfo, port: int, path: str = "status") -> str:
    """The browser URL of ``path`` on a driver port, through the driver proxy."""
    return f"https://{info.workspace}{proxy_prefix(info, port)}/{path.lstrip('/')}"


def normalize_prefix(prefix: str | None) -> str:
    """``""`` for no prefix, else ``/a/b`` (leading slash, no trailing slash).

    >>> normalize_prefix("driver-proxy/o/1/c/9000/")
    '/driver-proxy/o/1/c/9000'
    >>> normalize_prefix("/")
    ''
    """
    text = (prefix or "").strip().strip("/")
    return f"/{text}" if text else ""


def dashboard_url(host: str, port: int, prefix: str = "", scheme: str = "http") -> str:
    """The dashboard's status page served directly (no proxy), under ``prefix``."""
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"{scheme}://{host}:{int(port)}{normalize_prefix(prefix)}/status"


@dataclass(frozen=True)
class DashboardSettings:
    """How the scheduler serves its dashboard and which link the user gets.

    Parameters
    ----------
    address : str
        ``dashboard_address`` for the Scheduler, e.g. ``"10.0.0.5:0"`` or ``":41234"``.
    prefix : str
        ``http_prefix`` for the Scheduler (``""`` for none).
    port : int or None
        The chosen port, when it had to be known in advance (behind a proxy).
    databricks : DatabricksInfo or None
        Set when the link goes through the Databricks driver proxy.
    """

    address: str
    prefix: str = ""
    port: int | None = None
    databricks: DatabricksInfo | None = None

    @property
    def http_prefix(self) -> str:
        """The Scheduler's ``http_prefix`` argument."""
        return self.prefix or "/"

    def link(self, host: str, port: int, scheme: str = "http") -> str:
        """The dashboard link users open (the proxy URL on Databricks)."""
        if self.databricks is not None and self.databricks.has_proxy:
            return proxy_url(self.databricks, port)
        return dashboard_url(host, port, self.prefix, scheme)


def plan_dashboard(
    host: str,
    info: DatabricksInfo | None,
    port: int | None,
    prefix_setting: str | None = "auto",
) -> DashboardSettings:
    """Decide the dashboard address, prefix and link (pure).

    Parameters
    ----------
    host : str
        The driver address executors and users reach.
    info : DatabricksInfo or None
        Databricks facts (:func:`parse`), None off Databricks.
    port : int or None
        A free port that is not 8787 (needed on Databricks, where the prefix names it).
    prefix_setting : str or None
        ``"auto"``: the driver-proxy prefix on Databricks, none elsewhere; any other
        string is used as the prefix (``""`` for none).
    """
    setting = "auto" if prefix_setting is None else str(prefix_setting)
    if info is not None and info.has_proxy:
        if port is None:
            raise ValueError("a dashboard behind the Databricks proxy needs its port chosen first")
        prefix = proxy_prefix(info, port) if setting == "auto" else normalize_prefix(setting)
        # All interfaces: the proxy may reach the driver on loopback or on its address.
        return DashboardSettings(f":{port}", prefix, port, info)
    prefix = "" if setting == "auto" else normalize_prefix(setting)
    return DashboardSettings(f"{host}:{port or 0}", prefix, port, None)


# --------------------------------------------------------------------------------------
# Effectful part: read the session, pick a port.
# --------------------------------------------------------------------------------------


def detect(spark=None, env: Mapping[str, str] | None = None) -> DatabricksInfo | None:
    """Databricks facts of this driver, or None when not on Databricks.

    Reads ``DATABRICKS_RUNTIME_VERSION`` and the ``spark.databricks.*`` conf of
    ``spark`` (classic or Spark Connect; static confs included).
    """
    env = os.environ if env is None else env
    if not env.get(RUNTIME_ENV):
        return None

    def conf(key: str) -> str | None:
        if spark is None:
            return None
        from spark_dask.session import conf as read_conf

        try:
            return read_conf(spark, key)
        except Exception:  # a conf the session cannot read is an unknown fact
            return None

    return parse(env, conf)


def free_port(host: str = "", avoid=REFUSED_PORTS, tries: int = 20) -> int:
    """A port that is free now on ``host`` and not in ``avoid`` (8787: the proxy refuses it)."""
    for _ in range(tries):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((host, 0))
            port = s.getsockname()[1]
        if port not in avoid:
            return port
    raise OSError(f"no free port outside {sorted(avoid)} on {host or 'any address'}")


def dashboard_settings(spark, host: str, prefix_setting: str | None = "auto") -> DashboardSettings:
    """:func:`plan_dashboard` for this driver: detects Databricks and picks the port."""
    info = detect(spark)
    # Behind the proxy the prefix names the port, so it is chosen before the scheduler
    # binds it; elsewhere the scheduler binds port 0 itself (no race).
    port = free_port("") if info is not None and info.has_proxy else None
    return plan_dashboard(host, info, port, prefix_setting)


# --------------------------------------------------------------------------------------
# Sessions spark-dask cannot run in, and the REPL's background jobs.
# --------------------------------------------------------------------------------------

# Workspace host names (AWS, Azure, Azure Government, Azure China, GCP).
_WORKSPACE_SUFFIXES = (
    ".cloud.databricks.com",
    ".azuredatabricks.net",
    ".databricks.azure.us",
    ".databricks.azure.cn",
    ".gcp.databricks.com",
    ".databricks.com",
)

SUPPORTED_ACCESS = (
    "a classic Databricks cluster in dedicated (single user) or no-isolation shared access "
    "mode, from a notebook or job attached to it"
)


def is_workspace_host(host: str | None) -> bool:
    """Whether ``host`` is a Databricks workspace (what Databricks Connect talks to).

    >>> is_workspace_host("adb-123.4.azuredatabricks.net"), is_workspace_host("localhost")
    (True, False)
    """
    name = (host or "").strip().lower().rstrip(".")
    return name.endswith(_WORKSPACE_SUFFIXES)


def connect_problem(
    env: Mapping[str, str],
    server_host: str | None,
    cluster_conf_available: bool,
    scheduler_host: str | None = None,
) -> str | None:
    """Why a Spark Connect session cannot run a Dask cluster on Databricks, or None.

    Parameters
    ----------
    env : mapping
        This process's environment (``DATABRICKS_RUNTIME_VERSION`` marks a driver).
    server_host : str or None
        The Spark Connect server's host name.
    cluster_conf_available : bool
        Whether ``spark.databricks.clusterUsageTags.clusterId`` can be read: serverless
        compute answers ``CONFIG_NOT_AVAILABLE`` for ``spark.databricks.*`` confs.
    scheduler_host : str or None
        An address the user chose for the scheduler (a route the executors have).

    Notes
    -----
    On a Databricks runtime, notebooks on dedicated and no-isolation shared clusters get
    a classic session; a Spark Connect session there means standard (shared) access
    mode or serverless compute, where Python UDFs run sandboxed, cannot open
    connections back to the driver and cannot start processes that outlive them, and
    where GPUs are not offered (Databricks: "Standard compute requirements and
    limitations"; serverless compute limitations). Databricks Connect from outside the
    workspace reaches the cluster, but the executors cannot reach this machine.
    """
    on_driver = bool(env.get(RUNTIME_ENV))
    remote = is_workspace_host(server_host)
    if not on_driver and not remote:
        return None  # open-source Spark Connect: supported
    if not cluster_conf_available:
        where = "Databricks serverless compute"
    elif on_driver:
        where = "a Databricks cluster in standard (shared) access mode"
    elif scheduler_host:
        return None  # Databricks Connect with a route the user vouches for
    else:
        return (
            f"spark-dask: this is a Databricks Connect session to {server_host}: the Dask "
            "scheduler would run on this machine, which the cluster's executors cannot reach. "
            f"Run spark-dask on {SUPPORTED_ACCESS} (or pass scheduler_host=<an address of this "
            "machine that the executors can route to>, e.g. over a VPN)."
        )
    return (
        f"spark-dask cannot start Dask workers on {where}: its Spark Connect sessions run "
        "Python code sandboxed, without network access back to the driver and without the "
        f"processes the workers need (and without GPUs). Use {SUPPORTED_ACCESS} "
        "(Compute > Access mode: Dedicated)."
    )


def entry_point():
    """The Databricks driver's entry point (the object behind ``dbutils``), or None."""
    try:
        from dbruntime import UserNamespaceInitializer

        return UserNamespaceInitializer.getOrCreate().get_spark_entry_point()
    except Exception:
        pass
    try:
        import IPython

        return IPython.get_ipython().user_ns["dbutils"].entry_point
    except Exception:
        return None


def register_background_job_group(group: str, env: Mapping[str, str] | None = None) -> bool | None:
    """Tell Databricks that Spark job group ``group`` belongs to this notebook's REPL.

    Databricks cancels the registered job groups when the REPL is detached or
    restarted, so a barrier job cannot outlive its notebook (what Ray-on-Spark does:
    ``registerBackgroundSparkJobGroup`` of the driver's entry point). Returns None off
    Databricks, True when registered, False when the entry point is missing or refused.
    """
    env = os.environ if env is None else env
    if not env.get(RUNTIME_ENV):
        return None
    ep = entry_point()
    if ep is None:
        return False
    try:
        ep.registerBackgroundSparkJobGroup(group)
    except Exception:
        return False
    return True


__all__ = [
    "DashboardSettings",
    "connect_problem",
    "entry_point",
    "is_workspace_host",
    "register_background_job_group",
    "DatabricksInfo",
    "dashboard_settings",
    "dashboard_url",
    "detect",
    "free_port",
    "org_from_host",
    "parse",
    "plan_dashboard",
    "proxy_prefix",
    "proxy_url",
    "workspace_host",
]
