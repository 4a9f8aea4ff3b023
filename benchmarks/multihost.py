"""The benchmarks on a multi-host Spark standalone cluster (``tests/support/hosts.py``: Linux
network namespaces on this machine, root only).

    python -m benchmarks --master hosts:2x4 [--reps 3] [--no-handoff] [--quick]

``hosts:WxC``: W worker hosts (``worker-1`` ...) of C cores each, one Spark Worker on
each, a Spark standalone Master and the Spark driver on host ``driver``. The Spark
driver, and with it the Dask scheduler, run on ``driver`` in the hosts' *driver
service* (``tests.support.hosts.Driver``): this process builds the hosts, starts the service
and sends it the measurements (the functions below marked "in the driver service")
one call at a time; the times are taken there. What it measures:

- start-up, cold (the first cluster of a fresh Spark application: a new driver
  service each time) and warm (one application), N = 2 and 4 (the sizes that fit),
  against the same floor as the local masters: an empty barrier stage of N tasks
  (measured in the same application, interleaved) plus N bare ``dask worker --nanny
  --no-dashboard`` processes started at once on the worker hosts (round robin) to
  registration with a bare scheduler on ``driver`` (the worker floor across hosts);
- teardown, against the cancel of a running empty barrier stage;
- the hand-off at 1 GB (``benchmarks/handoff.py``'s steps, without the
  through-the-driver methods) with a 2-worker Dask cluster, on the bare link and with
  every host's link shaped (``SHAPE``), runs interleaved; the Parquet round trip goes
  through the hosts' shared directory (outside their private local disks). Bytes
  that crossed the bridge (every host's ``eth0``, sent) are counted per step.

The hosts are removed at the end, also on failure (``Hosts.down`` in a ``finally``;
``tests.support.hosts`` also removes them at exit and on SIGTERM).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import json
import re
import subprocess
import sys
import time

from benchmarks import measure
from benchmarks.machine import machine_facts

# tbf, not netem: this machine's kernel has no sch_netem (CONFIG_NET_SCH_NETEM unset),
# so no delay can be added; a rate of 10 Gbit/s, 1 MB bucket, at most 5 ms queued.
SHAPE = "tbf rate 10gbit burst 1mb latency 5ms"
SIZES = (2, 4)
HANDOFF_GB = 1.0
HANDOFF_CONF = {
    "spark.driver.memory": "6g",
    "spark.driver.maxResultSize": "0",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
}


def parse(master: str) -> tuple[int, int] | None:
    """``hosts:2x4`` -> (2, 4); None for any other master."""
    m = re.fullmatch(r"hosts:(\d+)x(\d+)", master.strip())
    return (int(m.group(1)), int(m.group(2))) if m else None


# ------------------------------------------------------------------ in the driver service
_STATE: dict = {}


def prepare() -> str:
    """The floor stages' functions go to executors by value; quiet logs."""
    import logging
    import warnings

    warnings.filterwarnings("ignore")
    logging.getLogger("distributed").setLevel(logging.WARNING)
    measure.ship_by_value()
    import socket

    return socket.gethostname()


def _spark():
    """The hand-off's session: the Spark Connect one when :func:`connect_session` made it."""
    from tests.support.hosts import session

    return _STATE.get("connect") or session()


def connect_session(port: int) -> str:
    """A Spark Connect session on the driver service's own Connect server (its
    SparkContext runs Spark's ``SparkConnectPlugin``, listening on ``port``), for the
    hand-off's steps from then on: what a Connect client of this cluster would see."""
    import os

    from pyspark.sql.connect.session import SparkSession

    # as pyspark's builder does for remote("local..."): the classic session stays in this
    # process (its builder refuses a remote one beside it), the Connect client is made directly
    os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"
    _STATE["connect"] = SparkSession.builder.remote(f"sc://localhost:{port}").getOrCreate()
    return _STATE["connect"].version


def ours(n: int, options: dict) -> dict:
    """measure.ours (start -> N connected; close -> nothing left) with where the workers ran."""

    return measure.ours(_spark(), n, options, where=True)


def stage(n: int, barrier_call: bool = False) -> float:

    measure.wait_idle(_spark())
    return measure.stage_floor(_spark(), n, barrier_call)


def warm_round(n: int, options: dict) -> dict:
    """One interleaved round, each on an idle application: a start, its stage floors."""

    spark = _spark()
    measure.wait_idle(spark)
    r = measure.ours(spark, n, options, where=True)
    measure.wait_idle(spark)
    r["stage_floor"] = measure.stage_floor(spark, n)
    measure.wait_idle(spark)
    r["stage_barrier"] = measure.stage_floor(spark, n, barrier_call=True)
    return r


def teardown_floor(n: int) -> float:

    measure.wait_idle(_spark())
    return measure.teardown_floor(_spark(), n)


def handoff_begin(n_workers: int) -> dict:
    """A Dask cluster for the hand-off, warmed up (the executors' Python workers, the
    worker plugin); where its workers run."""
    import spark_dask

    spark = _spark()
    client = spark_dask.start(spark, n_workers=n_workers, progress=False)
    _STATE["client"] = client
    spark_dask.to_spark(spark_dask.to_dask(spark.range(0, 1000, 1, 2))).count()
    return {"workers": sorted(w["host"] for w in client.scheduler_info()["workers"].values())}


def handoff_plan(gb: float, tmp: str) -> list[tuple[str | None, str | None]]:
    """Make one size's steps (``handoff.steps``); their (direction, method)."""
    from benchmarks import handoff

    info, todo = handoff.steps(_spark(), _STATE["client"], gb, 0.0, tmp)
    _STATE["info"], _STATE["todo"] = info, todo
    return [(d, m) for d, m, _, _ in todo]


def handoff_step(i: int) -> dict | None:
    """Run step ``i`` of the plan: its measurement (None for a step with nothing timed)."""
    from benchmarks import handoff

    _, _, fn, after = _STATE["todo"][i]
    out = handoff.measure(fn, _spark(), _STATE["client"].cluster.tag) if fn is not None else None
    if after is not None:
        after()
    if i == len(_STATE["todo"]) - 1:
        _STATE.pop("todo")
        gc.collect()
    return out


def handoff_end() -> None:
    client = _STATE.pop("client", None)
    if client is not None:
        with contextlib.redirect_stdout(io.StringIO()):
            client.close()  # spark_dask.start's client: closes its cluster too


# ------------------------------------------------------------------ on the hosts
FLOOR_SCHEDULER = """
import asyncio, logging, sys, time
logging.getLogger("distributed").setLevel(logging.WARNING)
from distributed import Scheduler
ip, n = sys.argv[1], int(sys.argv[2])
async def main():
    loop = asyncio.get_running_loop()
    async with Scheduler(host=ip, port=0, dashboard=False) as s:
        print(s.address, flush=True)
        t0 = float(await loop.run_in_executor(None, sys.stdin.readline))
        while len(s.workers) < n:
            await asyncio.sleep(0.005)
        print(time.monotonic() - t0, flush=True)
        await loop.run_in_executor(None, sys.stdin.readline)
asyncio.run(main())
"""

LINK_RECEIVER = """
import socket, sys, time
s = socket.create_server((sys.argv[1], 0))
print(s.getsockname()[1], flush=True)
c, _ = s.accept()
got, t0 = 0, None
while True:
    b = c.recv(1 << 20)
    if t0 is None:
        t0 = time.monotonic()
    if not b:
        break
    got += len(b)
print(got, time.monotonic() - t0, flush=True)
"""

LINK_SENDER = """
import socket, sys
c = socket.create_connection((sys.argv[1], int(sys.argv[2])))
chunk = b"x" * (1 << 20)
for _ in range(int(sys.argv[3])):
    c.sendall(chunk)
c.close()
"""


def worker_floor(h, n: int) -> float:
    """N bare ``dask worker`` processes on the worker hosts (round robin), started at
    once, to registration with a bare scheduler on ``driver``."""
    from tests.support.hosts import DRIVER

    sched = h.exec(DRIVER, [sys.executable, "-c", FLOOR_SCHEDULER, h.hosts[DRIVER].ip, str(n)],
                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                   start_new_session=True)  # fmt: skip
    procs = []
    try:
        address = sched.stdout.readline().strip()
        if not address:
            raise RuntimeError("the floor's scheduler did not start")
        cmd = [sys.executable, "-m", "distributed.cli.dask_worker", address, "--nthreads", "1", "--no-dashboard",
               "--nanny"]  # fmt: skip
        t0 = time.monotonic()
        for i in range(n):
            host = h.workers[i % len(h.workers)].name
            procs.append(h.exec(host, cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True))  # fmt: skip
        sched.stdin.write(f"{t0}\n")
        sched.stdin.flush()
        return float(sched.stdout.readline())
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
        with contextlib.suppress(OSError):
            sched.stdin.write("\n")
            sched.stdin.flush()
        try:
            sched.wait(30)
        except subprocess.TimeoutExpired:
            sched.kill()


def link_check(h, mb: int = 1024) -> dict:
    """A plain TCP stream of ``mb`` MiB from worker-1 to worker-2 (Python sockets): what
    the link itself carries, bare or shaped."""
    a, b = h.workers[0], h.workers[-1]
    recv = h.exec(b.name, [sys.executable, "-c", LINK_RECEIVER, b.ip], stdin=subprocess.DEVNULL,
                  stdout=subprocess.PIPE, text=True, start_new_session=True)  # fmt: skip
    try:
        port = recv.stdout.readline().strip()
        h.run(a.name, [sys.executable, "-c", LINK_SENDER, b.ip, port, str(mb)], timeout=120)
        got, seconds = recv.stdout.readline().split()
        recv.wait(30)
    finally:
        if recv.poll() is None:
            recv.kill()
    return {"bytes": int(got), "seconds": float(seconds), "gbit_per_s": int(got) * 8 / float(seconds) / 1e9}


def sent_bytes(h) -> dict[str, int]:
    """Bytes each host has sent on its link (its veth's root-namespace end received)."""
    out = {}
    for host in h.hosts.values():
        with open(f"/sys/class/net/{host.veth}/statistics/rx_bytes") as f:
            out[host.name] = int(f.read())
    return out


def shape(h, spec: str | None) -> None:
    for name in h.hosts:
        h.set_netem(name, spec)


# ------------------------------------------------------------------ the run
def bench(master: str, reps: int, options: dict, quick: bool, handoff: bool, t_all: float) -> dict:
    """Every measurement on ``hosts:WxC``: the entry ``run.py`` renders, with its own
    worker floors, cold starts per N and (unless ``handoff`` is false) the hand-off."""
    from tests.support import hosts as hostlib

    workers, cores = parse(master)
    why = hostlib.unavailable()
    if why:
        raise SystemExit(f"{master}: {why}")

    def note(what):
        print(f"{master}: {what} ({time.perf_counter() - t_all:.0f}s)", file=sys.stderr)

    sizes = [n for n in ((2,) if quick else SIZES) if n <= workers * cores]
    call = {"timeout": 600}
    R: dict = {"master": master, "hosts": {"workers": workers, "cores": cores}, "ray": None}
    h = hostlib.Hosts.up(workers=workers, cores=cores)
    try:
        R["hosts"].update({name: host.ip for name, host in h.hosts.items()}, shared=h.shared_dir)
        note(f"hosts up ({h.prefix})")
        R["worker_floor"] = {str(n): [worker_floor(h, n) for _ in range(reps)] for n in sizes}
        note("worker floors done")

        # Cold: the first cluster (or the first empty stage) of a fresh Spark application.
        colds = {
            str(n): {"n": n, "start_runs": [], "close_runs": [], "stage_floor_runs": [], "where": []} for n in sizes
        }
        for _ in range(reps):
            for n in sizes:
                d = h.driver()
                d.call(f"{__name__}:prepare")
                r = d.call(f"{__name__}:ours", n, options, **call)
                c = colds[str(n)]
                c["start_runs"].append(r["start"])
                c["close_runs"].append(r["close"])
                c["where"].append(r["where"])
                d = h.driver()
                d.call(f"{__name__}:prepare")
                c["stage_floor_runs"].append(d.call(f"{__name__}:stage", n, **call))
        R["colds"] = colds
        R["cold"] = colds["2"]
        note("cold done")

        # Warm: one application.
        d = h.driver()
        d.call(f"{__name__}:prepare")
        d.call(f"{__name__}:ours", 2, options, **call)
        d.call(f"{__name__}:stage", 2, **call)
        warm = {}
        for n in sizes:
            rounds = [d.call(f"{__name__}:warm_round", n, options, **call) for _ in range(reps)]
            close_floor = [d.call(f"{__name__}:teardown_floor", n, **call) for _ in range(reps)]
            stage = [r["stage_floor"] for r in rounds]
            stage_barrier = [r["stage_barrier"] for r in rounds]
            warm[n] = {
                **measure.warm_entry(rounds, stage, stage_barrier, close_floor),
                "where": [r["where"] for r in rounds],
            }
            note(f"warm n={n} done")
        R["warm"] = warm
        d.close()

        if handoff and not quick:
            try:
                R["handoff"] = handoff_part(h, reps, note)
            except Exception as e:  # noqa: BLE001  (report it, keep the start-up figures)
                R["handoff_error"] = f"{type(e).__name__}: {e}"[:2000]
                note(f"hand-off failed: {R['handoff_error'][:300]}")
    finally:
        h.down()
    note("hosts down")
    return R


def handoff_main(argv: list[str]) -> dict:
    """``python -m benchmarks handoff --master hosts:WxC [--reps N] [--connect] [--json PATH]``:
    only the hand-off across the hosts (:func:`handoff_part`; ``--connect``: through a
    Spark Connect session of the driver), its table printed."""
    from tests.support import hosts as hostlib

    ap = argparse.ArgumentParser(prog="python -m benchmarks handoff --master hosts:WxC")
    ap.add_argument("--master", required=True)
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--json", default=None)
    ap.add_argument("--connect", action="store_true", help="through a Spark Connect session (pyspark >= 4)")
    args = ap.parse_args(argv)
    workers, cores = parse(args.master) or (0, 0)
    why = "not a hosts:WxC master" if not workers else hostlib.unavailable()
    if why:
        raise SystemExit(f"{args.master}: {why}")
    t_all = time.perf_counter()

    def note(what):
        print(f"{args.master}: {what} ({time.perf_counter() - t_all:.0f}s)", file=sys.stderr)

    M: dict = {"master": args.master, "machine": machine_facts(), "hosts": {"workers": workers, "cores": cores},
               "connect": args.connect}  # fmt: skip
    h = hostlib.Hosts.up(workers=workers, cores=cores)
    try:
        M["hosts"].update({name: host.ip for name, host in h.hosts.items()}, shared=h.shared_dir)
        M["handoff"] = handoff_part(h, args.reps, note, connect=args.connect)
    finally:
        h.down()
    M["total_seconds"] = time.perf_counter() - t_all
    if args.json:
        with open(args.json, "w") as f:
            json.dump(M, f, indent=2, default=str)
    m = M["machine"]
    print(f"{m['cpus']} CPUs, {m['memory_gib']} GiB, Python {m['python']}, pyspark {m['pyspark']}, distributed "
          f"{m['distributed']}; {args.reps} run(s), {M['total_seconds']:.0f} s")  # fmt: skip
    print("\n".join(render_handoff(M)))
    return M


def handoff_part(h, reps: int, note, connect: bool = False) -> dict:
    """The hand-off at HANDOFF_GB on the bare and the shaped link, runs interleaved (the
    order alternates per round), in one application, each run on a fresh Dask cluster:
    with a Dask worker on every worker host (spark-dask's hand-off keeps each partition
    on its host), then with one worker (the other hosts' partitions cross the network to
    it). ``connect``: every step through a Spark Connect session of the driver
    (:func:`connect_session`)."""
    out: dict = {"gb": HANDOFF_GB, "shape": SHAPE, "reps": reps, "links": {}, "configs": {}, "connect": connect}
    for label, spec in (("bare", None), ("shaped", SHAPE)):
        shape(h, spec)
        out["links"][label] = link_check(h)
    shape(h, None)
    note(f"link check done: {json.dumps({k: round(v['gbit_per_s'], 2) for k, v in out['links'].items()})}")
    conf = dict(HANDOFF_CONF)
    if connect:
        from distributed.utils import open_port

        port = open_port("127.0.0.1")  # free here; the driver host's network namespace is new
        conf.update({"spark.plugins": "org.apache.spark.sql.connect.SparkConnectPlugin",
                     "spark.connect.grpc.binding.port": str(port)})  # fmt: skip
    d = h.driver(**conf)
    try:
        d.call(f"{__name__}:prepare")
        if connect:
            note(f"Spark Connect session: Spark {d.call(f'{__name__}:connect_session', port, timeout=120)}")
        for n_workers in (len(h.workers), 1):
            conf = out["configs"][str(n_workers)] = {"runs": {"bare": [], "shaped": []}}
            for i in range(reps):
                order = (("bare", None), ("shaped", SHAPE)) if i % 2 == 0 else (("shaped", SHAPE), ("bare", None))
                for label, spec in order:
                    # a fresh Dask cluster each run: to_spark's files stay on the hosts' local
                    # disks (4 GB tmpfs each) until the cluster closes (docs/handoff.md)
                    conf["cluster"] = d.call(f"{__name__}:handoff_begin", n_workers, timeout=300)
                    shape(h, spec)
                    try:
                        conf["runs"][label].append(handoff_once(h, d))
                    finally:
                        shape(h, None)
                        d.call(f"{__name__}:handoff_end", timeout=120)
                    note(f"hand-off, {n_workers} worker(s), {label} link, run {i + 1} done")
    finally:
        d.close()
    return out


def handoff_once(h, d) -> dict:
    """One size's steps, one call each, with the bytes each host sent meanwhile."""
    plan = d.call(f"{__name__}:handoff_plan", HANDOFF_GB, h.shared_dir, timeout=120)
    res: dict = {"to_dask": {}, "to_spark": {}}
    for j, (direction, method) in enumerate(plan):
        before = sent_bytes(h)
        m = d.call(f"{__name__}:handoff_step", j, timeout=900)
        after = sent_bytes(h)
        if m is not None:
            m["sent_mb"] = {k: (after[k] - before[k]) / 2**20 for k in after}
            m["gb_per_s"] = HANDOFF_GB / m["seconds"]
            res[direction][method] = m
    return res


# ------------------------------------------------------------------ tables, plot
NAMES = {"spark_only": "(floor: Spark computes the data, noop write)", "spark_dask": "spark-dask",
         "arrow_floor": "(conversion floor: the JVM's Arrow batches, counted in the JVM)",
         "spark_dask_rescan": "spark-dask, its second scan", "spark_dask_kept": "spark-dask, checkpoint=True",
         "parquet": "Parquet (shared directory)"}  # fmt: skip


def _spread(xs, fmt="{:.2f}") -> str:

    return f"{fmt.format(measure.median(xs))} ({fmt.format(min(xs))}-{fmt.format(max(xs))})" if xs else "-"


def render(M: dict) -> str:
    """The multi-host master's own lines: hosts, where the workers ran, the worker
    floors, the link check and the hand-off table."""

    H = M["hosts"]
    names = {v: k for k, v in H.items() if isinstance(v, str) and k not in ("shared",)}
    lines = [f"{M['master']}: hosts " + ", ".join(f"{k} {v}" for k, v in H.items() if k.startswith(("driver", "worker-")))
             + f"; shared directory {H.get('shared')}"]  # fmt: skip
    where = []
    for kind, entries in (("cold", M.get("colds", {})), ("warm", M["warm"])):
        for n, e in entries.items():
            seen = sorted({", ".join(names.get(ip, ip) for ip in w) for w in e.get("where", []) if w})
            where.append(f"{kind} N={n}: " + " | ".join(seen))
    lines += ["", f"{M['master']}: the workers' hosts in each run: " + "; ".join(where)]
    floors = ", ".join(f"N={n} {_spread(v)} s" for n, v in M["worker_floor"].items())
    lines += ["", (f"{M['master']}: worker floor across hosts (bare dask workers on the worker hosts, round robin, a "
                   f"bare scheduler on driver): {floors}")]  # fmt: skip
    return "\n".join(lines + render_handoff(M))


def render_handoff(M: dict) -> list[str]:
    """The hand-off's lines of a multi-host run: the link check and a table per Dask
    cluster size (empty without a hand-off)."""
    names = {v: k for k, v in M["hosts"].items() if isinstance(v, str) and k not in ("shared",)}
    ho = M.get("handoff")
    lines = []
    if M.get("handoff_error"):
        lines += ["", f"{M['master']}: the hand-off failed: {M['handoff_error'][:500]}"]
    if not ho:
        return lines
    links = ho["links"]
    lines += ["", (f"{M['master']}: link check (one TCP stream worker-1 → worker-2, Python sockets, 1 GiB): bare "
                   f"{links['bare']['gbit_per_s']:.1f} Gbit/s, shaped ({ho['shape']} on every host's eth0) "
                   f"{links['shaped']['gbit_per_s']:.1f} Gbit/s")]  # fmt: skip
    for n_workers, conf in ho["configs"].items():
        w = ", ".join(names.get(ip, ip) for ip in conf.get("cluster", {}).get("workers", []))
        lines += [
            "",
            (
                f"hand-off at {ho['gb']:g} GB on {M['master']}{' through Spark Connect' if ho.get('connect') else ''}, "
                f"{n_workers} Dask worker(s): on {w}; seconds, median "
                f"(min-max) of {ho['reps']} runs, bare and shaped runs interleaved"
            ),
            "",
            "| direction | method | link | s | GB/s | vs Parquet | MB sent across hosts | driver JVM MB | Dask workers MB |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        lines += _rows(ho["gb"], conf["runs"])
    return lines


def _rows(gb: float, runs_by_link: dict) -> list[str]:

    lines = []
    for direction, label in (("to_dask", "Spark → Dask"), ("to_spark", "Dask → Spark")):
        for method in runs_by_link["bare"][0][direction]:
            for link in ("bare", "shaped"):
                runs = [r[direction][method] for r in runs_by_link[link] if method in r[direction]]
                base = measure.median([r[direction]["parquet"]["seconds"] for r in runs_by_link[link]])
                s = [r["seconds"] for r in runs]
                sent = [sum(r["sent_mb"].values()) for r in runs]
                lines.append(
                    f"| {label} | {NAMES.get(method, method)} | {link} | {_spread(s)} | {gb / measure.median(s):.3f} | "
                    f"{base / measure.median(s):.2f}× | {measure.median(sent):.0f} | {measure.median([r['driver_jvm_mb'] for r in runs]):.0f} | "
                    f"{measure.median([r['workers_mb'] for r in runs]):.0f} |"
                )
    return lines
