"""The driver's own work in ``to_dask`` / ``to_spark`` as the workers N and the
partitions P grow: what must not grow faster than the data.

    python -m benchmarks handoff-parts [--master local-cluster[4,4,1024]] [--workers 8]
                                       [--parts 32,128,512] [--rows 262144] [--json PATH]

A small table (``id`` and one ``rand()`` double, 16 bytes a row, 4 MB by default) in P
Spark partitions, on a cluster of N workers of one thread (``task_profile=False``: each
barrier task takes one core, the rest are the transfers'). Per direction and P, one call
each: the call's seconds, then the seconds until the data is in place (``to_dask``: every
partition loaded; ``to_spark``: a noop scan), and what the driver did for both:

- ``py4j``: py4j calls of the driver process (every thread) in both;
- ``graphs``: graphs the scheduler received (``update_graph``, a scheduler plugin; it
  handles ``to_dask``'s after the call returns), ``to_dask``'s with the one of the persist;
- ``spec_bytes``: the pickled size of the read tasks' specification (``to_spark``), which
  every read task unpickles;
- ``steps``: seconds in the hand-off's own steps (cProfile of the call's thread,
  cumulative): the slot check, the registry, the workers' hosts, the Spark job, the
  loading tasks' submission, the Dask writes, the read job's placement.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import sys
import tempfile
import time

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

# function name -> step name (the hand-off's functions; distributed's gather)
STEPS = {
    "_check_slots": "check_slots",
    "transfer_files": "registry",
    "_hosts": "hosts",
    "_collect": "spark_job",
    "_load": "submit_loads",
    "gather": "dask_write",
    "read_parts": "read_parts",
    "preferred_host_ids": "host_ids",
    "_read_job": "read_job",
}


class Counts:
    """py4j calls, graphs the scheduler received, the last read spec's pickled size."""

    def __init__(self):
        self.py4j = 0
        self.graphs = 0
        self.spec_bytes = None
        self.on = False

    def reset(self) -> None:
        self.py4j, self.graphs, self.spec_bytes, self.on = 0, 0, None, True


def count_py4j(counts: Counts) -> None:
    """Count every py4j call of this process into ``counts`` (while ``counts.on``)."""
    import py4j.clientserver
    import py4j.java_gateway

    for cls in (py4j.clientserver.ClientServerConnection, py4j.java_gateway.GatewayConnection):
        send = cls.send_command

        def counted(self, *args, _send=send, **kwargs):
            counts.py4j += counts.on
            return _send(self, *args, **kwargs)

        cls.send_command = counted


def count_graphs(scheduler, counts: Counts) -> None:
    """Count the graphs ``scheduler`` (in this process) receives into ``counts``."""
    from distributed.diagnostics.plugin import SchedulerPlugin

    class Graphs(SchedulerPlugin):
        name = "benchmark-graphs"

        def update_graph(self, scheduler, **kwargs):
            counts.graphs += counts.on

    scheduler.add_plugin(Graphs())


def size_specs(counts: Counts) -> None:
    """Record the pickled size of each ``to_spark`` read specification into ``counts``."""
    import cloudpickle

    from spark_dask.handoff import transfer

    reader = transfer.spark_reader

    def sized(spec):
        counts.spec_bytes = len(cloudpickle.dumps(spec))
        return reader(spec)

    transfer.spark_reader = sized


def steps(profile) -> dict:
    """Seconds (cumulative) of each of :data:`STEPS` in ``profile``."""
    out: dict = {}
    for (path, _line, name), (_cc, _nc, _tt, cumulative, _callers) in pstats.Stats(profile).stats.items():
        if name in STEPS and ("spark_dask" in path or name == "gather"):
            out[STEPS[name]] = round(out.get(STEPS[name], 0.0) + cumulative, 3)
    return out


def measured(fn, then, counts: Counts) -> dict:
    """``fn`` once under cProfile, then ``then(fn())`` (until the data is in place):
    their seconds, and the counts of both (the scheduler handles the graphs ``fn``
    sends after it returns) with the steps of ``fn``."""
    counts.reset()
    profile = cProfile.Profile()
    t0 = time.perf_counter()
    profile.enable()
    try:
        out = fn()
    finally:
        profile.disable()
    t1 = time.perf_counter()
    try:
        then(out)
    finally:
        counts.on = False
    return {"call_s": round(t1 - t0, 3), "then_s": round(time.perf_counter() - t1, 3), "py4j": counts.py4j,
            "graphs": counts.graphs, "spec_bytes": counts.spec_bytes, "steps": steps(profile)}  # fmt: skip


def run_parts(spark, n: int, p: int, rows: int, counts: Counts) -> list[dict]:
    """Both directions at ``p`` partitions: one record each."""
    from distributed import wait

    import spark_dask

    df = spark.range(0, rows, 1, p).selectExpr("id", "rand() as x")
    made = []
    figures = measured(lambda: spark_dask.to_dask(df), lambda ddf: made.append(ddf.persist()) or wait(made[0]), counts)
    out = [{"direction": "to_dask", "N": n, "P": p, **figures}]
    figures = measured(
        lambda: spark_dask.to_spark(made[0]), lambda sdf: sdf.write.format("noop").mode("overwrite").save(), counts
    )
    return [*out, {"direction": "to_spark", "N": n, "P": p, **figures}]


def session(master: str):
    """The tests' quiet, UI-less session (tests/support/spark.py), its local dirs apart."""
    from tests.support.spark import make_spark

    spark = make_spark(master, **{"spark.local.dir": tempfile.mkdtemp(prefix="spark-dask-handoff-parts-")})
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(prog="python -m benchmarks handoff-parts", description=__doc__.split("\n\n")[0])
    ap.add_argument("--master", default="local-cluster[4,4,1024]")
    ap.add_argument("--workers", type=int, default=8, help="Dask workers N (one core each)")
    ap.add_argument("--parts", default="32,128,512", help="partition counts P, comma-separated")
    ap.add_argument("--rows", type=int, default=262_144, help="rows of the table (16 bytes each)")
    ap.add_argument("--json", default=None, help="write the records there too")
    args = ap.parse_args(argv)

    import spark_dask

    counts = Counts()
    count_py4j(counts)
    size_specs(counts)
    spark = session(args.master)
    records = []
    try:
        with spark_dask.start(spark, n_workers=args.workers, threads_per_worker=1, memory_limit="512MiB",
                              progress=False, task_profile=False) as client:  # fmt: skip
            count_graphs(client.cluster.scheduler, counts)
            for p in (int(x) for x in args.parts.split(",")):
                for record in run_parts(spark, args.workers, p, args.rows, counts):
                    print(json.dumps(record), flush=True)
                    records.append(record)
    finally:
        spark.stop()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"load": os.getloadavg(), "master": args.master, "records": records}, f, indent=1)
    return records
