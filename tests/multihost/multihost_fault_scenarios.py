"""The driver-side halves of the multi-host fault tests (tests/multihost/test_multihost_faults.py):
what the driver service on host ``driver`` runs while the test breaks a host.

A :class:`Watch` samples, every 0.2 s in a thread of the driver, how many Dask workers
the cluster has and on which hosts, so the test can ask afterwards how low the cluster
went, for how long it had none, and when it was back to its size. Clusters come from
:mod:`tests.multihost.multihost_scenarios` (``start``/``close``), which this module reuses.
"""

from __future__ import annotations

import sys
import threading
import time

import cloudpickle
import pyspark.cloudpickle

from tests.support.parts import parts_of

from .multihost_scenarios import CLIENTS, CLUSTERS, worker_facts

cloudpickle.register_pickle_by_value(sys.modules[__name__])
pyspark.cloudpickle.register_pickle_by_value(sys.modules[__name__])

KEPT: dict = {}  # cluster name -> a future whose data lives on one worker
WATCHES: dict = {}  # cluster name -> Watch


def hosts_of(name: str) -> dict[str, str]:
    """Worker address -> host name, as the workers see it."""
    return {addr: f["hostname"] for addr, f in CLIENTS[name].run(worker_facts).items()}


def keep_data(name: str, host: str) -> str:
    """Scatter a list to the worker on ``host`` (it lives only there); its address."""
    client = CLIENTS[name]
    (address,) = [a for a, h in hosts_of(name).items() if h == host]
    KEPT[name] = client.scatter(list(range(100_000)), workers=[address], broadcast=False)
    return address


def kept_sum(name: str, timeout: float = 30) -> int:
    """The sum of the kept data (computed where it lives)."""
    return CLIENTS[name].submit(sum, KEPT[name]).result(timeout=timeout)


def keep_on(name: str, host: str, n: int = 16, size: int = 4 << 20) -> list[str]:
    """Scatter ``n`` results of ``size`` bytes each to the worker on ``host``; their keys."""
    client = CLIENTS[name]
    (address,) = [a for a, h in hosts_of(name).items() if h == host]
    futures = client.scatter([bytes([i]) * size for i in range(n)], workers=[address], broadcast=False)
    KEPT[f"{name}/on-{host}"] = futures
    return [f.key for f in futures]


def kept_on(name: str, host: str) -> dict:
    """What is left of the results :func:`keep_on` put on ``host``: how many a worker still
    holds, on which hosts (host names), and whether each kept one has its bytes."""
    client, futures = CLIENTS[name], KEPT[f"{name}/on-{host}"]
    where = hosts_of(name)
    tasks = CLUSTERS[name].scheduler.tasks
    held = [f for f in futures if f.key in tasks and tasks[f.key].state == "memory"]
    who_has = client.who_has(held)
    values = client.gather(held)
    return {
        "kept": len(held),
        "of": len(futures),
        "hosts": sorted({where.get(a, a) for f in held for a in who_has[f.key]}),
        "intact": all(v == bytes([futures.index(f)]) * len(v) for f, v in zip(held, values)),
    }


def drains(name: str) -> list[dict]:
    """What each drain of a decommissioned executor did (:func:`spark_dask.gangs.drain.drain_executor`)."""
    return list(parts_of(CLUSTERS[name]).drains)


class Watch(threading.Thread):
    """Samples ``(time.time(), workers, {address: name})`` of a cluster every 0.2 s."""

    def __init__(self, name: str):
        super().__init__(name=f"watch-{name}", daemon=True)
        self.cluster = CLUSTERS[name]
        self.samples: list[tuple[float, int, dict]] = []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            scheduler = self.cluster.scheduler
            workers = {} if scheduler is None else {a: str(ws.name) for a, ws in list(scheduler.workers.items())}
            self.samples.append((time.time(), len(workers), workers))
            self.stop.wait(0.2)


def watch(name: str) -> None:
    """Start sampling cluster ``name``."""
    w = WATCHES[name] = Watch(name)
    w.start()


def addresses(name: str) -> list[str]:
    """The cluster's worker addresses now."""
    return sorted(CLUSTERS[name].scheduler.workers)


def wait_workers(
    name: str, n: int, wait: float, since: float | None = None, old=(), every: bool = False
) -> float | None:
    """Wait (at most ``wait`` s) until the watch has seen ``n`` workers after ``since``
    (a ``time.time()``), at least one of them not in ``old`` (a replacement, where ``old``
    are the addresses before a fault), or with ``every`` none of them in ``old`` (a whole
    gang relaunched: a surviving task's worker may still be registered for a moment while
    Spark kills its task); when it first saw that."""
    deadline = time.monotonic() + wait
    w, old = WATCHES[name], set(old)
    while time.monotonic() < deadline:
        for t, count, workers in list(w.samples):
            new = set(workers) - old
            if (since is None or t > since) and count >= n and (not old or (len(new) >= n if every else new)):
                return t
        time.sleep(0.2)
    return None


def unwatch(name: str, since: float) -> dict:
    """Stop the watch; what it saw after ``since`` (a ``time.time()``): the fewest
    workers, seconds with none, every worker address seen, and the cluster's state."""
    w = WATCHES.pop(name)
    w.stop.set()
    w.join(5)
    after = [(t, n, ws) for t, n, ws in w.samples if t >= since]
    zero = sum(b[0] - a[0] for a, b in zip(after, after[1:]) if a[1] == 0)
    cluster = CLUSTERS[name]
    return {
        "min": min((n for _, n, _ in after), default=None),
        "seconds_with_none": round(zero, 2),
        "seen": sorted({a for _, _, ws in after for a in ws}),
        "names": sorted({n for _, _, ws in after for n in ws.values()}),
        "relaunches": parts_of(cluster).relaunches,
        "gang_status": cluster.gang_status,
        "status": cluster.status.name,
        "log": cluster.get_logs()["Cluster"] if cluster.status.name != "closed" else "",
        "hosts": hosts_of(name) if cluster.status.name == "running" else {},
    }
