"""A YARN cluster on this machine for the tests: a ResourceManager and NodeManagers,
each its own JVM, on 127.0.0.1 (:class:`YarnBed`).

The daemons run from Hadoop's shaded ``hadoop-client-minicluster`` jar and BouncyCastle
(the ``yarn-3.3`` group of :mod:`tests.support.jars`) plus a few jars of a pyspark whose
Hadoop client is the same 3.3.4 (pyspark 3.5's: the running one, or ``.venv35``'s;
pyspark 4's Hadoop 3.5 jars lack the ``javax.xml.bind`` that the 3.3.4 RM needs). Not the
whole ``pyspark/jars``: its Jersey and Jackson break the RM's REST API. YARN's client
protocol is stable across 3.x, so a driver of either pyspark line runs on these daemons::

    with YarnBed.start(directory, nodemanagers=2) as bed:
        os.environ["HADOOP_CONF_DIR"] = bed.conf_dir   # before the driver's JVM starts
        spark = make_spark("yarn", **bed.spark_conf())

What the configuration sets, and why, is in the feasibility study of issue 71: no
container executor but the default one (containers are plain processes of this user), no
aux-services (no external shuffle service), no memory checks, the AM may take half the
queue, applications leave a stopping NM's context after 1 s
(``yarn.nodemanager.log.retain-seconds``), and every file the daemons write is under the
bed's directory.
"""

from __future__ import annotations

import glob
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import psutil

from tests.support.cds import QUICK_JVM
from tests.support.jars import paths as jar_paths
from tests.support.paths import ROOT

JARS_GROUP = "yarn-3.3"
HADOOP = "3.3.4"  # the minicluster's Hadoop: the daemons' Hadoop client jars must be the same
HOST = "127.0.0.1"
RM_CLASS = "org.apache.hadoop.yarn.server.resourcemanager.ResourceManager"
NM_CLASS = "org.apache.hadoop.yarn.server.nodemanager.NodeManager"
# small, quick daemons; Hadoop 3.3 on Java 17: its web apps (Guice, cglib) and a few
# reflective reads need these packages open
DAEMON_JVM = [
    "-Xmx256m",
    "-Xss1m",
    *QUICK_JVM.split(),
    *(
        f"--add-opens=java.base/{package}=ALL-UNNAMED"
        for package in ("java.lang", "java.lang.reflect", "java.util", "java.net", "java.io", "sun.nio.ch")
    ),
]
# what the shaded minicluster jar leaves to its users, from pyspark's jars: Hadoop's
# client, logging, and (for Hadoop 3.3) javax.xml.bind
DAEMON_JARS = (
    "hadoop-client-api-*.jar",
    "hadoop-client-runtime-*.jar",
    "slf4j-api-*.jar",
    "log4j-slf4j2-impl-*.jar",
    "log4j-api-*.jar",
    "log4j-core-*.jar",
    "log4j-1.2-api-*.jar",
    "commons-logging-*.jar",
    "jcl-over-slf4j-*.jar",
    "jsr305-*.jar",
    "snappy-java-*.jar",
    "jakarta.xml.bind-api-2*.jar",
    "jaxb-runtime-2*.jar",
    "activation-*.jar",
)
# the daemons' log4j2 configuration, in their conf directories only: Spark puts
# HADOOP_CONF_DIR on the driver's class path, where this file would redirect its log
LOG4J2 = """\
status = error
appender.f.type = File
appender.f.name = f
appender.f.fileName = ${sys:hadoop.log.dir}/${sys:hadoop.log.file}
appender.f.layout.type = PatternLayout
appender.f.layout.pattern = %d{HH:mm:ss.SSS} %p %c{1}: %m%n
rootLogger.level = info
rootLogger.appenderRef.f.ref = f
"""
BIND_ATTEMPTS = 3  # starts of the bed with fresh ports when a daemon could not bind one
LOG_LINES = 15  # of a dead daemon's output and log, each way, in the error
ERROR_LINE = re.compile(r"\b(ERROR|FATAL)\b|\w(Exception|Error):")
RM_ADDRESSES = (
    "yarn.resourcemanager.address",
    "yarn.resourcemanager.scheduler.address",
    "yarn.resourcemanager.resource-tracker.address",
    "yarn.resourcemanager.admin.address",
    "yarn.resourcemanager.webapp.address",
)
NM_ADDRESSES = (
    "yarn.nodemanager.address",
    "yarn.nodemanager.localizer.address",
    "yarn.nodemanager.webapp.address",
    "yarn.nodemanager.collector-service.address",
)
CAPACITY_PREFIX = "yarn.scheduler.capacity."
CAPACITY = {
    "yarn.scheduler.capacity.root.queues": "default",
    "yarn.scheduler.capacity.root.default.capacity": "100",
    "yarn.scheduler.capacity.root.default.maximum-capacity": "100",
    # the default 0.1 would not fit Spark's client-mode AM (256 MB + 384 MB overhead)
    "yarn.scheduler.capacity.maximum-am-resource-percent": "0.5",
    "yarn.scheduler.capacity.resource-calculator": "org.apache.hadoop.yarn.util.resource.DefaultResourceCalculator",
    "yarn.scheduler.capacity.node-locality-delay": "-1",
}


def ephemeral_ports() -> tuple[int, int]:
    """The kernel's range for ports bound to 0 and for outgoing connections
    (``net.ipv4.ip_local_port_range``; Linux's default where unreadable)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low, high = (int(x) for x in f.read().split())
        return low, high
    except (OSError, ValueError):
        return 32768, 60999


def free_ports(count: int, host: str = HOST) -> list[int]:
    """``count`` distinct ports free on ``host`` now, below the kernel's ephemeral range:
    the daemon binds them seconds later (its JVM's start), and in that time the kernel
    hands ports of its range to every process that binds 0 or connects (the other tests
    beside this one), never one below it."""
    low = ephemeral_ports()[0]
    candidates = list(range(max(1024, low - 12000), low))
    random.shuffle(candidates)
    found: list[int] = []
    for port in candidates:
        with socket.socket() as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
        found.append(port)
        if len(found) == count:
            return found
    raise RuntimeError(f"no {count} free ports below {low} on {host}")


def site_xml(props: dict[str, str]) -> str:
    """Hadoop's ``*-site.xml`` text of ``props``."""
    body = "".join(f"  <property><name>{k}</name><value>{v}</value></property>\n" for k, v in props.items())
    return f'<?xml version="1.0"?>\n<configuration>\n{body}</configuration>\n'


def write_conf(conf_dir: str, files: dict[str, str]) -> str:
    """Write ``files`` (name: text) into ``conf_dir``; return ``conf_dir``."""
    os.makedirs(conf_dir, exist_ok=True)
    for name, text in files.items():
        with open(os.path.join(conf_dir, name), "w") as f:
            f.write(text)
    return conf_dir


def yarn_site(directory: str, ports: dict[str, int], memory_mb: int = 4096, host: str = HOST) -> dict[str, str]:
    """The yarn-site.xml properties every daemon and client shares: the RM's addresses
    (on ``host``, ``ports``: one per :data:`RM_ADDRESSES`), the scheduler, the NMs'
    defaults."""
    nm = "org.apache.hadoop.yarn.server.nodemanager"
    return {
        "yarn.resourcemanager.hostname": host,
        **{name: f"{host}:{ports[name]}" for name in RM_ADDRESSES},
        "yarn.resourcemanager.scheduler.class": (
            "org.apache.hadoop.yarn.server.resourcemanager.scheduler.capacity.CapacityScheduler"
        ),
        "yarn.scheduler.minimum-allocation-mb": "128",
        "yarn.scheduler.maximum-allocation-mb": str(memory_mb),
        "yarn.scheduler.maximum-allocation-vcores": "4",
        "yarn.resourcemanager.recovery.enabled": "false",
        "yarn.resourcemanager.nodemanager-connect-retries": "10",
        # by default under /tmp/hadoop-yarn-$USER, left behind
        "yarn.node-attribute.fs-store.root-dir": f"file://{directory}/rm/node-attribute",
        # the hosts to decommission (YarnBed.exclude), read on the admin's refreshNodes
        "yarn.resourcemanager.nodes.exclude-path": f"{directory}/rm/exclude",
        "yarn.timeline-service.enabled": "false",
        "yarn.log-aggregation-enable": "false",
        "yarn.nodemanager.resource.memory-mb": str(memory_mb),
        "yarn.nodemanager.resource.cpu-vcores": "4",
        "yarn.nodemanager.vmem-check-enabled": "false",
        "yarn.nodemanager.pmem-check-enabled": "false",
        "yarn.nodemanager.container-executor.class": f"{nm}.DefaultContainerExecutor",
        "yarn.nodemanager.aux-services": "",
        "yarn.nodemanager.disk-health-checker.max-disk-utilization-per-disk-percentage": "99",
        "yarn.nodemanager.delete.debug-delay-sec": "0",
        # a stopping NM waits for its applications to leave its context, which without log
        # aggregation they do after log.retain-seconds (3 h by default: ~17 s per stop)
        "yarn.nodemanager.log.retain-seconds": "1",
        "yarn.nodemanager.sleep-delay-before-sigkill.ms": "100",
        "yarn.nodemanager.process-kill-wait.ms": "1000",
        "yarn.nodemanager.recovery.enabled": "false",
        "yarn.nodemanager.resource-monitor.interval-ms": "3000",
        "yarn.nodemanager.node-labels.provider": "",
        "yarn.nodemanager.env-whitelist": "JAVA_HOME,PATH,LANG,TZ,HADOOP_CONF_DIR,HADOOP_HOME,PYSPARK_PYTHON",
    }


def nm_site(yarn: dict[str, str], nm_dir: str, host: str = HOST, local: str | None = None) -> dict[str, str]:
    """One NM's yarn-site.xml properties: ``yarn``, its address ``host``, its own
    directories under ``nm_dir`` but the containers' (``local``, default under
    ``nm_dir``)."""
    return {
        **yarn,
        "yarn.nodemanager.hostname": host,
        **{name: f"{host}:0" for name in NM_ADDRESSES},  # each NM tells the RM its ports
        "yarn.nodemanager.local-dirs": local or f"{nm_dir}/local",
        "yarn.nodemanager.log-dirs": f"{nm_dir}/logs",
        "yarn.nodemanager.recovery.dir": f"{nm_dir}/recovery",
    }


def core_site(tmp: str) -> dict[str, str]:
    return {"fs.defaultFS": "file:///", "hadoop.tmp.dir": tmp}


def conf_files(core: dict, yarn: dict, daemon: bool) -> dict[str, str]:
    """A conf directory's files; a daemon's has the capacity scheduler's and log4j2's.
    The ``yarn.scheduler.capacity.*`` properties of ``yarn`` go to capacity-scheduler.xml
    (over :data:`CAPACITY`), which the scheduler reads after yarn-site.xml."""
    capacity = {k: v for k, v in yarn.items() if k.startswith(CAPACITY_PREFIX)}
    site = {k: v for k, v in yarn.items() if not k.startswith(CAPACITY_PREFIX)}
    files = {"core-site.xml": site_xml(core), "yarn-site.xml": site_xml(site)}
    if daemon:
        files.update({"capacity-scheduler.xml": site_xml({**CAPACITY, **capacity}), "log4j2.properties": LOG4J2})
    return files


def unavailable() -> str | None:
    """Why the daemons cannot start here (no Java, no pyspark with :data:`HADOOP`'s
    client jars), or None. Their jars are the caller's (fetched or required)."""
    if find_java_home() is None:
        return "no Java (JAVA_HOME or java on PATH)"
    if daemon_jars_dir() is None:
        return f"no pyspark with Hadoop {HADOOP}'s client jars (pyspark 3.5, or .venv35) for the YARN daemons"
    return None


def refresh_nodes(spark, graceful_timeout: int | None = None) -> None:
    """``yarn rmadmin -refreshNodes [-g TIMEOUT]`` from ``spark``'s driver JVM (the bed
    has no ``yarn`` command): the RM reads its include and exclude files again, and
    decommissions the excluded nodes, gracefully (their containers may finish, for at
    most ``graceful_timeout`` seconds) where a timeout is given. The YARN client
    configuration is the session's (``HADOOP_CONF_DIR``)."""
    jvm = spark.sparkContext._jvm
    conf = jvm.org.apache.hadoop.yarn.conf.YarnConfiguration(spark.sparkContext._jsc.hadoopConfiguration())
    protocol = jvm.java.lang.Class.forName("org.apache.hadoop.yarn.server.api.ResourceManagerAdministrationProtocol")
    admin = jvm.org.apache.hadoop.yarn.client.ClientRMProxy.createRMProxy(conf, protocol)
    records = jvm.org.apache.hadoop.yarn
    kind = (
        records.api.records.DecommissionType.GRACEFUL
        if graceful_timeout
        else records.api.records.DecommissionType.NORMAL
    )
    request = records.server.api.protocolrecords.RefreshNodesRequest.newInstance(kind, graceful_timeout)
    admin.refreshNodes(request)
    jvm.org.apache.hadoop.ipc.RPC.stopProxy(admin)


def hadoop_version(jars_dir: str) -> str | None:
    """The version of the Hadoop client jars in a pyspark ``jars`` directory."""
    found = glob.glob(os.path.join(jars_dir, "hadoop-client-api-*.jar"))
    return os.path.basename(found[0])[len("hadoop-client-api-") : -len(".jar")] if found else None


def running_pyspark_jars() -> str:
    """The ``jars`` directory of the running pyspark."""
    import pyspark

    return os.path.join(os.path.dirname(pyspark.__file__), "jars")


def daemon_jars_dir() -> str | None:
    """A pyspark ``jars`` directory with :data:`HADOOP`'s client jars for the daemons:
    the running pyspark's, else ``.venv35``'s in the repository; None if neither."""
    candidates = [
        running_pyspark_jars(),
        *glob.glob(os.path.join(ROOT, ".venv35/lib/python3*/site-packages/pyspark/jars")),
    ]
    return next((d for d in candidates if hadoop_version(d) == HADOOP), None)


def find_java_home() -> str | None:
    """``$JAVA_HOME``, else the JDK of the ``java`` on ``PATH``."""
    if os.environ.get("JAVA_HOME"):
        return os.environ["JAVA_HOME"]
    java = shutil.which("java")
    return os.path.dirname(os.path.dirname(os.path.realpath(java))) if java else None


def daemon_class_path(conf_dir: str, jars_dir: str, jars: list[str]) -> str:
    """The conf directory, ``jars`` (the minicluster's), and :data:`DAEMON_JARS` of
    ``jars_dir``."""
    own = sorted(p for pattern in DAEMON_JARS for p in glob.glob(os.path.join(jars_dir, pattern)))
    return ":".join([conf_dir, *jars, *own])


class Daemon:
    """A daemon JVM, the child of this process in a session of its own; its output in
    ``logs/NAME.out``, its log4j log in ``logs/NAME.log``."""

    def __init__(self, name: str, process: subprocess.Popen, out):
        self.name = name
        self.process = process
        self.out = out

    @classmethod
    def launch(cls, name: str, directory: str, main: str, class_path: str, env: dict[str, str], enter=()):
        logs, tmp = f"{directory}/logs", f"{directory}/jvmtmp/{name}"  # Jetty's files: not /tmp
        os.makedirs(logs, exist_ok=True)
        os.makedirs(tmp, exist_ok=True)
        conf_dir = class_path.split(":", 1)[0]
        cmd = [
            *enter,  # the command prefix that runs it on its host (none: here)
            os.path.join(env["JAVA_HOME"], "bin", "java"),
            *DAEMON_JVM,
            f"-Dhadoop.log.dir={logs}",
            f"-Dhadoop.log.file={name}.log",
            f"-Dyarn.log.dir={logs}",
            f"-Djava.io.tmpdir={tmp}",
            "-Dlog4j2.shutdownHookEnabled=false",
            f"-Dlog4j2.configurationFile={conf_dir}/log4j2.properties",
            "-cp",
            class_path,
            main,
        ]
        out = open(f"{logs}/{name}.out", "w")  # closed by stop_daemons()
        env = {**env, "HADOOP_CONF_DIR": conf_dir}
        process = subprocess.Popen(
            cmd,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=directory,
            start_new_session=True,
        )
        return cls(name, process, out)

    def signal(self, sig: int) -> None:
        """``sig`` to the daemon's process group."""
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, sig)
            except ProcessLookupError:
                pass


def stop_daemons(daemons: list[Daemon], grace: float) -> list[str]:
    """SIGTERM to each, SIGKILL to those still running after ``grace`` seconds; each
    reaped. The names of those killed."""
    for d in daemons:
        d.signal(signal.SIGTERM)
    deadline = time.monotonic() + grace
    killed = []
    for d in daemons:
        try:
            d.process.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            d.signal(signal.SIGKILL)
            d.process.wait(10)
            killed.append(d.name)
        d.out.close()
    return killed


def processes_under(directory: str) -> list[psutil.Process]:
    """Processes whose working directory is under ``directory`` (the containers)."""
    found = []
    for p in psutil.process_iter():
        try:
            cwd = p.cwd()
        except (psutil.Error, OSError):
            continue
        if cwd == directory or cwd.startswith(directory + os.sep):
            found.append(p)
    return found


def kill_leftovers(directory: str) -> list[int]:
    """SIGKILL the processes left running under ``directory`` (containers of a killed
    NM); their pids."""
    left = processes_under(directory)
    for p in left:
        try:
            p.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(left, timeout=10)
    return [p.pid for p in left]


def fetch_json(url: str, timeout: float = 2.0):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.loads(r.read())


def node_id(node: dict) -> str | None:
    """A node's id (``host:port``): ``id`` as Hadoop documents the REST API, ``nodeId``
    from the shaded minicluster's."""
    return node.get("id") or node.get("nodeId")


def node_list(answer) -> list[dict]:
    """The nodes of ``/ws/v1/cluster/nodes``: ``{"nodes": {"node": [...]}}`` as Hadoop
    documents it, or ``{"nodes": [...]}`` (the shaded minicluster's Jackson)."""
    nodes = (answer or {}).get("nodes") or []
    return (nodes.get("node") or []) if isinstance(nodes, dict) else nodes


def log_excerpt(path: str, lines: int = LOG_LINES) -> str:
    """What of ``path`` tells why a daemon ended: its first ``lines`` lines that name an
    error or exception, then its last ``lines`` lines ('' if it cannot be read)."""
    try:
        with open(path, errors="replace") as f:
            text = f.readlines()
    except OSError:
        return ""
    errors = [line for line in text if ERROR_LINE.search(line)]
    return "".join(errors[:lines]) + ("...\n" if errors else "") + "".join(text[-lines:])


class DaemonExited(RuntimeError):
    """A daemon ended while the bed started: the message carries the end of each dead
    daemon's output and log (a CI run keeps no files); ``bind_failed`` when one could not
    bind its port."""

    def __init__(self, directory: str, names: list[str]):
        logs = f"{directory}/logs"
        tails = {
            f"{logs}/{name}.{kind}": log_excerpt(f"{logs}/{name}.{kind}") for name in names for kind in ("out", "log")
        }
        self.bind_failed = any("BindException" in t or "Address already in use" in t for t in tails.values())
        shown = "".join(f"\n--- the end of {path}:\n{tail}" for path, tail in tails.items() if tail)
        super().__init__(f"YARN daemon(s) {names} exited: see {logs}{shown}")


class Here:
    """Where a bed's daemons run (the default placement): every one on this machine's
    127.0.0.1. :class:`tests.support.yarn_hosts.OnHosts` puts each on a host of the
    multi-host bed instead. Daemons are named ``rm``, ``nm0``, ``nm1``, ..."""

    local_ip: str | None = HOST  # the address Spark's processes bind; None: each host's own

    def address(self, name: str) -> str:
        """The address daemon ``name`` binds."""
        return HOST

    def enter(self, name: str) -> list[str]:
        """The command prefix that runs daemon ``name`` on its host (none here)."""
        return []

    def env(self, name: str) -> dict[str, str]:
        """Daemon ``name``'s environment (its NM's containers get part of it)."""
        return dict(os.environ)

    def containers_dir(self, directory: str, name: str) -> str:
        """Where NM ``name`` keeps its containers (``yarn.nodemanager.local-dirs``)."""
        return f"{directory}/{name}/local"

    def rm_ports(self) -> list[int]:
        """The RM's ports, one per :data:`RM_ADDRESSES`."""
        return free_ports(len(RM_ADDRESSES))

    def get_json(self, url: str):
        """The JSON answer of the RM's REST API at ``url``."""
        return fetch_json(url)

    def kill_leftovers(self, directory: str, name: str | None = None) -> list[int]:
        """SIGKILL what is left of NM ``name``'s containers (of every NM's: None)."""
        return kill_leftovers(directory if name is None else f"{directory}/{name}")


class YarnBed:
    """A ResourceManager and NodeManagers under ``directory`` (:meth:`start`), on
    127.0.0.1 or where ``placement`` puts them; a context manager that stops them
    (:meth:`stop`)."""

    def __init__(
        self,
        directory: str,
        ports: dict[str, int],
        pyspark_jars_dir: str,
        java_home: str,
        settings: dict | None = None,
        placement: Here | None = None,
    ):
        self.directory = directory
        self.ports = ports
        self.settings = dict(settings or {})
        self.placement = placement or Here()
        self.pyspark_jars_dir = pyspark_jars_dir
        self.java_home = java_home
        self.rm: Daemon | None = None
        self.nms: list[Daemon] = []
        self.jars: list[str] = []

    @classmethod
    def start(
        cls,
        directory: str,
        nodemanagers: int = 2,
        pyspark_jars_dir: str | None = None,
        java_home: str | None = None,
        jars: list[str] | None = None,
        timeout: float = 120,
        settings: dict[str, str] | None = None,
        placement: Here | None = None,
    ) -> YarnBed:
        """Write the configurations, start the RM and ``nodemanagers`` NMs, and wait
        until every NM is RUNNING (stopped again on failure).

        Parameters
        ----------
        directory : str
            Everything the daemons write goes under it (made if missing).
        nodemanagers : int
            How many NodeManagers.
        pyspark_jars_dir : str, optional
            A pyspark ``jars`` directory with Hadoop 3.3.4's client jars
            (:func:`daemon_jars_dir` by default).
        java_home : str, optional
            The JDK of the daemons and the containers (:func:`find_java_home`).
        jars : list of str, optional
            The minicluster and BouncyCastle jars (the ``yarn-3.3`` group's paths).
        timeout : float
            Seconds to wait for the NMs.
        settings : dict, optional
            yarn-site.xml properties over the bed's own (:func:`yarn_site`), for every
            daemon and client: e.g. the NMs' memory checks on.
        placement : Here, optional
            Where each daemon runs (:class:`Here` by default: all on 127.0.0.1).
        """
        directory = os.path.abspath(directory)
        os.makedirs(directory, exist_ok=True)
        jars_dir = pyspark_jars_dir or daemon_jars_dir()
        home = java_home or find_java_home()
        if jars_dir is None or home is None:
            raise RuntimeError(f"no pyspark jars with Hadoop {HADOOP} ({jars_dir}) or no Java ({home})")
        placement = placement or Here()
        for attempt in range(BIND_ATTEMPTS):
            ports = dict(zip(RM_ADDRESSES, placement.rm_ports()))
            bed = cls(directory, ports, jars_dir, home, settings, placement)
            try:
                bed.launch(nodemanagers, jars or jar_paths(JARS_GROUP))
                bed.wait_for_nodemanagers(nodemanagers, timeout)
                return bed
            except DaemonExited as e:
                bed.stop()
                if not (e.bind_failed and attempt + 1 < BIND_ATTEMPTS):
                    raise
                shutil.move(f"{directory}/logs", f"{directory}/logs-{attempt}")  # kept for a reader
            except BaseException:
                bed.stop()
                raise
        raise AssertionError("unreachable")

    @property
    def conf_dir(self) -> str:
        """The clients' HADOOP_CONF_DIR (no log4j2.properties in it)."""
        return f"{self.directory}/conf"

    @property
    def webapp(self) -> str:
        return f"http://{self.placement.address('rm')}:{self.ports['yarn.resourcemanager.webapp.address']}"

    def launch(self, nodemanagers: int, jars: list[str]) -> None:
        """Write the conf directories and start the daemons, the RM first."""
        d, at = self.directory, self.placement
        yarn = {**yarn_site(d, self.ports, host=at.address("rm")), **self.settings}
        write_conf(self.conf_dir, conf_files(core_site(f"{d}/hadoop-tmp"), yarn, daemon=False))
        rm_conf = write_conf(f"{d}/rm/conf", conf_files(core_site(f"{d}/hadoop-tmp"), yarn, daemon=True))
        self.exclude([])
        self.jars = jars
        self.rm = self.launch_daemon("rm", RM_CLASS, rm_conf)
        for i in range(nodemanagers):
            name, nm_dir = f"nm{i}", f"{d}/nm{i}"
            site = nm_site(yarn, nm_dir, host=at.address(name), local=at.containers_dir(d, name))
            write_conf(f"{nm_dir}/conf", conf_files(core_site(f"{nm_dir}/tmp"), site, daemon=True))
            self.nms.append(self.launch_nodemanager(i))

    def launch_daemon(self, name: str, main: str, conf_dir: str) -> Daemon:
        """Start daemon ``name`` (class ``main``) from ``conf_dir`` where the placement says."""
        env = {**self.placement.env(name), "JAVA_HOME": self.java_home}  # the NMs pass it to the containers
        class_path = daemon_class_path(conf_dir, self.pyspark_jars_dir, self.jars)
        return Daemon.launch(name, self.directory, main, class_path, env, enter=self.placement.enter(name))

    def launch_nodemanager(self, index: int) -> Daemon:
        """Start NM ``index`` from its conf directory (written by :meth:`launch`)."""
        return self.launch_daemon(f"nm{index}", NM_CLASS, f"{self.directory}/nm{index}/conf")

    def nodes(self) -> list[dict]:
        """The RM's nodes (its REST API); [] while it does not answer."""
        try:
            return node_list(self.placement.get_json(f"{self.webapp}/ws/v1/cluster/nodes"))
        except (OSError, ValueError):
            return []

    def metrics(self) -> dict:
        """The RM's ``/ws/v1/cluster/metrics`` (appsRunning, containersAllocated, ...):
        under ``clusterMetrics`` as Hadoop documents it, bare from the shaded minicluster."""
        answer = self.placement.get_json(f"{self.webapp}/ws/v1/cluster/metrics")
        return answer.get("clusterMetrics", answer)

    def wait_for_nodemanagers(self, count: int, timeout: float) -> None:
        """Until the RM lists ``count`` RUNNING nodes; raises if a daemon exits or after
        ``timeout`` seconds."""
        daemons = [d for d in [self.rm, *self.nms] if d is not None]

        def running(nodes: list[dict]) -> bool:
            return sum(n.get("state") == "RUNNING" for n in nodes) >= count

        self.wait_for_nodes(running, daemons, timeout, f"{count} NodeManagers")

    def wait_for_nodes(self, ready, daemons: list[Daemon], timeout: float, what: str) -> None:
        """Until ``ready(the RM's nodes)``; raises if one of ``daemons`` exits, or after
        ``timeout`` seconds (``what`` names what was awaited)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            dead = [d.name for d in daemons if d.process.poll() is not None]
            if dead:
                raise DaemonExited(self.directory, dead)
            if ready(self.nodes()):
                return
            time.sleep(0.3)
        raise TimeoutError(f"{what} not RUNNING after {timeout} s: see {self.directory}/logs")

    def exclude(self, hosts: list[str]) -> None:
        """Write the RM's exclude file: ``hosts`` (NodeManagers' host names) are to be
        decommissioned at the next ``refreshNodes`` (:func:`refresh_nodes`)."""
        with open(f"{self.directory}/rm/exclude", "w") as f:
            f.write("".join(f"{h}\n" for h in hosts))

    def lose_nodemanager(self, index: int) -> list[int]:
        """NM ``index`` and every process of its containers SIGKILLed at once, as when its
        host is lost; the pids of the container processes killed. The RM notices after
        ``yarn.nm.liveness-monitor.expiry-interval-ms``."""
        nm = self.nms[index]
        nm.signal(signal.SIGKILL)
        nm.process.wait(10)
        return self.placement.kill_leftovers(self.directory, f"nm{index}")

    def restart_nodemanager(self, index: int, timeout: float = 60) -> None:
        """NM ``index`` started again after :meth:`lose_nodemanager` (its host back),
        until the RM lists it RUNNING: a node it did not list before (the NM's ports are
        new; the lost one stays RUNNING until the RM gives up on it)."""
        known = {node_id(n) for n in self.nodes()}
        self.nms[index].out.close()
        self.nms[index] = nm = self.launch_nodemanager(index)

        def listed(nodes: list[dict]) -> bool:
            return any(n.get("state") == "RUNNING" and node_id(n) not in known for n in nodes)

        self.wait_for_nodes(listed, [nm], timeout, f"NodeManager nm{index}")

    def stop(self, grace: float = 10) -> list[str]:
        """The NMs first (an NM whose RM is gone retries its unregister 10 x 1 s; a
        stopping NM kills its containers), then the RM; SIGKILL after ``grace`` seconds,
        then any container process left under the directory. The names of the daemons
        killed."""
        killed = stop_daemons(self.nms, grace)
        if self.rm is not None:
            killed += stop_daemons([self.rm], grace)
        self.nms, self.rm = [], None
        self.placement.kill_leftovers(self.directory)
        return killed

    def spark_conf(self, executors: int = 2, cores: int = 2, python: str = sys.executable) -> dict[str, str]:
        """What a SparkSession on this bed needs besides ``HADOOP_CONF_DIR`` in its
        environment: master yarn, client mode, pyspark's jars from the local disk (not
        uploaded for each application), small containers, ``python`` in them, all on
        the placement's ``local_ip`` (where it has one; else each process on its host's
        own address, the driver's left to the caller)."""
        quick = QUICK_JVM
        ip = self.placement.local_ip
        where = {
            "spark.driver.host": ip,
            "spark.driver.bindAddress": ip,
            "spark.yarn.appMasterEnv.SPARK_LOCAL_IP": ip,
            "spark.executorEnv.SPARK_LOCAL_IP": ip,
        }
        return {
            "spark.master": "yarn",
            "spark.submit.deployMode": "client",
            "spark.yarn.jars": f"local:{running_pyspark_jars()}/*",
            # each application's uploads (pyspark.zip, py4j, its conf): under the bed,
            # not ~/.sparkStaging, where an application that does not end cleanly leaves them
            "spark.yarn.stagingDir": f"file://{self.directory}/staging",
            "spark.yarn.am.memory": "256m",
            "spark.yarn.am.extraJavaOptions": quick,
            "spark.executor.instances": str(executors),
            "spark.executor.cores": str(cores),
            "spark.executor.memory": "512m",
            "spark.pyspark.python": python,
            "spark.executorEnv.PYSPARK_PYTHON": python,
            **(where if ip else {}),
        }

    def __enter__(self) -> YarnBed:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
