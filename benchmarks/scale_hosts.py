"""The lost-host part of ``python -m benchmarks scale`` (``benchmarks/scale.py``): on the
multi-host bed (``tests/support/hosts.py``: network namespaces on this machine, root), W
worker hosts of 2 cores and 2 stand-in GPUs each, a spark-dask cluster with a worker per
GPU (2W workers), once as one barrier stage (``barrier=True``, the default) and once as a
Spark job per worker (``barrier=False``), on the same bed. One worker host is killed
(every process at once, a lost machine) and a fresh one started in its place
(``Hosts.replace_host``: a new holder, an empty disk, its Spark Worker). Measured from
the kill, on the driver (the same monotonic clock, one machine): when Spark has all W
executors again, and when the Dask cluster has its 2W workers again, none of the lost
host's old ones among them; beside them, the warm start-up of the same 2W workers on the
same bed just before (a barrier gang that lost a host starts all its workers again,
Spark's barrier semantics; without barrier only the lost host's). The hosts are removed
at the end, also on failure.
"""

from __future__ import annotations

import contextlib
import io
import threading
import time

CORES = 2  # per worker host, and as many stand-in GPUs
GPU_CONF = {"spark.executor.resource.gpu.amount": str(CORES), "spark.task.resource.gpu.amount": "1",
            "spark.executor.memory": "512m"}  # fmt: skip
VICTIM = "worker-1"
_STATE: dict = {}


# ------------------------------------------------------------------ in the driver service
def start(n: int, victim_ip: str, barrier: bool = True) -> dict:
    """A cluster of ``n`` workers; the addresses of its workers on the victim host."""
    import logging
    import warnings

    from spark_dask import SparkCluster
    from tests.support.hosts import session

    warnings.filterwarnings("ignore")
    logging.getLogger("distributed").setLevel(logging.ERROR)
    close()  # the warm-up's cluster
    t0 = time.perf_counter()
    cluster = SparkCluster(session(), n_workers=n, worker="cpu", progress=False, quiet=True, barrier=barrier)
    took = time.perf_counter() - t0
    _STATE["cluster"] = cluster
    old = [a for a, w in cluster.scheduler.workers.items() if w.host == victim_ip]
    return {"workers": len(cluster.scheduler.workers), "old": old, "start_s": took}


def close() -> None:
    """Close the cluster of :func:`start`, if any."""
    cluster = _STATE.pop("cluster", None)
    if cluster is not None:
        with contextlib.redirect_stdout(io.StringIO()):
            cluster.close()


def watch(n: int, executors: int, old: list[str], timeout: float) -> None:
    """From now (the kill follows), in a thread: when Spark lost an executor and had
    ``executors`` again, when the cluster lost a worker and had ``n`` again, none of ``old``."""
    from tests.support.hosts import session

    sc = session().sparkContext
    cluster = _STATE["cluster"]
    seen: dict = {}
    _STATE["seen"] = seen

    def run():
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not {"spark_back", "dask_back"} <= set(seen):
            now = time.monotonic()
            ex = sc._jsc.sc().getExecutorIds().size()
            if ex < executors:
                seen.setdefault("spark_lost", now)
            elif "spark_lost" in seen:
                seen.setdefault("spark_back", now)
            workers = cluster.scheduler.workers
            running = sum(w.status.name == "running" for w in workers.values())
            if running < n:
                seen.setdefault("dask_lost", now)
            elif "dask_lost" in seen and not set(old) & set(workers):
                seen.setdefault("dask_back", now)
            time.sleep(0.05)

    _STATE["thread"] = threading.Thread(target=run, name="scale-watch", daemon=True)
    _STATE["thread"].start()


def watched(timeout: float) -> dict:
    """What :func:`watch` saw (monotonic times), after it ended (bounded); the cluster closed."""
    _STATE["thread"].join(timeout)
    close()
    return dict(_STATE["seen"])


# ------------------------------------------------------------------ the run
def one(workers: int, note, modes=(True, False)) -> dict:
    """One bed of ``workers`` worker hosts: for each barrier mode of ``modes`` in turn, a
    cluster of a worker per GPU, a host lost and replaced; ``{mode: seconds from the
    kill}`` (mode ``"barrier"`` or ``"isolated"``)."""
    from tests.support import hosts as hostlib

    n = workers * CORES
    gpus = {f"worker-{i}": [str(g) for g in range(CORES)] for i in range(1, workers + 1)}
    h = hostlib.Hosts.up(workers=workers, cores=CORES, memory="1g", gpus=gpus)
    runs = {}
    try:
        note(f"{workers} hosts up")
        d = h.driver(**GPU_CONF)
        d.call("benchmarks.measure:ship_by_value")
        for barrier in modes:
            victim = h.hosts[VICTIM].ip
            d.call(f"{__name__}:start", n, victim, barrier, timeout=300)  # warm-up: the Python workers
            started = d.call(f"{__name__}:start", n, victim, barrier, timeout=300)
            d.call(f"{__name__}:watch", n, workers, started["old"], 300)
            t_kill = time.monotonic()
            h.kill_host(VICTIM)
            t_replace = time.monotonic()
            h.replace_host(VICTIM)
            t_ready = time.monotonic()
            seen = d.call(f"{__name__}:watched", 320, timeout=360)
            out = {"workers": n, "barrier": barrier, "replace_s": t_ready - t_replace, "kill_s": t_replace - t_kill,
                   "start_s": started["start_s"]}  # fmt: skip
            for k, v in seen.items():
                out[f"{k}_s"] = v - t_kill
            runs["barrier" if barrier else "isolated"] = out
            note(f"lost host on {workers} hosts, barrier={barrier}: {out}")
        d.close()
    finally:
        h.down()
    return runs


def lost_host(sizes: list[int], note) -> dict:
    """:func:`one` for each number of worker hosts."""
    from tests.support import hosts as hostlib

    why = hostlib.unavailable()
    if why:
        return {"cores": CORES, "runs": {}, "error": why}
    runs = {}
    for w in sizes:
        try:
            for mode, out in one(w, note).items():
                runs[f"{w} {mode}"] = out
        except Exception as e:  # noqa: BLE001  (reported, the other figures kept)
            return {"cores": CORES, "runs": runs, "error": f"{w} hosts: {type(e).__name__}: {e}"[:1500]}
    return {"cores": CORES, "runs": runs}
