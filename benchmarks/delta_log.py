"""Replaying a large Delta log on the driver: spark_dask's replay (``read_delta``'s
snapshot) against Spark's own snapshot of the same table.

    python -m benchmarks delta-log [--commits 10000] [--files 100000] [--reps 3] [--path DIR]
                                   [--json PATH]

The tables, made cheaply (no data file is written: neither replay reads one): ``--commits``
JSON commits written here as Delta's protocol (PROTOCOL.md) has them, each adding
``files / commits + 1`` files with statistics and removing one file of an earlier commit,
so ``--files`` files are live at the end; ``json`` has no checkpoint (every commit is
replayed), ``checkpoint`` the same commits and a classic checkpoint (Parquet, written with
pyarrow, ``_last_checkpoint`` beside it) 5 commits before the end, as a table with Delta's
default ``checkpointInterval`` of 10 has. Spark must agree: its snapshot's file count
and size (``DESCRIBE DETAIL``) equal the replay's, or the run fails.

Each method ``--reps`` times, interleaved, after one untimed run of each on the
``checkpoint`` table (the JVM's and the imports' first run), each from a cold cache:

- ``spark_dask``: ``log.list_log`` + ``log.replay`` of the latest version in a fresh
  Python process (pyarrow and fsspec imported first); its time, and its peak RSS above
  the peak after those imports (``VmHWM``);
- Spark: ``DESCRIBE DETAIL`` after ``DeltaLog.clearCache()`` (the snapshot built from
  the log: Delta 3.3.2 on ``local-cluster[2,1,2048]``, its default
  ``spark.databricks.delta.snapshotPartitions``), and the driver JVM's RSS growth.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from benchmarks.machine import machine_facts

SCHEMA = {
    "type": "struct",
    "fields": [
        {"name": "id", "type": "long", "nullable": True, "metadata": {}},
        {"name": "k", "type": "integer", "nullable": True, "metadata": {}},
    ],
}
ROWS_PER_FILE = 1000
TIMEOUT = 900


# ------------------------------------------------------------------------------ the tables
def add_action(n: int, ms: int) -> dict:
    """The ``add`` of data file ``n`` (statistics as Spark writes them)."""
    lo = n * ROWS_PER_FILE
    stats = {"numRecords": ROWS_PER_FILE, "minValues": {"id": lo, "k": 0},
             "maxValues": {"id": lo + ROWS_PER_FILE - 1, "k": 99}, "nullCount": {"id": 0, "k": 0}}  # fmt: skip
    return {"path": f"part-{n:08d}-{uuid.UUID(int=n)}.c000.snappy.parquet", "partitionValues": {},
            "size": 8000 + n % 1000, "modificationTime": ms, "dataChange": True, "stats": json.dumps(stats)}  # fmt: skip


def commits(n_commits: int, n_files: int, t0: int):
    """Each commit's actions: version 0 the protocol and metadata; each adds
    ``n_files // n_commits + 1`` files and (from version 1) removes one file of an earlier
    commit; the file numbers added run on."""
    per = n_files // n_commits
    added, removed = 0, 0
    for v in range(n_commits):
        ms = t0 + v * 1000
        actions = [{"commitInfo": {"timestamp": ms, "operation": "WRITE", "engineInfo": "benchmarks/delta_log.py"}}]
        if v == 0:
            actions.append({"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}})
            actions.append({"metaData": {"id": str(uuid.UUID(int=0)), "format": {"provider": "parquet", "options": {}},
                            "schemaString": json.dumps(SCHEMA), "partitionColumns": [], "configuration": {},
                            "createdTime": t0}})  # fmt: skip
        extra = 1 if v > 0 else 0
        for _ in range(per + extra):
            actions.append({"add": add_action(added, ms)})
            added += 1
        if v > 0:
            victim = add_action(removed * 7 % (added - per - 1), ms)["path"]  # a file of an earlier commit
            actions.append({"remove": {"path": victim, "deletionTimestamp": ms, "dataChange": True}})
            removed += 1
        yield v, actions


def write_table(path: str, n_commits: int, n_files: int, checkpoint: int | None) -> dict:
    """The table at ``path``: the commits, and a checkpoint of ``checkpoint`` if given."""
    shutil.rmtree(path, ignore_errors=True)
    log_dir = os.path.join(path, "_delta_log")
    os.makedirs(log_dir)
    state: dict[str, dict] = {}
    protocol = metadata = None
    t0 = int(time.time() * 1000) - n_commits * 1000
    for v, actions in commits(n_commits, n_files, t0):
        with open(os.path.join(log_dir, f"{v:020d}.json"), "w") as f:
            f.write("\n".join(json.dumps(a) for a in actions) + "\n")
        for a in actions:
            if "add" in a:
                state[a["add"]["path"]] = a["add"]
            elif "remove" in a:
                state.pop(a["remove"]["path"], None)
            protocol = a.get("protocol", protocol)
            metadata = a.get("metaData", metadata)
        if v == checkpoint:
            write_checkpoint(log_dir, v, protocol, metadata, list(state.values()))
    return {"live_files": len(state), "bytes": sum(a["size"] for a in state.values())}


def write_checkpoint(log_dir: str, version: int, protocol: dict, metadata: dict, adds: list[dict]) -> None:
    """A classic single-file checkpoint (one action per row) and ``_last_checkpoint``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    strings = pa.map_(pa.string(), pa.string())
    add_type = pa.struct([("path", pa.string()), ("partitionValues", strings), ("size", pa.int64()),
                          ("modificationTime", pa.int64()), ("dataChange", pa.bool_()), ("stats", pa.string())])  # fmt: skip
    meta_type = pa.struct([("id", pa.string()), ("format", pa.struct([("provider", pa.string()), ("options", strings)])),
                           ("schemaString", pa.string()), ("partitionColumns", pa.list_(pa.string())),
                           ("configuration", strings), ("createdTime", pa.int64())])  # fmt: skip
    proto_type = pa.struct([("minReaderVersion", pa.int32()), ("minWriterVersion", pa.int32())])

    def maps(d: dict) -> list:
        return list(d.items())

    meta = {**metadata, "configuration": maps(metadata["configuration"]),
            "format": {**metadata["format"], "options": maps(metadata["format"]["options"])}}  # fmt: skip
    rows = [{"protocol": protocol}, {"metaData": meta}]
    rows += [{"add": {**a, "partitionValues": maps(a["partitionValues"])}} for a in adds]
    schema = pa.schema([("protocol", proto_type), ("metaData", meta_type), ("add", add_type)])
    table = pa.Table.from_pylist(rows, schema=schema)
    pq.write_table(table, os.path.join(log_dir, f"{version:020d}.checkpoint.parquet"), row_group_size=50_000)
    with open(os.path.join(log_dir, "_last_checkpoint"), "w") as f:
        json.dump({"version": version, "size": len(rows)}, f)


# ------------------------------------------------------------------------------ the replays
def replay_child(path: str) -> dict:
    """spark_dask's snapshot of the latest version, in this (fresh) process."""
    import fsspec
    import pyarrow.parquet  # noqa: F401 - imported before the baseline, as a driver has it

    from spark_dask.delta import log

    def rss_peak() -> int:
        """This process's peak RSS (``VmHWM``: ``getrusage``'s ``ru_maxrss`` would carry the
        parent's peak over from the fork)."""
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))

    fs = fsspec.filesystem("file")
    base = rss_peak()
    t0 = time.perf_counter()
    listing = log.list_log(fs, path)
    snapshot = log.replay(fs, path, log.latest_version(listing), listing)
    seconds = time.perf_counter() - t0
    return {"seconds": seconds, "files": len(snapshot.files), "bytes": sum(f["size"] for f in snapshot.files),
            "growth_mb": (rss_peak() - base) / 2**20, "peak_mb": rss_peak() / 2**20}  # fmt: skip


def run_replay(path: str) -> dict:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    cmd = [sys.executable, "-m", "benchmarks.delta_log", "--replay-child", path]
    done = subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=TIMEOUT, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"replay child failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def spark_snapshot(spark, path: str, driver) -> dict:
    """Spark's snapshot from a cold cache: ``DESCRIBE DETAIL``'s file count and size."""
    spark.sparkContext._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()
    before = driver.memory_info().rss
    t0 = time.perf_counter()
    row = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").select("numFiles", "sizeInBytes").collect()[0]
    seconds = time.perf_counter() - t0
    return {"seconds": seconds, "files": int(row.numFiles), "bytes": int(row.sizeInBytes),
            "growth_mb": (driver.memory_info().rss - before) / 2**20}  # fmt: skip


# ------------------------------------------------------------------------------ main
def bench(args, base: str) -> dict:
    import psutil
    from pyspark import SparkContext

    from benchmarks.delta import new_session, stop_session

    R: dict = {"commits": args.commits, "files": args.files, "reps": args.reps, "tables": {}, "runs": {}}
    checkpoint = (args.commits - 5) // 10 * 10
    for name, cp in (("json", None), ("checkpoint", checkpoint)):
        path = os.path.join(base, name)
        t0 = time.perf_counter()
        R["tables"][name] = {**write_table(path, args.commits, args.files, cp), "path": path, "checkpoint": cp,
                             "write_seconds": time.perf_counter() - t0}  # fmt: skip
        print(f"table {name} written in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    spark = new_session("local-cluster[2,1,2048]")
    try:
        driver = psutil.Process(SparkContext._gateway.proc.pid)
        warm = R["tables"]["checkpoint"]["path"]  # untimed: the JVM's and the imports' first run
        run_replay(warm)
        spark_snapshot(spark, warm, driver)
        for name, table in R["tables"].items():
            runs = R["runs"][name] = {"spark_dask": [], "spark": []}
            for r in range(args.reps):
                runs["spark_dask"].append(run_replay(table["path"]))
                runs["spark"].append(spark_snapshot(spark, table["path"], driver))
                print(f"{name} round {r + 1}: spark_dask {runs['spark_dask'][-1]['seconds']:.2f} s, "
                      f"Spark {runs['spark'][-1]['seconds']:.2f} s", file=sys.stderr)  # fmt: skip
    finally:
        stop_session(spark)
    return R


def agree(R: dict) -> list[str]:
    """What differs between each run's snapshot and the table as written."""
    bad = []
    for name, runs in R["runs"].items():
        want = R["tables"][name]
        for method, rs in runs.items():
            for r in rs:
                if (r["files"], r["bytes"]) != (want["live_files"], want["bytes"]):
                    bad.append(f"{name} {method}: {r['files']} files {r['bytes']} bytes, written {want['live_files']} "
                               f"files {want['bytes']} bytes")  # fmt: skip
    return bad


def render(R: dict) -> str:
    med = statistics.median
    m = R["machine"]
    lines = [
        f"machine: {m['cpus']} CPUs, {m['memory_gib']} GiB, Python {m['python']}, pyspark {m['pyspark']}; "
        f"median (min-max) of {R['reps']} cold runs each; {R['commits']:,} commits, {R['files']:,} live files",
        "",
        "| log | method | s | × Spark | driver memory growth MB | files |",
        "|---|---|---|---|---|---|",
    ]
    for name, runs in R["runs"].items():
        spark_s = med(r["seconds"] for r in runs["spark"])
        for method, label in (("spark_dask", "spark_dask replay (driver Python)"), ("spark", "Spark DESCRIBE DETAIL")):
            rs = runs[method]
            secs = [r["seconds"] for r in rs]
            lines.append(
                f"| {name} | {label} | {med(secs):.2f} ({min(secs):.2f}-{max(secs):.2f}) | "
                f"{med(secs) / spark_s:.3g}× | {med(r['growth_mb'] for r in rs):.0f} | {rs[0]['files']:,} |"
            )
    lines += ["", f"snapshots agree with the table as written: {'yes' if not R['bad'] else '; '.join(R['bad'])}",
              f"total benchmark time: {R['total_seconds']:.0f} s"]  # fmt: skip
    return "\n".join(lines)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(prog="python -m benchmarks delta-log", description=__doc__.split("\n\n")[0])
    ap.add_argument("--commits", type=int, default=10_000)
    ap.add_argument("--files", type=int, default=100_000, help="live files at the end")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--path", default=None, help="write the tables here (default: a temporary directory)")
    ap.add_argument("--json", default=os.path.join(os.path.dirname(__file__), "results", "delta-log.json"))
    args = ap.parse_args(argv)
    base = os.path.abspath(args.path) if args.path else tempfile.mkdtemp(prefix="spark-dask-bench-delta-log-")
    t0 = time.perf_counter()
    try:
        R = bench(args, base)
    finally:
        if not args.path:
            shutil.rmtree(base, ignore_errors=True)
    R.update(machine=machine_facts(), total_seconds=time.perf_counter() - t0)
    R["bad"] = agree(R)
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(R, f, indent=2)
    print(render(R))
    if R["bad"]:
        raise SystemExit(1)
    return R


if __name__ == "__main__":
    if sys.argv[1:2] == ["--replay-child"]:
        print(json.dumps(replay_child(sys.argv[2])))
    else:
        main()
