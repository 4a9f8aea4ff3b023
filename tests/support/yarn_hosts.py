"""YARN on the multi-host bed: the ResourceManager on host ``driver``, a NodeManager on
each worker host (:class:`OnHosts`, a placement for :class:`tests.support.yarn.YarnBed`),
so that every container has its host's address and private disk, and a host can be cut
off the network or lost with everything on it (:class:`tests.support.hosts.Hosts`)::

    with yarn_on_hosts(workers=2) as (hosts, bed):
        d = hosts.driver(**yarn_driver_conf(bed))   # the Spark driver on host driver
        ...

The RM's ports are YARN's defaults: the ``driver`` host's network namespace has nothing
else on them. Its REST API answers on the test network only, which this process is not
on: :meth:`OnHosts.get_json` asks from host ``driver``.
"""

from __future__ import annotations

import contextlib
import json
import os

from tests.support import hosts as hostlib
from tests.support.hosts import DRIVER, Hosts, HostsError, kill_all
from tests.support.yarn import RM_ADDRESSES, YarnBed

# YARN's own defaults for RM_ADDRESSES' ports (yarn-default.xml, Hadoop 3.3)
RM_PORTS = (8032, 8030, 8031, 8033, 8088)
GET_JSON = "import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1], timeout=2).read().decode())"


class OnHosts:
    """The RM on host ``driver``, NM ``nmI`` on host ``worker-<I+1>`` of ``hosts``; each
    NM's containers on its host's private disk."""

    local_ip = None  # each Spark process binds its own host's address

    def __init__(self, hosts: Hosts):
        self.hosts = hosts

    def host(self, name: str) -> str:
        """The host daemon ``name`` runs on."""
        return DRIVER if name == "rm" else f"worker-{int(name[2:]) + 1}"

    def address(self, name: str) -> str:
        return self.hosts.hosts[self.host(name)].ip

    def enter(self, name: str) -> list[str]:
        return self.hosts.enter(self.host(name))

    def env(self, name: str) -> dict[str, str]:
        return {**os.environ, **self.hosts.host_env(self.hosts.hosts[self.host(name)])}

    def containers_dir(self, directory: str, name: str) -> str:
        return os.path.join(self.hosts.hosts[self.host(name)].local, "yarn")

    def rm_ports(self) -> list[int]:
        return list(RM_PORTS[: len(RM_ADDRESSES)])

    def get_json(self, url: str):
        try:
            return json.loads(self.hosts.python(DRIVER, GET_JSON, url, timeout=20))
        except HostsError as e:
            raise OSError(str(e)) from None

    def kill_leftovers(self, directory: str, name: str | None = None) -> list[int]:
        """SIGKILL every process on NM ``name``'s host (every NM's: None) but its holder."""
        names = [name] if name else [f"nm{i}" for i in range(len(self.hosts.workers))]
        killed = []
        for host in (self.hosts.hosts[self.host(n)] for n in names):
            if host.holder is None:
                continue

            def left(host=host) -> list[int]:
                return [p for p in self.hosts.pids(host.name) if p != host.holder]

            killed += left()
            kill_all(left)
        return killed


@contextlib.contextmanager
def yarn_on_hosts(workers: int = 2, settings: dict | None = None, jars: list[str] | None = None):
    """A multi-host bed of ``workers`` worker hosts without Spark standalone, YARN on it
    (``settings`` over the bed's yarn-site.xml); ``(hosts, bed)``, both removed after."""
    hostlib.purge_stale()
    hosts = Hosts.up(workers=workers, standalone=False)
    try:
        directory = os.path.join(hosts.shared_dir, "yarn")
        with YarnBed.start(directory, nodemanagers=workers, jars=jars, settings=settings,
                           placement=OnHosts(hosts)) as bed:  # fmt: skip
            yield hosts, bed
    finally:
        hosts.down()


def yarn_driver_conf(bed: YarnBed, executors: int = 2, cores: int = 2, **conf) -> dict:
    """The arguments of :meth:`Hosts.driver` for a client-mode session on ``bed``:
    master yarn, ``HADOOP_CONF_DIR`` in its environment, the bed's Spark confs (and
    ``conf`` over them), ``executors`` to wait for."""
    settings = {**bed.spark_conf(executors=executors, cores=cores), **conf}
    return {"master": settings.pop("spark.master"), "env": {"HADOOP_CONF_DIR": bed.conf_dir},
            "executors": executors, **settings}  # fmt: skip
