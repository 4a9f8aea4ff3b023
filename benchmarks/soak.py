"""A chaos soak on the multi-host test cluster (``tests/support/hosts.py``; root only).

    python -m benchmarks soak [--minutes 30] [--seed 37] [--workers 2] [--json PATH]

One *served, named* cluster (``spark_dask.commands.serve.serve_cluster``, what ``spark-dask serve
--name NAME`` runs) lives in the hosts' driver service on host ``driver`` for the whole
run, while a seeded schedule of faults (:func:`schedule`, a pure function: the same seed,
minutes and hosts give the same list) is applied to it:

- ``kill_worker``: SIGKILL a Dask worker process on a host;
- ``kill_executor``: SIGKILL the Spark executor JVM on a host;
- ``host_lost``: every process of a host killed at once, the host brought back fresh
  (``Hosts.replace_host``) ``duration`` seconds later;
- ``link_cut``: a host's link down for ``duration`` (10-40 s), then up again;
- ``scale``: ``scale(n)`` through a handle found by name (``SparkCluster.from_name``);
- ``client``: a client joins by name from another process on ``driver``, computes a
  known answer and leaves (the cluster stays);
- ``handoff``: ``spark_dask.to_dask`` then ``spark_dask.to_spark`` through a by-name
  handle's client, rows and checksums against the known ones.

The faults that break something (the first five) are applied one at a time, each
followed by a wait until the cluster is back at its wanted size; ``client`` and
``handoff`` run in their own thread, at their times, whatever else happens. Meanwhile
a workload thread computes, again and again, results with a known answer (a Dask
array sum, a sum of squares, a DataFrame groupby) and checks each one.

Every step has a bound (:data:`BOUNDS`, per step kind); a step over its bound is a
*hang* (the soak goes on; the driver service's own waits end by themselves). A result
that fails with an error (workers just died) and is right on a later try counts as
*retried*; a wrong value is *wrong*. At the end the cluster is closed by name and
nothing of the run may be left: Dask processes, executor JVMs, listening ports other
than the Spark daemons', the cluster's state-directory entry, hand-off transfer
directories in ``SPARK_LOCAL_DIRS``; with hosts of its own (not the test session's),
also no namespace, link, mount, run directory or process of the run's prefix.

The report is a table (:func:`render`): faults per kind, results checked / retried /
wrong, hangs, what was left behind, and the seconds the cluster ran below its wanted
size. ``tests/multihost/test_multihost_soak.py`` runs the 2-minute version in CI.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import random
import sys
import threading
import time
from typing import NamedTuple

from tests.support.parts import parts_of

# ---------------------------------------------------------------------- the schedule
FAULTS = ("kill_worker", "kill_executor", "host_lost", "link_cut", "scale")  # applied one at a time
OPS = ("client", "handoff")  # in their own thread, during whatever fault runs
KINDS = FAULTS + OPS
WEIGHTS = {"kill_worker": 3, "kill_executor": 2, "host_lost": 1, "link_cut": 2, "scale": 2}
LINK_CUT = (10.0, 40.0)  # seconds a link stays down
HOST_LOST = (10.0, 25.0)  # seconds a host stays lost before it is replaced
# seconds the schedule allows after a fault for the cluster to be whole again (the
# runner waits for it anyway, up to BOUNDS["recover"]); then a pause of GAP seconds
RECOVERY = {"kill_worker": 5.0, "kill_executor": 10.0, "host_lost": 20.0, "link_cut": 15.0, "scale": 5.0}
GAP = (2.0, 6.0)
OP_GAP = (10.0, 30.0)
START = 5.0  # the first fault, seconds after the cluster runs
SIZES = (1, 2)  # scale between these (one worker per worker host at most)

# the bound of every step kind, seconds: a step over it is a hang
BOUNDS = {
    "start": 300.0,
    "kill_worker": 30.0,
    "kill_executor": 30.0,
    "host_lost": 200.0,  # the lost time plus the replacement host's start
    "link_cut": 60.0,  # the cut time plus restoring the link
    "scale": 90.0,  # the owner takes the request
    "recover": 300.0,  # back to the wanted size after any fault
    "client": 150.0,  # join by name, compute, leave (another process)
    "handoff": 240.0,  # to_dask + to_spark, with retries
    "compute": 240.0,  # one workload result, with retries
    "close": 150.0,  # the cluster closed by name, the driver service stopped
}
TRY = 100.0  # seconds one try of a result may take in the driver service


class Step(NamedTuple):
    """One step of a schedule: at ``t`` seconds, ``kind`` on ``target`` for ``duration``."""

    t: float
    kind: str
    target: str
    duration: float


def schedule(seed: int, minutes: float, hosts: list[str]) -> list[Step]:
    """The soak's faults and operations: the same arguments give the same list.

    Every kind comes once first (faults and operations each in a seeded order), then
    faults drawn by :data:`WEIGHTS`; faults follow each other by their duration, the
    time :data:`RECOVERY` allows and a pause; operations every 10-30 s; nothing starts
    after ``minutes`` (but a last ``scale`` back to full size, where the cluster would
    end smaller). ``target`` is a host for the host faults, the size for ``scale``
    (between :data:`SIZES`, toggling), the operation's name otherwise.

    >>> steps = schedule(4, 2, ["worker-1", "worker-2"])
    >>> steps == schedule(4, 2, ["worker-1", "worker-2"])
    True
    >>> sorted({s.kind for s in steps}) == sorted(KINDS)
    True
    >>> all(LINK_CUT[0] <= s.duration <= LINK_CUT[1] for s in steps if s.kind == "link_cut")
    True
    >>> [s.target for s in steps if s.kind == "scale"][:2]
    ['1', '2']
    >>> schedule(1, 0, ["worker-1"])
    []
    """
    rng = random.Random(seed)
    end = minutes * 60.0
    hosts = sorted(hosts)
    out: list[Step] = []
    first = list(FAULTS)
    rng.shuffle(first)
    size, t = max(SIZES), START
    while t < end:
        kind = first.pop(0) if first else rng.choices(FAULTS, [WEIGHTS[k] for k in FAULTS])[0]
        duration, target = 0.0, rng.choice(hosts)
        if kind == "link_cut":
            duration = round(rng.uniform(*LINK_CUT), 1)
        elif kind == "host_lost":
            duration = round(rng.uniform(*HOST_LOST), 1)
        elif kind == "scale":
            size = min(SIZES) if size == max(SIZES) else max(SIZES)
            target = str(size)
        out.append(Step(round(t, 1), kind, target, duration))
        t += duration + RECOVERY[kind] + rng.uniform(*GAP)
    if size != max(SIZES) and out:  # end at full size
        out.append(Step(round(min(t, max(end, t)), 1), "scale", str(max(SIZES)), 0.0))
    ops = list(OPS)
    rng.shuffle(ops)
    t = START + rng.uniform(0, 5)
    while t < end:
        kind = ops.pop(0) if ops else rng.choice(OPS)
        out.append(Step(round(t, 1), kind, kind, 0.0))
        t += rng.uniform(*OP_GAP)
    return sorted(out)


def kinds_of(steps: list[Step]) -> set[str]:
    """The kinds a schedule has."""
    return {s.kind for s in steps}


# ---------------------------------------------------------------------- in the driver service
NAME = "soak"
N_ROWS = 30_000
SOAK: dict = {}  # the served cluster, its sampler, the clients


def _sampler(stop: threading.Event) -> None:
    while not stop.is_set():
        cluster = SOAK.get("cluster")
        scheduler = cluster.scheduler if cluster is not None else None
        try:
            n = 0 if scheduler is None else len([ws for ws in list(scheduler.workers.values())
                                                  if ws.status.name == "running"])  # fmt: skip
        except Exception:  # noqa: BLE001  (a worker dict changing under us: next sample)
            n = -1
        if n >= 0:
            SOAK["samples"].append((time.time(), n, SOAK["wanted"]))
        stop.wait(0.25)


def serve(name: str = NAME, n_workers: int = 2, wait: float = BOUNDS["start"], **options) -> dict:
    """In the driver service: ``serve_cluster(spark, name=...)`` (``spark-dask serve``) in
    a thread of its own, and a sampler of its worker count; when it runs, its facts."""
    import logging
    import warnings

    from distributed import Client

    from spark_dask.commands.serve import serve_cluster
    from tests.support.hosts import session

    warnings.filterwarnings("ignore")
    logging.getLogger("distributed").setLevel(logging.ERROR)
    ready = threading.Event()
    box: dict = {}

    def on_ready(cluster):
        box["cluster"] = cluster
        ready.set()

    def run():
        try:
            box["rc"] = serve_cluster(spark=session(), ready=on_ready, name=name, n_workers=n_workers,
                                      progress=False, **options)  # fmt: skip
        finally:
            ready.set()

    thread = threading.Thread(target=run, name="soak-serve", daemon=True)
    thread.start()
    ready.wait(wait)
    if "cluster" not in box:
        raise RuntimeError(f"the served cluster did not start within {wait} s (exit {box.get('rc')})")
    cluster = box["cluster"]
    stop = threading.Event()
    SOAK.clear()
    SOAK.update(cluster=cluster, thread=thread, wanted=n_workers, samples=[], stop=stop, name=name,
                client=Client(cluster))  # fmt: skip
    threading.Thread(target=_sampler, args=(stop,), name="soak-sampler", daemon=True).start()
    return {"tag": cluster.tag, "address": cluster.scheduler_address, "workers": len(cluster.scheduler.workers)}


def wanted(n: int) -> None:
    """The size the cluster should have from now on (before a ``scale``)."""
    SOAK["wanted"] = n


def scale_by_name(n: int) -> dict:
    """``SparkCluster.from_name(name).scale(n)``, then let go of the handle."""
    from spark_dask import SparkCluster

    SOAK["wanted"] = n
    handle = SparkCluster.from_name(SOAK["name"], timeout=30)
    try:
        handle.scale(n)
    finally:
        handle.disconnect()
    return {"wanted": n}


def whole(wait: float, settle: float = 2.0, stable: float = 2.0) -> float | None:
    """Wait (at most ``wait`` s, the first ``settle`` s in any case) until the cluster has
    run its wanted number of workers for ``stable`` s; the seconds it took, or None."""
    t0 = time.monotonic()
    time.sleep(settle)  # the scheduler notices a lost worker in a moment, not at once
    while time.monotonic() - t0 < wait:
        cluster = SOAK["cluster"]
        if cluster.status.name in ("closed", "failed"):
            raise RuntimeError(f"the served cluster is {cluster.status.name}: {cluster.get_logs()['Cluster'][-3000:]}")
        now = time.time()
        recent = [x for x in SOAK["samples"] if x[0] >= now - stable]
        if len(recent) >= 4 and all(n == SOAK["wanted"] for _, n, _ in recent):
            return round(time.monotonic() - t0 - stable, 2)
        time.sleep(0.25)
    return None


def state() -> dict:
    """The served cluster's status, workers, relaunches, the last lines of its log."""
    cluster = SOAK["cluster"]
    return {"status": cluster.status.name, "workers": len(cluster.scheduler.workers) if cluster.scheduler else 0,
            "wanted": SOAK["wanted"], "relaunches": parts_of(cluster).relaunches,
            "target": parts_of(cluster).pools["default"].target if "default" in parts_of(cluster).pools else None,
            "log": cluster.get_logs()["Cluster"][-6000:]}  # fmt: skip


def _result(fut, timeout: float):
    from distributed import TimeoutError as DaskTimeout

    try:
        return fut.result(timeout=timeout)
    except (TimeoutError, DaskTimeout):
        with contextlib.suppress(Exception):
            fut.cancel()
        raise TimeoutError(f"no result within {timeout} s") from None


def check(kind: str, i: int, timeout: float = TRY) -> dict:
    """One workload result with a known answer: ``{"got", "want"}``; an error raises."""
    import dask.array as da
    import dask.dataframe as dd
    import numpy as np
    import pandas as pd

    client = SOAK["client"]
    rng = random.Random(i)
    n = rng.randrange(500_000, 3_000_000)
    chunks = rng.choice((50_000, 100_000, 250_000))
    if kind == "array":
        got = int(_result(client.compute(da.arange(n, chunks=chunks).sum()), timeout))
        want = n * (n - 1) // 2
    elif kind == "squares":
        x = da.arange(n, chunks=chunks, dtype="int64")
        got = int(_result(client.compute((x * x).sum()), timeout))
        want = (n - 1) * n * (2 * n - 1) // 6
    elif kind == "groupby":
        m = n // 10
        k = rng.randrange(3, 20)
        frame = pd.DataFrame({"k": np.arange(m) % k, "x": np.arange(m)})
        ddf = dd.from_pandas(frame, npartitions=rng.randrange(2, 9))
        got = {int(a): int(b) for a, b in _result(client.compute(ddf.groupby("k").x.sum()), timeout).items()}
        want = {j: sum(range(j, m, k)) for j in range(k)}  # the known answer, no pandas/Dask involved
    else:
        raise ValueError(kind)
    return {"got": got, "want": want, "kind": kind}


def handoff(timeout: float = TRY) -> dict:
    """A hand-off round trip through a by-name handle's client: ``to_dask`` of a Spark
    DataFrame of known rows, its row count and checksums in Dask, ``to_spark`` back,
    its row count and checksums in Spark; ``{"got", "want"}``."""
    from pyspark.sql import functions as F

    import spark_dask
    from spark_dask import SparkCluster
    from tests.support.hosts import session

    spark = session()
    df = spark.range(0, N_ROWS, 1, 6).selectExpr("id", "cast(id % 7 as int) as k", "cast(id as double) * 0.5 as x")
    want = {"rows": N_ROWS, "id": N_ROWS * (N_ROWS - 1) // 2, "x": N_ROWS * (N_ROWS - 1) / 4,
            "k": {j: sum(range(j, N_ROWS, 7)) for j in range(7)}}  # fmt: skip
    handle = SparkCluster.from_name(SOAK["name"], timeout=30)
    try:
        client = handle.get_client()
        try:
            ddf = spark_dask.to_dask(df, client=client)
            rows, ids, xs, ks = (
                _result(client.compute(e), timeout)
                for e in (ddf.id.count(), ddf.id.sum(), ddf.x.sum(), ddf.groupby("k").id.sum())
            )
            dask_side = {
                "rows": int(rows),
                "id": int(ids),
                "x": float(xs),
                "k": {int(a): int(b) for a, b in ks.items()},
            }
            back = spark_dask.to_spark(ddf, client=client)
            row = back.agg(F.count("id").alias("n"), F.sum("id").alias("id"), F.sum("x").alias("x")).collect()[0]
            ksp = {int(r["k"]): int(r["s"]) for r in back.groupBy("k").agg(F.sum("id").alias("s")).collect()}
            spark_side = {"rows": int(row["n"]), "id": int(row["id"]), "x": float(row["x"]), "k": ksp}
        finally:
            client.close()
    finally:
        handle.disconnect()
    return {"got": {"to_dask": dask_side, "to_spark": spark_side}, "want": {"to_dask": want, "to_spark": want},
            "kind": "handoff"}  # fmt: skip


def close_by_name(wait: float = 120) -> dict:
    """Close the served cluster through a by-name handle (``close()`` is carried out by
    the owner), wait for the serving thread to end; what is left: its state-directory
    entry, active Spark jobs, the sampled time below the wanted size."""
    from spark_dask import SparkCluster
    from spark_dask.named import configured_root, list_clusters
    from tests.support.hosts import session

    name = SOAK["name"]
    with contextlib.suppress(Exception):
        SOAK["client"].close()
    handle = SparkCluster.from_name(name, timeout=30)
    handle.close()
    SOAK["thread"].join(wait)
    SOAK["stop"].set()
    tracker = session().sparkContext.statusTracker()
    deadline = time.monotonic() + 30
    while tracker.getActiveJobsIds() and time.monotonic() < deadline:
        time.sleep(0.2)
    root = configured_root()
    entries = sorted(os.listdir(root)) if root and os.path.isdir(root) else []
    return {
        "serving": SOAK["thread"].is_alive(),
        "listed": [c.get("name") for c in list_clusters()],
        "entries": [os.path.join(root, e) for e in entries if not e.startswith(".")],
        "active_jobs": list(tracker.getActiveJobsIds()),
        "status": SOAK["cluster"].status.name,
    }


def samples() -> list:
    """The sampler's ``(time, running workers, wanted)`` list."""
    return list(SOAK.get("samples", ()))


def below_full(samples, since: float | None = None, until: float | None = None) -> float:
    """Seconds the samples show fewer running workers than wanted.

    >>> below_full([(0, 2, 2), (1, 1, 2), (3, 2, 2), (4, 1, 1)])
    2.0
    """
    s = [x for x in samples if (since is None or x[0] >= since) and (until is None or x[0] <= until)]
    return round(float(sum(b[0] - a[0] for a, b in itertools.pairwise(s) if a[1] < a[2])), 1)


# ---------------------------------------------------------------------- the client process
CLIENT_CODE = """
import json, sys, time
import dask.array as da
from spark_dask import SparkCluster
name, n = sys.argv[1], int(sys.argv[2])
t0 = time.monotonic()
with SparkCluster.from_name(name, timeout=30) as cluster:      # leaving the block lets go only
    with cluster.get_client() as client:
        got = int(client.compute(da.arange(n, chunks=100_000).sum()).result(timeout=float(sys.argv[3])))
print(json.dumps({"got": got, "want": n * (n - 1) // 2, "seconds": round(time.monotonic() - t0, 2)}))
"""


# ---------------------------------------------------------------------- the runner
class Tally:
    """What the soak saw (thread-safe counters and a log of events)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.faults: dict[str, int] = dict.fromkeys(KINDS, 0)
        self.checked = self.retried = self.wrong = self.hangs = self.errors = self.repairs = 0
        self.events: list[str] = []
        self.t0 = time.monotonic()

    def note(self, text: str) -> None:
        line = f"[{time.monotonic() - self.t0:7.1f}s] {text}"
        with self.lock:
            self.events.append(line)
        print("soak:", line, file=sys.stderr, flush=True)

    def add(self, **counts) -> None:
        with self.lock:
            for k, v in counts.items():
                setattr(self, k, getattr(self, k) + v)


def _bounded(fn, bound: float, *args, **kwargs):
    """Run ``fn`` in a thread; (True, result) or (False, error); ``TimeoutError`` when it
    runs over ``bound`` (the thread is left to end by itself: a daemon)."""
    box: dict = {}

    def run():
        try:
            box["ok"] = fn(*args, **kwargs)
        except BaseException as e:  # noqa: BLE001  (the caller sorts it)
            box["err"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(bound)
    if t.is_alive():
        raise TimeoutError(f"{getattr(fn, '__name__', fn)} ran over its bound of {bound:g} s")
    if "err" in box:
        return False, box["err"]
    return True, box["ok"]


def _short(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    tail = [ln for ln in text if ln.strip()][-1:] or [""]
    return f"{type(e).__name__}: {tail[0][:300]}"


class Soak:
    """Applies a schedule to a served cluster on ``hosts`` (a :class:`tests.support.hosts.Hosts`)."""

    def __init__(self, hosts, steps: list[Step], minutes: float, seed: int):
        self.hosts, self.steps, self.minutes, self.seed = hosts, steps, minutes, seed
        self.tally = Tally()
        self.stop = threading.Event()
        self.d = None
        self.size = max(SIZES)
        self.late = 0.0
        self.skipped = 0
        self.left: dict = {}
        self.tag = None

    # ------------------------------------------------------------ helpers
    def call(self, target: str, *args, bound: float, **kwargs):
        return self.d.call("benchmarks.soak:" + target, *args, timeout=bound, **kwargs)

    def result(self, what: str, fn, bound: float, loud: bool = False) -> None:
        """Get one result (retried on errors until ``bound``) and check it."""
        t0, tries = time.monotonic(), 0
        while True:
            tries += 1
            left = bound - (time.monotonic() - t0)
            if left <= 0 or self.stop.is_set() and tries > 1:
                if left <= 0:
                    self.tally.add(hangs=1)
                    self.tally.note(f"HANG {what}: no right result within {bound:g} s ({tries - 1} tries)")
                return
            try:
                ok, out = _bounded(fn, left)
            except TimeoutError as e:
                self.tally.add(hangs=1)
                self.tally.note(f"HANG {what}: {e}")
                return
            if ok:
                self.tally.add(checked=1, retried=int(tries > 1))
                if out["got"] != out["want"]:
                    self.tally.add(wrong=1)
                    self.tally.note(f"WRONG {what}: got {out['got']!r}, want {out['want']!r}")
                elif loud or tries > 1:
                    self.tally.note(f"  {what}: right after {time.monotonic() - t0:.1f} s ({tries} tries)")
                return
            if isinstance(out, TimeoutError) and "no result within" in str(out):
                self.tally.add(hangs=1)
                self.tally.note(f"HANG {what}: {_short(out)}")
                return
            self.tally.note(f"retry {what} (try {tries}): {_short(out)}")
            time.sleep(2)

    # ------------------------------------------------------------ threads
    def workload(self) -> None:
        i = 0
        while not self.stop.is_set():
            i += 1
            kind = ("array", "squares", "groupby")[i % 3]
            self.result(f"compute {kind} #{i}",
                        lambda k=kind, j=i: self.call("check", k, j, bound=TRY + 10), BOUNDS["compute"])  # fmt: skip
            self.stop.wait(0.5)

    def past_end(self, step: Step, kinds) -> bool:
        """Whether the run is past its minutes (plus a grace): the steps left are skipped."""
        if self.elapsed() <= self.minutes * 60 + 60:
            return False
        left = [s for s in self.steps if s.kind in kinds and s.t >= step.t]
        self.skipped += len(left)
        self.tally.note(f"past the end: {len(left)} planned {'/'.join(sorted({s.kind for s in left}))} steps skipped")
        return True

    def ops(self) -> None:
        for step in [s for s in self.steps if s.kind in OPS]:
            if self.stop.wait(max(0.0, step.t - self.elapsed())) or self.past_end(step, OPS):
                return
            with self.tally.lock:
                self.tally.faults[step.kind] += 1
            self.tally.note(f"{step.kind} (planned {step.t:.0f}s)")
            if step.kind == "client":
                n = random.Random(step.t).randrange(500_000, 2_000_000)
                self.result("client by name", lambda n=n: self._client(n), BOUNDS["client"], loud=True)
            else:
                self.result("handoff", lambda: self.call("handoff", bound=TRY + 20), BOUNDS["handoff"], loud=True)

    def _client(self, n: int) -> dict:
        from tests.support.hosts import DRIVER

        out = self.hosts.python(DRIVER, CLIENT_CODE, NAME, str(n), str(TRY), timeout=TRY + 30)
        return json.loads(out.strip().splitlines()[-1])

    def elapsed(self) -> float:
        return time.monotonic() - self.t_start

    # ------------------------------------------------------------ faults
    def _fault(self, step: Step) -> str:
        h = self.hosts
        if step.kind == "kill_worker":
            return self._kill_worker(step.target)
        if step.kind == "kill_executor":
            pids = h.kill_executor(step.target)
            return f"executor pids {pids}" if pids else "no executor there"
        if step.kind == "host_lost":
            killed = h.kill_host(step.target)
            time.sleep(step.duration)
            h.replace_host(step.target)
            return f"{len(killed)} processes killed, host replaced after {step.duration:g} s"
        if step.kind == "link_cut":
            h.cut(step.target)
            try:
                time.sleep(step.duration)
            finally:
                h.restore(step.target)
            return f"link down {step.duration:g} s"
        if step.kind == "scale":
            self.size = int(step.target)
            self.call("scale_by_name", self.size, bound=BOUNDS["scale"])
            return f"scale({self.size}) by name"
        raise ValueError(step.kind)

    def _kill_worker(self, target: str) -> str:
        import psutil

        procs = self.hosts.dask_processes(self.tag)
        host = target if target in procs else next(iter(sorted(procs)), None)
        if host is None:
            return "no Dask worker process on any host"
        pids = set(procs[host])
        # the worker itself: a Dask process whose parent is one too (its nanny), else all
        victims = [p for p in pids if _parent(p, psutil) in pids] or sorted(pids)
        for pid in victims:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 9)
        return f"SIGKILL {victims} on {host}"

    def faults(self) -> None:
        for step in [s for s in self.steps if s.kind in FAULTS]:
            if self.stop.wait(max(0.0, step.t - self.elapsed())) or self.past_end(step, FAULTS):
                return
            self.late = max(self.late, self.elapsed() - step.t)
            with self.tally.lock:
                self.tally.faults[step.kind] += 1
            try:
                ok, out = _bounded(self._fault, BOUNDS[step.kind], step)
            except TimeoutError as e:
                self.tally.add(hangs=1)
                self.tally.note(f"HANG {step.kind} {step.target}: {e}")
                continue
            self.tally.note(f"{step.kind} {step.target} (planned {step.t:.0f}s): {out if ok else _short(out)}")
            if not ok:
                self.tally.add(errors=1)
            self._recover(step)

    def _whole(self):
        try:
            return _bounded(lambda: self.call("whole", BOUNDS["recover"], bound=BOUNDS["recover"] + 15),
                            BOUNDS["recover"] + 20)  # fmt: skip
        except TimeoutError as e:
            self.tally.note(f"recover: {e}")
            return True, None

    def _recover(self, step: Step) -> None:
        ok, took = self._whole()
        if ok and took is None:
            self.tally.add(hangs=1)
            st = {}
            with contextlib.suppress(Exception):
                st = self.call("state", bound=30)
            self.tally.note(f"HANG recover after {step.kind} {step.target}: not whole within {BOUNDS['recover']:g} s "
                            f"(the cluster: {st.get('workers')} workers, its own target {st.get('target')}, "
                            f"wanted {self.size}, status {st.get('status')})")  # fmt: skip
            # repair, so that the soak goes on testing: scale back to the wanted size by name
            self.tally.add(repairs=1)
            with contextlib.suppress(Exception):
                self.call("scale_by_name", self.size, bound=BOUNDS["scale"])
            ok, took = self._whole()
            self.tally.note(
                f"  repaired by scale({self.size}) by name: "
                f"{'whole after ' + format(took, '.1f') + ' s' if ok and took is not None else 'still not whole'}"
            )
        if not ok:
            self.tally.add(errors=1)
            self.tally.note(f"recover after {step.kind}: {_short(took)}")
            self.stop.set()  # the cluster is gone: stop cleanly
        elif took is None:
            self.tally.add(hangs=1)
            self.tally.note(f"HANG recover after {step.kind} {step.target}: still not whole after the repair")
        else:
            self.tally.note(f"  whole again after {took:.1f} s")

    # ------------------------------------------------------------ the run
    def run(self) -> dict:
        t_begin = time.monotonic()
        self.baseline = self.listening()  # the Spark daemons' (and anything else's) before
        self.d = self.hosts.driver()
        try:
            facts = self.call("serve", NAME, max(SIZES), relaunch_attempts=100_000, bound=BOUNDS["start"] + 30)
            self.tag = facts["tag"]
            self.tally.note(
                f"served cluster {NAME!r} ({facts['tag']}) at {facts['address']}, {facts['workers']} workers"
            )
            self.t_start = self.tally.t0 = time.monotonic()
            self.wall0 = time.time()
            threads = [threading.Thread(target=f, name=f"soak-{f.__name__}", daemon=True)
                       for f in (self.workload, self.ops)]  # fmt: skip
            for t in threads:
                t.start()
            self.faults()  # this thread: the faults, in order
            rest = self.minutes * 60 - self.elapsed()
            if rest > 0:
                self.stop.wait(rest)
            self.stop.set()
            for t in threads:
                t.join(max(BOUNDS.values()) + 30)
                if t.is_alive():
                    self.tally.add(hangs=1)
                    self.tally.note(f"HANG {t.name} did not end")
            self.ran = self.elapsed()
            self.wall1 = time.time()
            with contextlib.suppress(Exception):
                self.final_state = self.call("state", bound=30)
            self.below = below_full(self.call("samples", bound=30), self.wall0, self.wall1)
            ok, closed = _bounded(lambda: self.call("close_by_name", bound=BOUNDS["close"]), BOUNDS["close"] + 10)
            self.closed = closed if ok else {"error": _short(closed)}
            self.tally.note(f"closed by name: {self.closed}")
        finally:
            self.restore_hosts()
            with contextlib.suppress(Exception):
                self.d.close()
        self.left = self.leftovers()
        self.total = time.monotonic() - t_begin
        return self.summary()

    def listening(self, name: str | None = None) -> dict[tuple[str, str], str]:
        """(host, local address) -> ``ss`` line of every listening TCP socket, on one
        host or every live one."""
        out = {}
        for host in [self.hosts.hosts[name]] if name else self.hosts.hosts.values():
            if host.holder is None:
                continue
            done = self.hosts.run(host.name, ["ss", "-Hltnp"], timeout=20, check=False).stdout
            for line in done.splitlines():
                words = line.split()
                if len(words) > 3:
                    out[(host.name, words[3])] = " ".join(words[3:])
        return out

    def restore_hosts(self) -> None:
        for h in self.hosts.workers:
            with contextlib.suppress(Exception):
                self.hosts.restore(h.name)
            if h.holder is None:
                with contextlib.suppress(Exception):
                    self.hosts.replace_host(h.name)

    def leftovers(self, wait: float = 45) -> dict:
        """What of the soak is left on the hosts once the cluster and the driver service
        closed: processes other than the hosts' own (holder, Spark Master / Workers),
        listening ports that were not there before, transfer directories; polled for up
        to ``wait`` s (a closed driver's JVM exits a moment after its Python)."""
        t0 = time.monotonic()
        while True:
            left = self._left_now()
            if not any(left.values()) or time.monotonic() - t0 > wait:
                break
            time.sleep(1)
        self.settled = round(time.monotonic() - t0, 1)
        left["files"] += [f"state dir: {e}" for e in (getattr(self, "closed", {}) or {}).get("entries", [])]
        return left

    def _left_now(self) -> dict:
        from spark_dask.handoff.files import DIR_PREFIX
        from tests.support.hosts import alive

        h = self.hosts
        procs, ports, files = [], [], []
        for host in h.hosts.values():
            if host.holder is None:
                continue
            keep = {p.pid for p in host.procs.values()} | {host.holder}
            for pid in h.pids(host.name):
                cmd = _cmd(pid)
                if pid not in keep and alive(pid) and any(w in cmd for w in ("java", "python", "dask")):
                    procs.append(f"{host.name}: {pid} {cmd}")
            for where, line in self.listening(host.name).items():
                if where not in self.baseline and not {int(x) for x in _pids_in(line)} & keep:
                    ports.append(f"{host.name}: {line}")  # new since the start, not a Spark daemon's
            dirs = [os.path.join(host.local, "spark"), os.path.join(host.local, "tmp")]
            found = h.run(host.name, ["find", *dirs, "-maxdepth", "4", "-name", DIR_PREFIX + "*"], timeout=20,
                          check=False).stdout.split()  # fmt: skip
            files += [f"{host.name}: {f}" for f in found]
        return {"processes": procs, "ports": ports, "files": files}

    def summary(self) -> dict:
        t = self.tally
        return {
            "seed": self.seed, "minutes": self.minutes, "faults": dict(t.faults), "checked": t.checked,
            "retried": t.retried, "wrong": t.wrong, "hangs": t.hangs, "errors": t.errors, "repairs": t.repairs,
            "skipped": self.skipped,
            "left": self.left, "below_full_s": getattr(self, "below", None), "ran_s": round(getattr(self, "ran", 0), 1),
            "total_s": round(self.total, 1), "late_s": round(self.late, 1), "settled_s": getattr(self, "settled", None), "closed": getattr(self, "closed", None),
            "relaunches": (getattr(self, "final_state", None) or {}).get("relaunches"),
            "final_status": (getattr(self, "final_state", None) or {}).get("status"),
            "events": list(t.events),
        }  # fmt: skip


def _parent(pid: int, psutil) -> int | None:
    try:
        return psutil.Process(pid).ppid()
    except psutil.Error:
        return None


def _cmd(pid: int) -> str:
    from tests.support.hosts import cmdline

    return cmdline(pid)[:200]


def _pids_in(line: str) -> list[str]:
    import re

    return re.findall(r"pid=(\d+)", line)


def run_soak(hosts, minutes: float, seed: int) -> dict:
    """The soak on ``hosts`` (worker hosts as they are; the driver service is its own)."""
    steps = schedule(seed, minutes, [h.name for h in hosts.workers])
    return Soak(hosts, steps, minutes, seed).run()


def render(R: dict) -> str:
    """The report: a Markdown table like the other benchmarks print."""
    left = R["left"]
    n_left = sum(len(v) for v in left.values())
    rows = [("faults injected", ", ".join(f"{k} {v}" for k, v in R["faults"].items()) +
             f" (total {sum(R['faults'].values())})"),
            ("results checked", f"{R['checked']} ({R['retried']} retried after an error)"),
            ("wrong results", str(R["wrong"])),
            ("hangs (a step over its bound)", str(R["hangs"])),
            ("left behind: processes", str(len(left.get("processes", [])))),
            ("left behind: namespaces / links / mounts / run dir", str(len(left.get("netns", [])) + len(left.get("links", []))
                                                                      + len(left.get("mounts", [])) + len(left.get("run_dir", [])))),
            ("left behind: listening ports", str(len(left.get("ports", [])))),
            ("left behind: files (state dir, transfer dirs)", str(len(left.get("files", [])))),
            ("time below the wanted size", f"{R['below_full_s']} s of {R['ran_s']} s"),
            ("relaunches (the cluster's count)", str(R.get("relaunches"))),
            ("fault steps started late (most)", f"{R['late_s']} s"),
            ("repairs (scale back by name after a recovery hang)", str(R.get("repairs", 0))),
            ("planned steps skipped (past the end)", str(R.get("skipped", 0))),
            ("other errors (a fault step that raised)", str(R["errors"])),
            ("seconds until nothing was left (after the close)", str(R.get("settled_s"))),
            ("whole run (start, soak, close, checks)", f"{R['total_s']} s")]  # fmt: skip
    verdict = "PASS" if not (R["wrong"] or R["hangs"] or n_left) else "FAIL"
    out = [f"chaos soak: seed {R['seed']}, {R['minutes']:g} minutes; {verdict}", "", "| what | count |", "|---|---|"]
    out += [f"| {a} | {b} |" for a, b in rows]
    for k, v in left.items():
        for item in v:
            out.append(f"  left: {k}: {item}")
    return "\n".join(out)


def main(argv=None) -> dict:
    """``python -m benchmarks soak``: build the hosts, run the soak, remove the hosts."""
    from benchmarks.machine import machine_facts
    from tests.support import hosts as hostlib

    p = argparse.ArgumentParser(prog="python -m benchmarks soak", description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=30)
    p.add_argument("--seed", type=int, default=37)
    p.add_argument("--workers", type=int, default=2, help="worker hosts")
    p.add_argument("--json", help="write the result here")
    p.add_argument("--driver-log", help="copy the driver host's logs here (default /tmp/soak-SEED-driver.log)")
    p.add_argument("--schedule", action="store_true", help="print the schedule only")
    args = p.parse_args(argv)
    names = [f"worker-{i}" for i in range(1, args.workers + 1)]
    if args.schedule:
        for s in schedule(args.seed, args.minutes, names):
            print(f"{s.t:7.1f}  {s.kind:14} {s.target:10} {s.duration:g}")
        return {}
    reason = hostlib.unavailable()
    if reason:
        sys.exit(f"soak: {reason}")
    hostlib.purge_stale()
    load0 = os.getloadavg()[0]
    hosts = hostlib.Hosts.up(workers=args.workers, cores=4, memory="3g", worker_timeout=60)
    prefix = hosts.prefix
    try:
        R = run_soak(hosts, args.minutes, args.seed)
    finally:
        # the driver service's log (the cluster's own messages) outlives the hosts
        log = args.driver_log or f"/tmp/soak-{args.seed}-driver.log"
        with contextlib.suppress(OSError), open(log, "w") as out:
            for name in sorted(f for f in os.listdir(hosts.hosts[hostlib.DRIVER].dir) if f.endswith(".log")):
                with open(os.path.join(hosts.hosts[hostlib.DRIVER].dir, name), errors="replace") as f:
                    out.write(f"==> {name}\n{f.read()}")
        print(f"driver log: {log}", file=sys.stderr)
        down_error = None
        try:
            hosts.down()
        except Exception as e:  # noqa: BLE001  (reported as left behind)
            down_error = str(e)
    left = hostlib.leftovers(prefix)
    R["left"].update({k: [str(x) for x in v] for k, v in left.items()})
    if down_error:
        R["left"].setdefault("down", []).append(down_error)
    R["machine"] = machine_facts(load_before=round(load0, 2), load_after=round(os.getloadavg()[0], 2))
    m = R["machine"]
    print(f"Machine: {m['cpus']} CPUs, {m['memory_gib']} GiB, {m['platform']}, Python {m['python']}, "
          f"pyspark {m['pyspark']}, distributed {m['distributed']}; hosts: driver + {args.workers} workers "
          f"(4 cores, 3g); load average before/after {m['load_before']}/{m['load_after']}")  # fmt: skip
    print(f"command: python -m benchmarks soak --minutes {args.minutes:g} --seed {args.seed}")
    print(render(R))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(R, f, indent=1, default=str)
        print(f"wrote {args.json}")
    return R
