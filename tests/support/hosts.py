"""A multi-host test cluster on this one machine, built from Linux namespaces (root).

Each *host* is

- a network namespace with its own address in 198.18.0.0/24 (inside the RFC 2544
  benchmark range 198.18.0.0/15; this machine's own networks are never touched): ``lo``
  and ``eth0`` up, an on-link default route (so a library that finds its own address
  with a UDP connect works), the inner end of a veth pair whose other end is a port of
  a Linux bridge in the root namespace. The bridge has no address, so the root
  namespace is not on the test network, and IP forwarding stays as it is: nothing
  leaves;
- a UTS namespace (its own host name) and a mount namespace with its own
  ``/etc/hosts`` (a bind mount naming every host) and a private local disk (a tmpfs on
  ``<run>/<host>/local``, a directory of the shared file system that stays empty
  everywhere else), held by one *holder* process (``sleep infinity``). Every command
  on the host runs as ``nsenter -t <holder> --net --uts --mount``.

``driver`` runs a Spark standalone Master, each ``worker-<i>`` a Spark Worker (pip's
pyspark: ``bin/spark-class``), optionally with fake GPUs (a discovery script per host)
and a ``tc netem`` delay or rate on its link. The Spark driver runs on ``driver`` too,
in a *driver service* (:class:`Driver`, ``python -m tests.support.hosts serve``): the tests send
it calls (``"module:function"``, arguments) over a Unix socket on the shared file system
and get the results back; driver-side state between calls lives in the called module.

Every name a run makes (namespaces, links, the run directory
``/tmp/spark-dask-hosts-<prefix>``) starts with the run's prefix, ``sdh`` and four hex
digits, so runs cannot clash and a crashed run's remains can be removed by prefix::

    python -m tests.support.hosts up [--workers 2] [--gpus 2] [--netem worker-1='delay 5ms']
    python -m tests.support.hosts status
    python -m tests.support.hosts exec [--prefix P] HOST -- CMD...
    python -m tests.support.hosts down [--prefix P | --all [--force]]
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import importlib
import importlib.util
import json
import os
import re
import secrets
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from multiprocessing.connection import Client, Listener

import psutil

from spark_dask.executor.command import process_cluster
from tests.support.cds import java_options

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/support/hosts.py
STEM = "sdh"  # every prefix: STEM + 4 hex digits
PREFIX_RE = re.compile(rf"^({STEM}[0-9a-f]{{4}})-")
RUN_ROOT = "/tmp"
RUN_DIR_STEM = "spark-dask-hosts-"
SUBNET = "198.18.0"  # hosts are SUBNET.<n>/24: inside 198.18.0.0/15 only
DRIVER = "driver"
MASTER_PORT = 7077
MASTER_UI_PORT = 8080
TOOLS = ("ip", "unshare", "nsenter", "tc", "java")
EXECUTOR_CLASS = "CoarseGrainedExecutorBackend"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
QDISCS = ("netem", "tbf", "htb", "pfifo", "bfifo", "prio")  # a spec starting with one names its qdisc
# the daemons (Master, Workers) start faster with the C1 compiler only and a serial GC
AUTHKEY_ENV = "SPARK_DASK_HOSTS_AUTHKEY"
STATE_ENV = "SPARK_DASK_HOSTS_STATE"


class HostsError(RuntimeError):
    """The multi-host cluster could not be built, used or removed."""


class RemoteError(Exception):
    """A call in the driver service raised; the message is its remote traceback."""


# --------------------------------------------------------------------------- commands


def sh(argv, timeout: float = 30, check: bool = True) -> subprocess.CompletedProcess:
    """Run ``argv`` in the root namespace (bounded); raise with its stderr on failure."""
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL, check=False)
    if check and done.returncode:
        raise HostsError(f"{' '.join(map(str, argv))} failed ({done.returncode}): {done.stderr.strip()}")
    return done


def spark_home() -> str:
    """The Spark distribution inside pip's pyspark (it has ``bin/spark-class``)."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise HostsError("pyspark is not installed: pip install -e '.[spark]'")
    return next(iter(spec.submodule_search_locations))


def unavailable() -> str | None:
    """Why this machine cannot build the hosts (not root, a tool missing, namespaces or
    bridges refused), or None when it can."""
    if os.geteuid() != 0:
        return "the multi-host tests build network namespaces: they need root"
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        return f"the multi-host tests need {', '.join(missing)} (iproute2, util-linux, Java)"
    if importlib.util.find_spec("pyspark") is None:
        return "the multi-host tests need pyspark: pip install -e '.[spark]'"
    try:
        sh(["unshare", "--net", "--uts", "--mount", "--propagation", "private", "true"], timeout=10)
        probe = f"{STEM}{secrets.token_hex(2)}-t"
        sh(["ip", "link", "add", probe, "type", "bridge"], timeout=10)
        sh(["ip", "link", "del", probe], timeout=10)
    except (HostsError, OSError, subprocess.TimeoutExpired) as e:
        return f"this machine refuses namespaces or bridges: {e}"
    return None


def _ip_json(*args) -> list[dict]:
    out = sh(["ip", "-j", *args], timeout=10).stdout.strip()
    return json.loads(out) if out else []


def netns_names() -> list[str]:
    """Every named network namespace (``ip netns list``)."""
    return [n["name"] for n in _ip_json("netns", "list")]


def link_names() -> list[str]:
    """Every link of the root namespace."""
    return [n["ifname"] for n in _ip_json("link", "show")]


def ns_id(path: str) -> tuple[int, int] | None:
    """(device, inode) of a namespace file (``/run/netns/X``, ``/proc/PID/ns/net``)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def pids_in_netns(ident: tuple[int, int] | None) -> list[int]:
    """Every process whose network namespace is ``ident`` (see :func:`ns_id`)."""
    if ident is None:
        return []
    me = os.getpid()
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != me and ns_id(f"/proc/{p}/ns/net") == ident]


def cmdline(pid: int) -> str:
    """A process's command line, space-separated ('' when it is gone)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _is_dask(pid: int, tag: str | None) -> bool:
    try:
        p = psutil.Process(pid)
        owner = process_cluster(p.environ(), None) or process_cluster({}, p.cwd())
    except (psutil.Error, OSError):
        return False
    return owner is not None and (tag is None or owner == tag)


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie does not)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def kill_all(pids_of, timeout: float = 15) -> None:
    """SIGKILL every process ``pids_of()`` lists, again until it lists none (bounded)."""
    deadline = time.monotonic() + timeout
    while True:
        pids = pids_of()
        if not pids:
            return
        if time.monotonic() > deadline:
            raise HostsError(f"processes survived SIGKILL: {[(p, cmdline(p)) for p in pids]}")
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)


# --------------------------------------------------------------------------- hosts


@dataclass
class Host:
    """One host of a run: its names, address, directories and processes."""

    name: str
    ip: str
    netns: str
    veth: str  # the root namespace's end, a bridge port
    dir: str  # <run>/<name> on the shared file system: logs, scripts
    gpus: list[str] | None = None
    netem: str | None = None
    holder: int | None = None
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    starts: int = 0  # Spark Worker starts (each gets its own log)

    @property
    def local(self) -> str:
        """The host's private disk (a tmpfs in its mount namespace)."""
        return os.path.join(self.dir, "local")

    @property
    def ident(self) -> tuple[int, int] | None:
        return ns_id(f"/run/netns/{self.netns}")


def _layout(prefix: str, run_dir: str, workers: int, gpus, netem) -> dict[str, Host]:
    names = [DRIVER] + [f"worker-{i}" for i in range(1, workers + 1)]
    hosts = {}
    for i, name in enumerate(names):
        short = "d" if name == DRIVER else f"w{i}"
        hosts[name] = Host(
            name=name,
            ip=f"{SUBNET}.{1 if name == DRIVER else 10 + i}",
            netns=f"{prefix}-{name}",
            veth=f"{prefix}-{short}",
            dir=os.path.join(run_dir, name),
            gpus=list((gpus or {}).get(name) or []) or None,
            netem=(netem or {}).get(name),
        )
    unknown = set(gpus or {}) | set(netem or {})
    if unknown - set(names):
        raise HostsError(f"no such host: {sorted(unknown - set(names))} (hosts: {names})")
    return hosts


HOLDER_SCRIPT = (
    'hostname "$1" && mount --bind "$2" /etc/hosts'
    ' && mount -t tmpfs -o size=4g,mode=0755 "spark-dask-local-$1" "$3"'
    ' && mkdir -p "$3/tmp" "$3/spark" "$3/work" && chmod 1777 "$3/tmp"'
    " && echo ready && exec sleep infinity"
)


def _read_line(stream, timeout: float) -> str:
    """One line from a pipe, or '' when none came within ``timeout``."""
    ready, _, _ = select.select([stream], [], [], timeout)
    return stream.readline().decode(errors="replace").strip() if ready else ""


class Hosts:
    """A running multi-host cluster; build one with :meth:`up`, remove it with :meth:`down`.

    Parameters
    ----------
    prefix : str
        The run's prefix (``sdh`` + 4 hex digits): every name it makes starts with it.
    workers, cores, memory, gpus, netem, worker_timeout, standalone
        As for :meth:`up`.
    """

    def __init__(self, prefix, workers=2, cores=4, memory="3g", gpus=None, netem=None, worker_timeout=15,
                 standalone=True):  # fmt: skip
        if not re.fullmatch(rf"{STEM}[0-9a-f]{{4}}", prefix):
            raise HostsError(f"a prefix is {STEM} and 4 hex digits, not {prefix!r}")
        self.prefix = prefix
        self.run_dir = os.path.join(RUN_ROOT, RUN_DIR_STEM + prefix)
        self.bridge = f"{prefix}-br"
        self.cores, self.memory, self.worker_timeout = cores, memory, worker_timeout
        self.standalone = standalone
        self.hosts = _layout(prefix, self.run_dir, workers, gpus, netem)
        self.idents: dict[str, tuple[int, int]] = {}  # every netns this run made
        self.kept = False
        self._driver: Driver | None = None
        self._lock = threading.RLock()

    # ----------------------------------------------------------------- building

    @classmethod
    def up(cls, workers=2, cores=4, memory="3g", gpus=None, netem=None, *, prefix=None, worker_timeout=15,
           keep=False, timeout=120, standalone=True) -> Hosts:  # fmt: skip
        """Build the hosts and start Spark standalone on them; on any failure remove
        whatever was built and raise.

        Parameters
        ----------
        workers : int
            Worker hosts (``worker-1`` ...), each with one Spark Worker.
        cores : int
            Cores each Spark Worker offers.
        memory : str
            Memory each Spark Worker offers (``3g``).
        gpus : dict of str to list of str, optional
            Fake GPU addresses per host, e.g. ``{"worker-1": ["0", "1"]}``: that host's
            Spark Worker discovers them with a script of its own.
        netem : dict of str to str, optional
            ``tc netem`` arguments per host, e.g. ``{"worker-1": "delay 20ms rate 1gbit"}``.
        prefix : str, optional
            The run's prefix; default a fresh random one.
        worker_timeout : int
            The Master's ``spark.worker.timeout`` (s): how soon a lost host is dropped.
        keep : bool
            Leave the cluster up when this process exits (``python -m tests.support.hosts up``);
            otherwise it is removed at exit and on SIGTERM.
        timeout : float
            Seconds each daemon may take to start.
        standalone : bool
            Start Spark standalone (a Master, a Worker per worker host); False: only the
            hosts, for another cluster manager (:mod:`tests.support.yarn_hosts`).
        """
        self = cls(prefix or fresh_prefix(), workers, cores, memory, gpus, netem, worker_timeout, standalone)
        self.kept = keep
        if not keep:
            _register(self)
        try:
            self._build(timeout)
        except BaseException:
            with contextlib.suppress(Exception):
                self.down()
            raise
        return self

    def _build(self, timeout: float) -> None:
        os.makedirs(self.run_dir, mode=0o755)
        os.makedirs(self.shared_dir)
        self._write_etc_hosts()
        self._save_state()
        sh(["ip", "link", "add", self.bridge, "type", "bridge"])
        sh(["ip", "link", "set", self.bridge, "up"])
        for host in self.hosts.values():
            self._add_link(host)
            self._start_holder(host, timeout)
            if host.netem:
                self.set_netem(host.name, host.netem)
        self._save_state()
        if not self.standalone:
            return
        self._start_master(timeout)
        for host in self.workers:  # the JVMs start side by side
            self._start_worker(host, timeout, wait=False)
        for host in self.workers:
            self._wait_worker(host, timeout)
        self.wait_master_lists(timeout)

    @property
    def workers(self) -> list[Host]:
        """The worker hosts, in order."""
        return [h for h in self.hosts.values() if h.name != DRIVER]

    @property
    def shared_dir(self) -> str:
        """A directory of the shared file system, the same path on every host."""
        return os.path.join(self.run_dir, "shared")

    @property
    def master_url(self) -> str:
        return f"spark://{self.hosts[DRIVER].ip}:{MASTER_PORT}"

    def _write_etc_hosts(self) -> None:
        lines = ["127.0.0.1\tlocalhost"] + [f"{h.ip}\t{h.name}" for h in self.hosts.values()]
        with open(os.path.join(self.run_dir, "hosts"), "w") as f:
            f.write("\n".join(lines) + "\n")

    def _save_state(self) -> None:
        state = {
            "prefix": self.prefix,
            "owner": None if self.kept else os.getpid(),
            "master": self.master_url,
            "hosts": {
                h.name: {"ip": h.ip, "netns": h.netns, "veth": h.veth, "holder": h.holder} for h in self.hosts.values()
            },
            "idents": {k: list(v) for k, v in self.idents.items()},
        }
        with open(self.state_path + ".new", "w") as f:
            json.dump(state, f, indent=1)
        os.replace(self.state_path + ".new", self.state_path)

    @property
    def state_path(self) -> str:
        return os.path.join(self.run_dir, "state.json")

    def _add_link(self, host: Host) -> None:
        os.makedirs(host.local)
        sh(["ip", "netns", "add", host.netns])
        self.idents[host.name] = host.ident
        inner = host.veth + "i"
        sh(["ip", "link", "add", host.veth, "type", "veth", "peer", "name", inner])
        sh(["ip", "link", "set", host.veth, "master", self.bridge, "up"])
        sh(["ip", "link", "set", inner, "netns", host.netns])
        ns = ["ip", "-n", host.netns]
        sh([*ns, "link", "set", inner, "name", "eth0"])
        sh([*ns, "addr", "add", f"{host.ip}/24", "dev", "eth0"])
        sh([*ns, "link", "set", "eth0", "up"])
        sh([*ns, "link", "set", "lo", "up"])
        sh([*ns, "route", "add", "default", "dev", "eth0"])

    def _start_holder(self, host: Host, timeout: float) -> None:
        etc_hosts = os.path.join(self.run_dir, "hosts")
        argv = ["ip", "netns", "exec", host.netns, "unshare", "--uts", "--mount", "--propagation", "private",
                "--", "sh", "-c", HOLDER_SCRIPT, "holder", host.name, etc_hosts, host.local]  # fmt: skip
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             start_new_session=True)  # fmt: skip
        host.procs["holder"] = p
        line = _read_line(p.stdout, timeout)
        p.stdout.close()
        if line != "ready":
            raise HostsError(f"the holder of {host.name} did not start: {line!r} (exit {p.poll()})")
        host.holder = p.pid

    def set_netem(self, name: str, spec: str | None) -> None:
        """Shape host ``name``'s link (its ``eth0``, outgoing): ``spec`` is ``tc netem``
        arguments (``"delay 20ms rate 1gbit"``), or a whole qdisc (``"tbf rate 100mbit
        burst 64kb latency 50ms"``, for kernels without ``sch_netem``); None removes it."""
        host = self.hosts[name]
        tc = ["tc", "-n", host.netns, "qdisc"]
        if spec is None:
            sh([*tc, "del", "dev", "eth0", "root"], check=False)
        else:
            words = spec.split()
            kind = [] if words[0] in QDISCS else ["netem"]
            sh([*tc, "replace", "dev", "eth0", "root", *kind, *words])
        host.netem = spec

    # ----------------------------------------------------------------- Spark daemons

    def host_env(self, host: Host) -> dict[str, str]:
        """Environment every process on ``host`` gets: its own temporary directory and
        Spark local directory (on its private disk), its address, the venv's Python."""
        return {
            "TMPDIR": os.path.join(host.local, "tmp"),
            "SPARK_LOCAL_DIRS": os.path.join(host.local, "spark"),
            "SPARK_LOCAL_IP": host.ip,
            "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
            STATE_ENV: self.state_path,
        }

    def _daemon(self, host: Host, role: str, argv, env: dict) -> str:
        log = os.path.join(host.dir, f"{role}.log")
        with open(log, "ab") as out:
            host.procs[role] = self.exec(host.name, argv, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                         stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
        return log

    def _start_master(self, timeout: float) -> None:
        host = self.hosts[DRIVER]
        argv = [os.path.join(spark_home(), "bin", "spark-class"), "org.apache.spark.deploy.master.Master",
                "--host", host.ip, "--port", str(MASTER_PORT), "--webui-port", str(MASTER_UI_PORT)]  # fmt: skip
        env = {"SPARK_MASTER_OPTS": f"-Dspark.worker.timeout={self.worker_timeout}", "SPARK_DAEMON_MEMORY": "512m",
               "SPARK_DAEMON_JAVA_OPTS": java_options("driver")}  # fmt: skip
        log = self._daemon(host, "master", argv, env)
        self._wait_log(host, "master", log, "I have been elected leader", timeout)

    def _gpu_script(self, host: Host) -> str:
        path = os.path.join(host.dir, "gpus.sh")
        with open(path, "w") as f:
            f.write("#!/bin/sh\necho '" + json.dumps({"name": "gpu", "addresses": host.gpus}) + "'\n")
        os.chmod(path, 0o755)
        return path

    def _start_worker(self, host: Host, timeout: float, wait: bool = True) -> None:
        host.starts += 1
        argv = [os.path.join(spark_home(), "bin", "spark-class"), "org.apache.spark.deploy.worker.Worker",
                "--host", host.ip, "--cores", str(self.cores), "--memory", self.memory,
                "--work-dir", os.path.join(host.local, "work"), self.master_url]  # fmt: skip
        # a Worker that decommissions itself on SIGPWR (spark.worker.decommission.signal), as
        # Databricks documents for spot instances (SPARK_WORKER_OPTS)
        opts = ["-Dspark.decommission.enabled=true"]
        if host.gpus:
            opts += [f"-Dspark.worker.resource.gpu.amount={len(host.gpus)}",
                     f"-Dspark.worker.resource.gpu.discoveryScript={self._gpu_script(host)}"]  # fmt: skip
        env = {
            "SPARK_WORKER_OPTS": " ".join(opts),
            "SPARK_DAEMON_MEMORY": "512m",
            "SPARK_DAEMON_JAVA_OPTS": java_options("driver"),
        }
        self._daemon(host, f"worker-{host.starts}", argv, env)
        if wait:
            self._wait_worker(host, timeout)

    def _wait_worker(self, host: Host, timeout: float) -> None:
        role = f"worker-{host.starts}"
        log = os.path.join(host.dir, f"{role}.log")
        self._wait_log(host, role, log, "Successfully registered with master", timeout)

    def _wait_log(self, host: Host, role: str, log: str, text: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        proc = host.procs[role]
        while time.monotonic() < deadline:
            with open(log, errors="replace") as f:
                content = f.read()
            if text in content:
                return
            if proc.poll() is not None:
                raise HostsError(f"{role} on {host.name} exited ({proc.returncode}): {content[-3000:]}")
            time.sleep(0.2)
        raise HostsError(f"{role} on {host.name}: no {text!r} in {log} after {timeout} s")

    def wait_master_lists(self, timeout: float = 60) -> dict:
        """Wait until the Master lists exactly the live worker hosts as ALIVE; its JSON."""
        want = sorted(h.ip for h in self.workers if h.holder is not None)
        url = f"http://{self.hosts[DRIVER].ip}:{MASTER_UI_PORT}/json/"
        out = self.python(DRIVER, MASTER_POLL, url, json.dumps(want), str(timeout), timeout=timeout + 15)
        return json.loads(out)

    # ----------------------------------------------------------------- running things

    def enter(self, name: str, cwd: str | None = None) -> list[str]:
        """The command prefix that runs a program on host ``name``."""
        host = self.hosts[name]
        if host.holder is None:
            raise HostsError(f"{name} is down (killed and not replaced)")
        return ["nsenter", "-t", str(host.holder), "--net", "--uts", "--mount", f"--wd={cwd or REPO}", "--"]

    def exec(self, name: str, argv, *, env=None, cwd=None, **popen_kw) -> subprocess.Popen:
        """Start ``argv`` on host ``name`` (a Popen; this process's environment, the
        host's own, then ``env``)."""
        full = {**os.environ, **self.host_env(self.hosts[name]), **(env or {})}
        return subprocess.Popen(self.enter(name, cwd) + [str(a) for a in argv], env=full, **popen_kw)

    def run(self, name: str, argv, timeout: float = 60, check: bool = True, **kw) -> subprocess.CompletedProcess:
        """Run ``argv`` on host ``name`` to completion (killed after ``timeout``)."""
        p = self.exec(name, argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                      text=True, start_new_session=True, **kw)  # fmt: skip
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            out, err = p.communicate(timeout=10)
            raise HostsError(f"{argv} on {name} took more than {timeout} s: {out[-2000:]} {err[-2000:]}") from None
        done = subprocess.CompletedProcess(argv, p.returncode, out, err)
        if check and p.returncode:
            raise HostsError(f"{argv} on {name} failed ({p.returncode}): {out[-2000:]}\n{err[-3000:]}")
        return done

    def python(self, name: str, code: str, *args, timeout: float = 60) -> str:
        """Run Python ``code`` (``sys.argv[1:]`` = ``args``) on host ``name``; its stdout."""
        return self.run(name, [sys.executable, "-c", code, *args], timeout=timeout).stdout

    def can_connect(self, src: str, dst: str, port: int, timeout: float = 2) -> bool:
        """Whether a TCP connection from host ``src`` to host ``dst``'s ``port`` opens."""
        out = self.python(src, CONNECT_PROBE, self.hosts[dst].ip, str(port), str(timeout), timeout=timeout + 20)
        return out.strip() == "open"

    def pids(self, name: str) -> list[int]:
        """Every process on host ``name`` (in its network namespace)."""
        return pids_in_netns(self.idents.get(name) or self.hosts[name].ident)

    def executor_pids(self, name: str) -> list[int]:
        """The Spark executor JVMs on host ``name``."""
        return [p for p in self.pids(name) if EXECUTOR_CLASS in cmdline(p)]

    def dask_processes(self, tag: str | None = None) -> dict[str, list[int]]:
        """Per host (only hosts with any), the spark-dask worker processes: of cluster
        ``tag``, or of any cluster."""
        out = {}
        for name, host in self.hosts.items():
            found = [pid for pid in (self.pids(name) if host.holder else []) if _is_dask(pid, tag)]
            if found:
                out[name] = found
        return out

    # ----------------------------------------------------------------- faults

    def kill_host(self, name: str) -> list[int]:
        """SIGKILL every process of host ``name`` at once (a lost machine): its daemons,
        executors, Dask workers, the holder (so its disk is gone too); the pids."""
        with self._lock:
            host = self.hosts[name]
            killed = self.pids(name)
            kill_all(lambda: self.pids(name))
            for p in host.procs.values():
                with contextlib.suppress(subprocess.TimeoutExpired):
                    p.wait(10)
            host.procs.clear()
            host.holder = None
            if name == DRIVER and self._driver is not None and self._driver.proc is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self._driver.proc.wait(10)
                self._driver.proc = None
            return killed

    def replace_host(self, name: str, timeout: float = 120) -> None:
        """Bring host ``name`` back fresh: killed if still up, link restored, a new holder
        (new host name, /etc/hosts, empty disk), its Spark daemon started again (without
        Spark standalone: the caller starts what the host runs)."""
        with self._lock:
            host = self.hosts[name]
            self.kill_host(name)
            self.restore(name)
            self._start_holder(host, timeout)
            self._save_state()
            if not self.standalone:
                return
            if name == DRIVER:
                self._start_master(timeout)
            else:
                self._start_worker(host, timeout)
            self.wait_master_lists(timeout)

    def kill_executor(self, name: str) -> list[int]:
        """SIGKILL the Spark executor JVM(s) on host ``name``; their pids."""
        pids = self.executor_pids(name)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return pids

    def decommission_host(self, name: str) -> list[int]:
        """SIGPWR to the Spark Worker JVM on host ``name`` (a spot reclaim's notice): the
        Worker tells the Master, which decommissions its executors; their pids."""
        pids = [p for p in self.pids(name) if WORKER_CLASS in cmdline(p)]
        for pid in pids:
            os.kill(pid, signal.SIGPWR)
        return pids

    def cut(self, name: str) -> None:
        """Take host ``name``'s link down (its bridge port): no packet in or out."""
        sh(["ip", "link", "set", self.hosts[name].veth, "down"])

    def restore(self, name: str) -> None:
        """Bring host ``name``'s link up again."""
        sh(["ip", "link", "set", self.hosts[name].veth, "up"])

    # ----------------------------------------------------------------- the driver

    def driver(self, executors: int | None = None, timeout: float = 180, master: str | None = None,
               env: dict | None = None, **conf) -> Driver:  # fmt: skip
        """A fresh driver service on ``driver`` (the previous one closed first) with
        one SparkSession on this cluster's Master (or ``master``, e.g. ``yarn``, with
        ``env`` in the service's environment: ``HADOOP_CONF_DIR``); ``conf`` adds Spark
        confs (dots as in Spark: pass them as ``**{"spark.x": "y"}``)."""
        with self._lock:
            if self._driver is not None:
                self._driver.close()
            self._driver = Driver(self, conf, executors, master=master, env=env)
            self._driver.start(timeout)
            return self._driver

    # ----------------------------------------------------------------- removing

    def down(self) -> None:
        """Remove everything of this run: every process on every host, the namespaces,
        links, bridge and run directory. Idempotent; raises if something stays."""
        with self._lock:
            for p in [p for h in self.hosts.values() for p in h.procs.values()]:
                if p.poll() is None:
                    with contextlib.suppress(ProcessLookupError):
                        p.kill()
            purge(self.prefix, self.idents)
            for h in self.hosts.values():
                for p in h.procs.values():
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        p.wait(10)
                h.procs.clear()
                h.holder = None
            self._driver = None
            _unregister(self)
        left = leftovers(self.prefix, self.idents)
        if left:
            raise HostsError(f"run {self.prefix} left {left}")


def fresh_prefix() -> str:
    """A prefix no current run uses."""
    taken = set(live_prefixes())
    while True:
        prefix = f"{STEM}{secrets.token_hex(2)}"
        if prefix not in taken:
            return prefix


def live_prefixes() -> list[str]:
    """Prefixes of every run that left anything: namespaces, links, run directories."""
    names = netns_names() + link_names()
    found = {m.group(1) for m in map(PREFIX_RE.match, names) if m}
    for d in os.listdir(RUN_ROOT):
        if d.startswith(RUN_DIR_STEM + STEM) and PREFIX_RE.match(d[len(RUN_DIR_STEM) :] + "-"):
            found.add(d[len(RUN_DIR_STEM) :])
    return sorted(found)


def _run_dir(prefix: str) -> str:
    return os.path.join(RUN_ROOT, RUN_DIR_STEM + prefix)


def _state(prefix: str) -> dict:
    try:
        with open(os.path.join(_run_dir(prefix), "state.json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def _run_idents(prefix: str, idents=None) -> set[tuple[int, int]]:
    found = {tuple(v) for v in (idents or {}).values() if v}
    found |= {tuple(v) for v in _state(prefix).get("idents", {}).values() if v}
    found |= {ns_id(f"/run/netns/{n}") for n in netns_names() if n.startswith(prefix + "-")} - {None}
    return found


def run_pids(prefix: str, idents=None) -> list[int]:
    """Every process of run ``prefix``: in one of its namespaces (also one whose name is
    gone), or with its run directory on the command line."""
    wanted = _run_idents(prefix, idents)
    run_dir = _run_dir(prefix)
    me = os.getpid()
    out = []
    for p in filter(str.isdigit, os.listdir("/proc")):
        pid = int(p)
        if pid != me and (ns_id(f"/proc/{p}/ns/net") in wanted or run_dir in cmdline(pid)):
            out.append(pid)
    return out


def purge(prefix: str, idents=None) -> None:
    """Remove everything of run ``prefix`` (its state or not): kill its processes, delete
    its namespaces and links, its run directory. Best effort per step; bounded."""
    with contextlib.suppress(HostsError):
        kill_all(lambda: run_pids(prefix, idents))
    for name in netns_names():
        if name.startswith(prefix + "-"):
            sh(["ip", "netns", "del", name], check=False)
    for name in link_names():
        if name.startswith(prefix + "-"):
            sh(["ip", "link", "del", name], check=False)
    shutil.rmtree(_run_dir(prefix), ignore_errors=True)


def leftovers(prefix: str, idents=None) -> dict:
    """What of run ``prefix`` exists (empty when nothing): namespaces, links, mounts in
    this namespace, the run directory, processes."""
    run_dir = _run_dir(prefix)
    with open("/proc/self/mountinfo") as f:
        mounts = [line.strip() for line in f if prefix in line or run_dir in line]
    found = {
        "netns": [n for n in netns_names() if n.startswith(prefix + "-")],
        "links": [n for n in link_names() if n.startswith(prefix + "-")],
        "mounts": mounts,
        "run_dir": [run_dir] if os.path.exists(run_dir) else [],
        "processes": [(p, cmdline(p)) for p in run_pids(prefix, idents)],
    }
    return {k: v for k, v in found.items() if v}


def _owner_alive(prefix: str) -> bool:
    owner = _state(prefix).get("owner")
    return bool(owner) and os.path.exists(f"/proc/{owner}")


def purge_stale() -> list[str]:
    """Remove the runs whose owning process is gone (a crashed test session), but not
    runs left up on purpose (``up``); their prefixes."""
    stale = []
    for prefix in live_prefixes():
        state = _state(prefix)
        kept = state and state.get("owner") is None
        if not kept and not _owner_alive(prefix):
            purge(prefix)
            stale.append(prefix)
    return stale


# --------------------------------------------------------------------------- at exit

_LIVE: list[Hosts] = []
_PREVIOUS_SIGTERM = None


def _register(hosts: Hosts) -> None:
    global _PREVIOUS_SIGTERM
    if not _LIVE and _PREVIOUS_SIGTERM is None:
        atexit.register(_down_live)
        if threading.current_thread() is threading.main_thread():
            _PREVIOUS_SIGTERM = signal.signal(signal.SIGTERM, _on_sigterm)
    _LIVE.append(hosts)


def _unregister(hosts: Hosts) -> None:
    with contextlib.suppress(ValueError):
        _LIVE.remove(hosts)


def _down_live() -> None:
    for hosts in list(_LIVE):
        with contextlib.suppress(Exception):
            hosts.down()


def _on_sigterm(signum, frame) -> None:
    _down_live()
    previous = _PREVIOUS_SIGTERM
    if callable(previous):
        previous(signum, frame)
    else:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)


# --------------------------------------------------------------------------- snippets

MASTER_POLL = """
import json, sys, time, urllib.request
url, want, timeout = sys.argv[1], json.loads(sys.argv[2]), float(sys.argv[3])
deadline = time.monotonic() + timeout
while True:
    try:
        state = json.load(urllib.request.urlopen(url, timeout=5))
        alive = sorted(w["host"] for w in state["workers"] if w["state"] == "ALIVE")
    except OSError as e:
        state, alive = {"error": str(e)}, None
    if alive == want or time.monotonic() > deadline:
        break
    time.sleep(0.2)
if alive != want:
    sys.exit(f"the master lists {alive} as alive, not {want}: {state}")
print(json.dumps(state))
"""

CONNECT_PROBE = """
import socket, sys
try:
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=float(sys.argv[3])).close()
    print("open")
except OSError as e:
    print("closed", e)
"""


# --------------------------------------------------------------------------- driver service


class Driver:
    """The Spark driver on host ``driver``: a ``python -m tests.support.hosts serve`` process with
    one classic SparkSession on the cluster's Master, executing the tests' calls.

    Parameters
    ----------
    hosts : Hosts
        The cluster.
    conf : dict
        Spark confs over the defaults (driver address, no UI, the venv's Python).
    executors : int, optional
        Executors to wait for at start; default one per worker host, with dynamic
        allocation ``spark.dynamicAllocation.minExecutors``.
    master : str, optional
        The session's master; default the cluster's standalone Master.
    env : dict, optional
        More environment for the service (``HADOOP_CONF_DIR`` for ``yarn``).
    """

    def __init__(self, hosts: Hosts, conf: dict, executors: int | None = None, master: str | None = None,
                 env: dict | None = None):  # fmt: skip
        self.hosts = hosts
        self.master = master or hosts.master_url
        self.env = dict(env or {})
        ip = hosts.hosts[DRIVER].ip
        self.conf = {
            "spark.driver.host": ip,
            "spark.driver.bindAddress": ip,
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.executorEnv.PYSPARK_PYTHON": sys.executable,
            "spark.sql.shuffle.partitions": "4",
            "spark.executor.memory": "1g",
            "spark.driver.extraJavaOptions": java_options("driver"),
            "spark.executor.extraJavaOptions": java_options("executor"),
            **{k: str(v) for k, v in conf.items()},
        }
        self.executors = executors if executors is not None else self._expected_executors()
        self.authkey = secrets.token_bytes(16)
        n = len([f for f in os.listdir(hosts.hosts[DRIVER].dir) if f.startswith("serve-")]) + 1
        base = os.path.join(hosts.hosts[DRIVER].dir, f"serve-{n}")
        self.socket, self.log, self.conf_path = base + ".sock", base + ".log", base + ".json"
        self.proc: subprocess.Popen | None = None

    def _expected_executors(self) -> int:
        if self.conf.get("spark.dynamicAllocation.enabled", "false").lower() == "true":
            return int(self.conf.get("spark.dynamicAllocation.minExecutors", "0"))
        return len(self.hosts.workers)

    def start(self, timeout: float = 180) -> None:
        """Start the service and wait (bounded) until its session has its executors."""
        with open(self.conf_path, "w") as f:
            json.dump({"master": self.master, "conf": self.conf, "executors": self.executors}, f)
        with open(self.log, "ab") as out:
            self.proc = self.hosts.exec(DRIVER, [sys.executable, "-m", "tests.support.hosts", "serve", self.socket,
                                                 self.conf_path], env={**self.env, AUTHKEY_ENV: self.authkey.hex()},
                                        stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                        start_new_session=True)  # fmt: skip
        deadline = time.monotonic() + timeout
        while not os.path.exists(self.socket):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.kill()
                raise HostsError(f"the driver service did not start (exit {self.proc and self.proc.returncode}): "
                                 f"{self.log_tail()}")  # fmt: skip
            time.sleep(0.2)
        self.call("tests.support.hosts:ping", timeout=max(deadline - time.monotonic(), 10))

    def log_tail(self, n: int = 4000) -> str:
        """The end of the service's log."""
        with contextlib.suppress(OSError), open(self.log, errors="replace") as f:
            return f.read()[-n:]
        return ""

    def _connect(self, timeout: float = 30):
        box: dict = {}

        def connect():
            try:
                box["conn"] = Client(self.socket, family="AF_UNIX", authkey=self.authkey)
            except Exception as e:  # noqa: BLE001  (reported by the caller)
                box["error"] = e

        t = threading.Thread(target=connect, name="driver-connect", daemon=True)
        t.start()
        t.join(timeout)
        if "conn" not in box:
            raise HostsError(f"cannot reach the driver service: {box.get('error', 'timed out')}; {self.log_tail()}")
        return box["conn"]

    def call(self, target: str, *args, timeout: float = 120, **kwargs):
        """Run ``module:function(*args, **kwargs)`` in the driver process; its result.

        Raises
        ------
        AssertionError, RemoteError
            The call raised (an assertion, or anything else): with its remote traceback.
        TimeoutError
            No answer within ``timeout`` seconds.
        """
        if self.proc is None or self.proc.poll() is not None:
            raise HostsError(f"the driver service is not running; {self.log_tail()}")
        with contextlib.closing(self._connect()) as conn:
            conn.send((target, args, kwargs))
            if not conn.poll(timeout):
                raise TimeoutError(f"{target} did not return within {timeout} s; {self.log_tail()}")
            status, value = conn.recv()
        if status == "ok":
            return value
        kind, text = value
        raise (AssertionError if kind == "AssertionError" else RemoteError)(f"in the driver, {target}:\n{text}")

    def restart(self, executors: int | None = None, **conf) -> Driver:
        """A fresh driver service with these confs instead (the hosts' one)."""
        return self.hosts.driver(executors=executors, **conf)

    def close(self, timeout: float = 60) -> None:
        """Stop the session and the service (killed if it does not stop in time), then
        wait until no executor of it is left on the worker hosts."""
        if self.proc is None:
            return
        try:
            if self.proc.poll() is None:
                self.call("tests.support.hosts:stop", timeout=timeout)
                self.proc.wait(timeout)
        except Exception:  # noqa: BLE001  (it did not stop by itself: killed below)
            self.kill()
        self.kill()
        deadline = time.monotonic() + timeout
        while any(self.hosts.executor_pids(h.name) for h in self.hosts.workers if h.holder):
            if time.monotonic() > deadline:
                raise HostsError("executors outlived their driver")
            time.sleep(0.2)

    def kill(self) -> None:
        """SIGKILL the driver process and everything under it (its JVM) at once."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        tree = []
        with contextlib.suppress(psutil.Error):
            tree = [psutil.Process(proc.pid)]
            tree += tree[0].children(recursive=True)
        for p in tree:
            with contextlib.suppress(psutil.Error):
                p.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(10)
        psutil.wait_procs(tree, timeout=10)  # the JVM, re-parented, reaped by init
        with contextlib.suppress(OSError):
            os.unlink(self.socket)

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None


# --------------------------------------------------------------------------- service side

SESSION = None  # the driver service's SparkSession
_LISTENER: Listener | None = None


def session():
    """The SparkSession of this driver service (in functions the tests call)."""
    if SESSION is None:
        raise RuntimeError("not in a driver service (python -m tests.support.hosts serve)")
    return SESSION


def hosts_state() -> dict:
    """The run's state (hosts, addresses), in any process started on a host."""
    with open(os.environ[STATE_ENV]) as f:
        return json.load(f)


def ping() -> str:
    """Answer of a ready driver service: the host it runs on."""
    return socket.gethostname()


def stop() -> None:
    """Stop the session; the service exits after answering."""
    if SESSION is not None:
        SESSION.stop()
    threading.Timer(0.2, os._exit, (0,)).start()


def _make_session(master: str, conf: dict, executors: int, timeout: float = 150):
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(master).appName("spark-dask-multihost")
    for k, v in conf.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    deadline = time.monotonic() + timeout
    while len(_executor_ids(spark)) < executors:
        if time.monotonic() > deadline:
            raise HostsError(f"{len(_executor_ids(spark))} of {executors} executors after {timeout} s")
        time.sleep(0.2)
    return spark


def _executor_ids(spark) -> list[str]:
    ids = spark.sparkContext._jsc.sc().getExecutorIds().mkString(",")
    return [i for i in ids.split(",") if i and i != "driver"]


def _resolve(target: str):
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def _answer(conn) -> None:
    try:
        target, args, kwargs = conn.recv()
        try:
            reply = ("ok", _resolve(target)(*args, **kwargs))
        except BaseException as e:  # noqa: BLE001  (every failure goes back to the test)
            reply = ("error", (type(e).__name__, traceback.format_exc()))
        try:
            conn.send(reply)
        except Exception as e:  # noqa: BLE001  (an unpicklable result)
            conn.send(("error", (type(e).__name__, traceback.format_exc())))
    except (EOFError, OSError):
        pass
    finally:
        conn.close()


def _watch_parent(parent: int) -> None:
    # the test process that started this service is gone: leave (the JVM follows on EOF)
    while os.getppid() == parent:
        time.sleep(1)
    os._exit(1)


def serve(socket_path: str, conf_path: str) -> None:
    """The driver service: make the session, then answer calls until told to stop."""
    global SESSION, _LISTENER
    threading.Thread(target=_watch_parent, args=(os.getppid(),), name="watch-parent", daemon=True).start()
    authkey = bytes.fromhex(os.environ.pop(AUTHKEY_ENV))
    with open(conf_path) as f:
        spec = json.load(f)
    SESSION = _make_session(spec["master"], spec["conf"], spec["executors"])
    _LISTENER = Listener(socket_path, family="AF_UNIX", authkey=authkey)
    os.chmod(socket_path, 0o600)
    print("driver service ready on", socket_path, flush=True)
    while True:
        try:
            conn = _LISTENER.accept()
        except Exception:  # noqa: BLE001  (a failed handshake: wait for the next caller)
            continue
        threading.Thread(target=_answer, args=(conn,), name="driver-call", daemon=True).start()


# --------------------------------------------------------------------------- command line


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m tests.support.hosts", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("up", help="build a cluster and leave it up; prints its prefix")
    up.add_argument("--workers", type=int, default=2)
    up.add_argument("--cores", type=int, default=4)
    up.add_argument("--memory", default="3g")
    up.add_argument("--gpus", type=int, default=0, help="fake GPUs per worker host")
    up.add_argument("--netem", action="append", default=[], metavar="HOST=SPEC")
    down = sub.add_parser("down", help="remove a run (or every run)")
    down.add_argument("--prefix")
    down.add_argument("--all", action="store_true", help="every run whose owner is gone, and kept ones")
    down.add_argument("--force", action="store_true", help="with --all: also runs of live test sessions")
    sub.add_parser("status", help="list runs and their processes")
    ex = sub.add_parser("exec", help="run a command on a host: exec [--prefix P] HOST -- CMD...")
    ex.add_argument("--prefix")
    ex.add_argument("host")
    ex.add_argument("argv", nargs=argparse.REMAINDER)
    serve_p = sub.add_parser("serve", help="(internal) the driver service")
    serve_p.add_argument("socket")
    serve_p.add_argument("conf")
    return p


def _one_prefix(prefix: str | None) -> str:
    if prefix:
        return prefix
    runs = live_prefixes()
    if len(runs) != 1:
        sys.exit(f"give --prefix: runs are {runs}")
    return runs[0]


def _cli_up(args) -> int:
    gpus = (
        {f"worker-{i}": [str(g) for g in range(args.gpus)] for i in range(1, args.workers + 1)} if args.gpus else None
    )
    netem = dict(spec.split("=", 1) for spec in args.netem)
    h = Hosts.up(args.workers, args.cores, args.memory, gpus, netem, keep=True)
    print(h.prefix, h.run_dir, h.master_url)
    return 0


def _cli_down(args) -> int:
    if args.all:
        prefixes = [p for p in live_prefixes() if args.force or not _owner_alive(p)]
    else:
        prefixes = [_one_prefix(args.prefix)]
    for prefix in prefixes:
        purge(prefix)
        left = leftovers(prefix)
        print(prefix, "removed" if not left else f"left {left}")
    return 0


def _cli_status(args) -> int:
    for prefix in live_prefixes():
        state = _state(prefix)
        print(prefix, "owner", state.get("owner"), "alive" if _owner_alive(prefix) else "gone")
        for name, h in state.get("hosts", {}).items():
            pids = pids_in_netns(ns_id(f"/run/netns/{h['netns']}"))
            print(f"  {name:10} {h['ip']:14} {len(pids)} processes")
    return 0


def _cli_exec(args) -> int:
    state = _state(_one_prefix(args.prefix))
    holder = state["hosts"][args.host]["holder"]
    argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    os.execvp("nsenter", ["nsenter", "-t", str(holder), "--net", "--uts", "--mount", f"--wd={os.getcwd()}", "--",
                          *argv])  # fmt: skip
    return 1


def main(argv=None) -> int:
    """``python -m tests.support.hosts``: see the module's docstring."""
    args = _parser().parse_args(argv)
    if args.cmd == "serve":
        serve(args.socket, args.conf)
        return 0
    return {"up": _cli_up, "down": _cli_down, "status": _cli_status, "exec": _cli_exec}[args.cmd](args)


if __name__ == "__main__":
    # run as the module tests.support.hosts (not a second copy named __main__): the functions the
    # driver service calls find SESSION in the module they import
    sys.exit(importlib.import_module("tests.support.hosts").main())
