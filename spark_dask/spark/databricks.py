"""Databricks: detect the runtime, serve the dashboard through the driver proxy, and
read the workspace credentials the workers may be given (:func:`worker_credentials`).

A Databricks notebook reaches web servers on the driver only through the workspace's
*driver proxy*::

    https://<workspace>/driver-proxy/o/<org id>/<cluster id>/<port>/<path>

The proxy connects to the driver's address on ``<port>`` and forwards ``/<path>``
there, with its own prefix **removed**. Every tool known to work through it serves at
the root: dask-databricks (``dask scheduler --dashboard-address :8087``, link
``.../8087/status``; dask-contrib/dask-databricks, ``dask_databricks/cli.py`` and PR 25)
and Ray-on-Spark (its dashboard at the root on ``0.0.0.0`` and a port in 9000-10000;
ray-project/ray, ``python/ray/util/spark/cluster_init.py``). The proxy refuses port 8787
(dask-databricks PR 25 and 32 moved off it for that reason).

So on Databricks the scheduler serves its dashboard **at the root**, on all interfaces,
on a free port in :data:`PROXY_PORTS`. Every URL the status page loads is relative to
it: Bokeh >= 3.3 made its static URLs absolute (``/static/...``, dask/distributed issue
8333), and distributed asks Bokeh for relative ones again (PR 8347:
``DaskBokehTornado.resources`` in ``distributed/dashboard/core.py``); BokehJS builds the
websocket URL from the page's own location. So the page works under the proxy's prefix.
``spark-dask.dashboard-prefix: driver-proxy`` serves it under the full proxy path
instead, for a proxy that forwards the whole path.

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

from spark_dask.errors import ClusterError, PlanError
from spark_dask.spark.conf import conf as read_conf

RUNTIME_ENV = "DATABRICKS_RUNTIME_VERSION"
WORKSPACE_URL = "spark.databricks.workspaceUrl"
CLUSTER_ID = "spark.databricks.clusterUsageTags.clusterId"
ORG_ID = "spark.databricks.clusterUsageTags.clusterOwnerOrgId"
ORG_ID_FALLBACK = "spark.databricks.clusterUsageTags.orgId"
# The driver proxy answers 403 for 8787 (dask-contrib/dask-databricks PR 25).
REFUSED_PORTS = frozenset({8787})
# Ports the driver proxy is known to pass: Ray-on-Spark picks its dashboard (and every
# other head port) with get_random_unused_port(min_port=9000, max_port=10000), and its
# dashboard is opened through /driver-proxy/o/<org>/<cluster>/<port>/ (ray-project/ray,
# python/ray/util/spark/cluster_init.py and databricks_hook.py).
PROXY_PORTS = range(9000, 10000)

# ``spark-dask.dashboard-prefix`` values: AUTO (and "") serve at the root; FULL_PATH
# serves under /driver-proxy/o/<org>/<cluster>/<port> (a proxy that forwards the whole
# path); anything else is used as the prefix itself.
AUTO = "auto"
FULL_PATH = "driver-proxy"

# Workspace host suffixes of each cloud (databricks/databricks-sdk-py,
# databricks/sdk/environments.py): (suffix, cloud, name). First match wins.
_CLOUDS = (
    (".azuredatabricks.net", "azure", "Azure"),
    (".databricks.azure.us", "azure", "Azure Government"),
    (".databricks.azure.cn", "azure", "Azure China"),
    (".gcp.databricks.com", "gcp", "GCP"),
    (".cloud.databricks.us", "aws", "AWS GovCloud"),
    (".cloud.databricks.com", "aws", "AWS"),
    (".databricks.com", "aws", "AWS"),
)

# Azure per-workspace URLs are adb-<workspace id>.<n>.azuredatabricks.net (Azure
# Government: .databricks.azure.us, Azure China: .databricks.azure.cn) and GCP ones
# <workspace id>.<n>.gcp.databricks.com: the org (workspace) id can be read from the host
# when the cluster-usage tag is missing. AWS hosts (dbc-<hash>.cloud.databricks.com, a
# deployment name, GovCloud .cloud.databricks.us) do not carry it.
_ORG_IN_HOST = (
    re.compile(r"^adb-(\d+)\.\d+\.(?:azuredatabricks\.net|databricks\.azure\.us|databricks\.azure\.cn)$"),
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
        return cloud_of(self.workspace)[0]

    @property
    def cloud_name(self) -> str:
        """The cloud as people name it: ``"Azure Government"``, ``"AWS GovCloud"``, ..."""
        return cloud_of(self.workspace)[1]


def cloud_of(host: str | None) -> tuple[str, str]:
    """``(cloud, name)`` of a workspace host, e.g. ``("azure", "Azure China")``.

    >>> cloud_of("adb-1.2.databricks.azure.us")
    ('azure', 'Azure Government')
    >>> cloud_of("example.com")
    ('unknown', 'unknown')
    """
    for suffix, cloud, name in _CLOUDS:
        if (host or "").endswith(suffix):
            return cloud, name
    return "unknown", "unknown"


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
    """The org id encoded in an Azure (incl. Government and China) or GCP workspace
    host name, else None.

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


def port_choices(ports=PROXY_PORTS, avoid=REFUSED_PORTS, rng=None) -> list[int]:
    """The ports to try for a dashboard behind the driver proxy, in random order.

    Random so that clusters started at the same time (several notebooks on one driver)
    rarely try the same port first.

    >>> sorted(port_choices(range(8786, 8789)))
    [8786, 8788]
    """
    import random

    choices = [p for p in ports if p not in avoid]
    (rng or random).shuffle(choices)
    return choices


def prefix_for(setting: str | None, info: DatabricksInfo | None, port: int | None) -> str:
    """The URL path prefix the dashboard is served under (``""``: the root).

    Parameters
    ----------
    setting : str or None
        ``spark-dask.dashboard-prefix``: ``"auto"``, ``""`` or None serve at the root
        (what the Databricks driver proxy needs: it strips its prefix);
        ``"driver-proxy"`` serves under ``/driver-proxy/o/<org>/<cluster>/<port>``, for a
        proxy that forwards the whole path (root elsewhere: there is no such proxy); any
        other string is the prefix.
    info : DatabricksInfo or None
        Databricks facts, None off Databricks.
    port : int or None
        The dashboard port (named by the full-path prefix).

    >>> prefix_for("auto", None, None)
    ''
    >>> prefix_for("/dask/", None, None)
    '/dask'
    """
    text = AUTO if setting is None else str(setting).strip()
    if text in (AUTO, "", "/"):
        return ""
    if text == FULL_PATH:
        if info is None or not info.has_proxy or port is None:
            return ""
        return proxy_prefix(info, port)
    return normalize_prefix(text)


@dataclass(frozen=True)
class DashboardSettings:
    """How the scheduler serves its dashboard and which link the user gets.

    Parameters
    ----------
    address : str
        ``dashboard_address`` for the Scheduler, e.g. ``"10.0.0.5:0"`` or ``":9412"``
        (all interfaces).
    prefix : str
        ``http_prefix`` for the Scheduler (``""`` for none: served at the root).
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
    prefix_setting: str | None = AUTO,
) -> DashboardSettings:
    """Decide the dashboard address, prefix and link (pure).

    Parameters
    ----------
    host : str
        The driver address executors and users reach.
    info : DatabricksInfo or None
        Databricks facts (:func:`parse`), None off Databricks.
    port : int or None
        A free port of :data:`PROXY_PORTS` (needed on Databricks: the link names it).
    prefix_setting : str or None
        ``spark-dask.dashboard-prefix``, see :func:`prefix_for`.

    Notes
    -----
    Behind the driver proxy the dashboard listens on all interfaces: the proxy connects
    to the driver's address (not loopback), and Ray-on-Spark's dashboard listens on
    ``0.0.0.0`` the same way. Elsewhere it listens on ``host`` only, on a port the OS
    picks.
    """
    if info is not None and info.has_proxy:
        if port is None:
            raise ValueError("a dashboard behind the Databricks proxy needs its port chosen first")
        return DashboardSettings(f":{port}", prefix_for(prefix_setting, info, port), port, info)
    return DashboardSettings(f"{host}:{port or 0}", prefix_for(prefix_setting, None, None), port, None)


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
        try:
            return read_conf(spark, key)
        except Exception:  # a conf the session cannot read is an unknown fact  # noqa: BLE001
            return None

    return parse(env, conf)


def free_port(host: str = "", ports=PROXY_PORTS, avoid=REFUSED_PORTS) -> int:
    """A port of ``ports`` (not in ``avoid``) that is free now on ``host``.

    ``host`` ``""`` checks all interfaces, where the dashboard will listen; none free is
    a :class:`~spark_dask.errors.ClusterError`.
    """
    for port in port_choices(ports, avoid):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
        return port
    raise ClusterError(
        f"spark-dask: no free port in {ports.start}-{ports.stop - 1} on the driver for the "
        "dashboard (the range the Databricks driver proxy is known to pass); close other "
        "servers on the driver or start the cluster with dashboard=False"
    )


def dashboard_settings(spark, host: str, prefix_setting: str | None = AUTO) -> DashboardSettings:
    """:func:`plan_dashboard` for this driver: detects Databricks and picks the port."""
    info = detect(spark)
    # Behind the proxy the link names the port, and it must be one the proxy passes, so
    # it is chosen before the scheduler binds it; elsewhere the scheduler binds port 0
    # itself (no race).
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
    except Exception:  # noqa: BLE001
        pass
    try:
        import IPython

        return IPython.get_ipython().user_ns["dbutils"].entry_point
    except Exception:  # noqa: BLE001
        return None


# --------------------------------------------------------------------------------------
# Workspace credentials for the workers (databricks_credentials=True).
# --------------------------------------------------------------------------------------

HOST_ENV = "DATABRICKS_HOST"
TOKEN_ENV = "DATABRICKS_TOKEN"
CLIENT_ID_ENV = "DATABRICKS_CLIENT_ID"
CLIENT_SECRET_ENV = "DATABRICKS_CLIENT_SECRET"


def env_credentials(env: Mapping[str, str]) -> dict[str, str] | None:
    """The driver environment's workspace credentials, or None: ``DATABRICKS_HOST`` with
    ``DATABRICKS_TOKEN`` (a personal access token), else with ``DATABRICKS_CLIENT_ID``
    and ``DATABRICKS_CLIENT_SECRET`` (OAuth machine-to-machine), the pairs Ray-on-Spark's
    Databricks hook passes to its worker nodes.

    >>> env_credentials({"DATABRICKS_HOST": "https://h", "DATABRICKS_TOKEN": "t"})
    {'DATABRICKS_HOST': 'https://h', 'DATABRICKS_TOKEN': 't'}
    >>> env_credentials({"DATABRICKS_TOKEN": "t"}) is None  # no host: not a pair
    True
    """
    host = env.get(HOST_ENV)
    if not host:
        return None
    if env.get(TOKEN_ENV):
        return {HOST_ENV: host, TOKEN_ENV: env[TOKEN_ENV]}
    if env.get(CLIENT_ID_ENV) and env.get(CLIENT_SECRET_ENV):
        return {HOST_ENV: host, CLIENT_ID_ENV: env[CLIENT_ID_ENV], CLIENT_SECRET_ENV: env[CLIENT_SECRET_ENV]}
    return None


def _option(value) -> str | None:
    """The text of a Scala ``Option[String]`` seen through py4j (None for ``None``)."""
    try:
        if hasattr(value, "isDefined") and not value.isDefined():
            return None
        text = value.get()
    except Exception:  # noqa: BLE001 - an empty Option's get() raises in the JVM
        return None
    return text if isinstance(text, str) and text.strip() else None


def notebook_credentials(ep) -> tuple[dict[str, str] | None, str]:
    """The notebook context's API URL and token as ``DATABRICKS_HOST`` and
    ``DATABRICKS_TOKEN``, or None with the reason, in words that never hold a token.

    Parameters
    ----------
    ep : object or None
        The driver's entry point (:func:`entry_point`): its
        ``getDbutils().notebook().getContext()`` has ``apiUrl()`` and ``apiToken()``.
    """
    if ep is None:
        return None, "this process has no Databricks driver entry point (dbruntime or dbutils)"
    try:
        context = ep.getDbutils().notebook().getContext()
        url, token = _option(context.apiUrl()), _option(context.apiToken())
    except Exception as e:  # noqa: BLE001 - only the type is told: a message might quote the token
        return None, f"the notebook context could not be read ({type(e).__name__})"
    if not url or not token:
        return None, "the notebook context has no API URL and token"
    return {HOST_ENV: url.strip(), TOKEN_ENV: token}, ""


def worker_credentials(env: Mapping[str, str], entry_point: Callable[[], object] = entry_point) -> dict[str, str]:
    """The Databricks credentials the workers get with ``databricks_credentials=True``.

    Parameters
    ----------
    env : mapping
        The driver's environment (``os.environ``).
    entry_point : callable
        Returns the driver's entry point or None (:func:`entry_point`); called only
        when the environment holds no credentials.

    Returns
    -------
    dict
        Environment variables: the driver environment's (:func:`env_credentials`) where
        set, else the notebook context's (:func:`notebook_credentials`).

    Raises
    ------
    PlanError
        Where neither source exists (off Databricks, no ``DATABRICKS_RUNTIME_VERSION``,
        only the environment is one). The message names what was looked for, never a
        value.
    """
    found = env_credentials(env)
    if found:
        return found
    if not env.get(RUNTIME_ENV):
        raise PlanError(
            "spark-dask: databricks_credentials=True found no Databricks credentials for the "
            f"workers: neither {HOST_ENV} with {TOKEN_ENV} (or with {CLIENT_ID_ENV} and "
            f"{CLIENT_SECRET_ENV}) in this process's environment, and {RUNTIME_ENV} is not set "
            "(no Databricks driver, so no notebook context to read): set those variables (with "
            "Databricks Connect, the ones it connects with), or start without databricks_credentials=True"
        )
    found, why = notebook_credentials(entry_point())
    if found:
        return found
    raise PlanError(
        "spark-dask: databricks_credentials=True found no Databricks credentials for the "
        f"workers: neither {HOST_ENV} with {TOKEN_ENV} (or with {CLIENT_ID_ENV} and "
        f"{CLIENT_SECRET_ENV}) in the driver's environment, nor the notebook context's API "
        f"URL and token ({why}). Start the cluster from a notebook, or set those variables "
        "in the cluster's environment variables (Compute > Advanced options > Spark, e.g. "
        f"{TOKEN_ENV}={{{{secrets/<scope>/<key>}}}})"
    )


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
    except Exception:  # noqa: BLE001
        return False
    return True


__all__ = [
    "AUTO",
    "FULL_PATH",
    "PROXY_PORTS",
    "DashboardSettings",
    "connect_problem",
    "entry_point",
    "env_credentials",
    "notebook_credentials",
    "worker_credentials",
    "is_workspace_host",
    "register_background_job_group",
    "DatabricksInfo",
    "cloud_of",
    "dashboard_settings",
    "dashboard_url",
    "detect",
    "free_port",
    "org_from_host",
    "parse",
    "plan_dashboard",
    "port_choices",
    "prefix_for",
    "proxy_prefix",
    "proxy_url",
    "workspace_host",
]
