"""The multi-host test cluster itself (``tests/support/hosts.py``): it is removed without a
trace (also after a half-built start), and each fault primitive the fault tests use
does what it says (cut/restore a link, shape a link, kill and replace a host, kill an
executor, kill the driver)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from tests.support import hosts as hostlib
from tests.support.hosts import DRIVER, MASTER_PORT
from tests.support.multihost import multihost_or_skip
from tests.support.processes import wait_until

pytestmark = [pytest.mark.multihost, pytest.mark.timeout(180)]

S = "tests.multihost.multihost_scenarios:"


@pytest.fixture
def multihost_required():
    """Skip (fail under CI) where the hosts cannot be built; for tests that build their own."""
    multihost_or_skip()


def test_down_removes_every_trace(multihost_required):
    h = hostlib.Hosts.up(workers=1)
    try:
        holders = [host.holder for host in h.hosts.values()]
        driver = h.driver()
        assert driver.call(S + "spark_hosts") == ["worker-1"]
        assert hostlib.leftovers(h.prefix, h.idents)["netns"]  # the check sees a live run
    finally:
        h.down()
    assert hostlib.leftovers(h.prefix, h.idents) == {}
    assert not [p for p in holders if os.path.exists(f"/proc/{p}")]  # and with them their mounts
    assert h.prefix not in subprocess.run(["ip", "link"], capture_output=True, text=True, timeout=10, check=True).stdout
    h.down()  # idempotent


def test_a_half_built_up_leaves_nothing(multihost_required, monkeypatch):
    # an unknown qdisc fails after the namespaces, links and holders of two hosts exist
    built = []
    original = hostlib.Hosts.set_netem

    def set_netem(self, name, spec):
        built.append((self, [host.holder for host in self.hosts.values() if host.holder]))
        return original(self, name, spec)

    monkeypatch.setattr(hostlib.Hosts, "set_netem", set_netem)
    with pytest.raises(hostlib.HostsError, match="no-such-qdisc|qdisc"):
        hostlib.Hosts.up(workers=1, netem={"worker-1": "no-such-qdisc 1"})
    (h, holders) = built[0]
    assert len(holders) == 2 and len(h.idents) == 2
    assert hostlib.leftovers(h.prefix, h.idents) == {}
    assert not [p for p in holders if os.path.exists(f"/proc/{p}")]


def test_cut_and_restore_a_link(multihost):
    assert multihost.can_connect("worker-1", DRIVER, MASTER_PORT)
    multihost.cut("worker-1")
    try:
        assert not multihost.can_connect("worker-1", DRIVER, MASTER_PORT, timeout=1)
        assert multihost.can_connect("worker-2", DRIVER, MASTER_PORT)  # the others still talk
    finally:
        multihost.restore("worker-1")
    assert wait_until(lambda: multihost.can_connect("worker-1", DRIVER, MASTER_PORT), 20)


SINK = """
import socket, sys
s = socket.create_server((sys.argv[1], 9099))
print("listening", flush=True)
c, _ = s.accept()
n = 0
while (b := c.recv(65536)):
    n += len(b)
c.sendall(str(n).encode())
"""

SEND = """
import socket, sys, time
t0 = time.monotonic()
c = socket.create_connection((sys.argv[1], 9099), timeout=30)
c.sendall(b"x" * int(sys.argv[2]))
c.shutdown(socket.SHUT_WR)
n = int(c.recv(64))
print(n, time.monotonic() - t0)
"""


def timed_send(hosts, nbytes: int) -> float:
    """Seconds to send ``nbytes`` from worker-1 to the driver host and hear back."""
    sink = hosts.exec(DRIVER, [sys.executable, "-c", SINK, hosts.hosts[DRIVER].ip], stdout=subprocess.PIPE)
    try:
        assert hostlib._read_line(sink.stdout, 10) == "listening"
        out = hosts.python("worker-1", SEND, hosts.hosts[DRIVER].ip, str(nbytes), timeout=60).split()
        assert int(out[0]) == nbytes
        return float(out[1])
    finally:
        sink.kill()
        sink.wait(10)


def test_shape_a_link(multihost):
    # 2 Mbit/s: 400 kB take at least 1.6 s (the kernel here may lack sch_netem: tbf)
    multihost.set_netem("worker-1", "tbf rate 2mbit burst 16kb latency 2s")
    try:
        shown = subprocess.run(["tc", "-n", multihost.hosts["worker-1"].netns, "qdisc", "show", "dev", "eth0"],
                               capture_output=True, text=True, timeout=10, check=True).stdout  # fmt: skip
        assert "tbf" in shown and "rate 2Mbit" in shown, shown
        assert timed_send(multihost, 400_000) > 1.5
    finally:
        multihost.set_netem("worker-1", None)
    assert "tbf" not in subprocess.run(["tc", "-n", multihost.hosts["worker-1"].netns, "qdisc", "show"],
                                       capture_output=True, text=True, timeout=10, check=True).stdout  # fmt: skip


def test_kill_host_and_replace_it(multihost):
    host = multihost.hosts["worker-2"]
    multihost.run("worker-2", ["touch", f"{host.local}/mark"])
    old_holder, spark_worker = host.holder, host.procs[f"worker-{host.starts}"].pid
    try:
        killed = multihost.kill_host("worker-2")
        assert old_holder in killed and spark_worker in killed
        assert multihost.pids("worker-2") == [] and not os.path.exists(f"/proc/{old_holder}")
        state = multihost.wait_master_lists(30)  # the Master dropped the lost host
        assert sorted(w["host"] for w in state["workers"] if w["state"] == "ALIVE") == ["198.18.0.11"]
    finally:
        multihost.replace_host("worker-2")
    assert host.holder != old_holder
    assert multihost.run("worker-2", ["hostname"]).stdout.strip() == "worker-2"
    assert multihost.run("worker-2", ["ls", host.local]).stdout.split() == ["spark", "tmp", "work"]  # a new disk
    assert not os.path.exists(f"{host.local}/mark")  # never on the shared file system
    state = multihost.wait_master_lists(30)
    assert sorted(w["host"] for w in state["workers"] if w["state"] == "ALIVE") == ["198.18.0.11", "198.18.0.12"]


def test_kill_an_executor(multihost, multihost_driver):
    d = multihost_driver
    before = d.call(S + "executors")
    assert len(before["ids"]) == 2
    (pid,) = multihost.kill_executor("worker-1")
    assert wait_until(lambda: not hostlib.alive(pid), 10)
    # the standalone Worker starts a new executor for the application
    assert wait_until(lambda: multihost.executor_pids("worker-1") not in ([], [pid]), 60)
    assert wait_until(lambda: len(set(d.call(S + "executors")["ids"]) - set(before["ids"])) == 1, 60)
    assert d.call(S + "spark_hosts") == ["worker-1", "worker-2"]


def test_kill_the_driver(multihost, multihost_driver):
    d = multihost_driver
    pid = d.pid
    tree = [pid] + [p for p in multihost.pids(DRIVER) if pid in _ancestors(p)]
    assert len(tree) >= 2  # the Python driver and its JVM
    t0 = time.monotonic()
    d.kill()
    assert not [p for p in tree if hostlib.alive(p)]
    assert time.monotonic() - t0 < 15
    # the Master ends the application: the workers stop its executors
    assert wait_until(lambda: not any(multihost.executor_pids(h.name) for h in multihost.workers), 60)
    assert multihost.pids(DRIVER)  # the Master and the holder live on


def _ancestors(pid: int) -> list[int]:
    out = []
    while pid > 1:
        try:
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
        out.append(pid)
    return out
