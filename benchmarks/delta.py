"""Reading a Delta Lake table with deletion vectors into memory: spark_dask.read_delta
against the alternatives.

    python -m benchmarks delta [--size-gb 1] [--dv-fraction 0.05] [--reps 3] [--path DIR] [--json PATH]
                               [--master local-cluster[2,3,2048]] [--workers 2] [--store local|s3]

The tables: Spark's Delta writer (Delta 3.3.2, ``tests/support/jars.py``'s ``delta-3.5``) writes
about ``--size-gb`` of Parquet (``id`` long, ``k`` int, ``x`` double, ``s`` a 32-character
string) in 40-100 files, with deletion vectors enabled; a ``DELETE`` of 1 % of the rows of
``--dv-fraction`` of the files then gives those files a deletion vector (``storageType
"u"``: one ``.bin`` file beside the data). The number of files with a deletion vector is
read back from ``_delta_log`` and printed. A copy of the rows left after the delete is
written again without deletion vectors, for dask-deltatable (which ignores them).
``--path DIR`` keeps both tables there and reuses them when their size and fraction match.

Each method, ``--reps`` times, interleaved (each round runs every method once), until a
summary of every row and column is in memory (the rows, sum of ``id`` and ``x``, distinct
``k``, characters of ``s``); the Dask methods hold the whole table in the workers'
memory first (``persist``), then compute the summary from it:

- ``read_delta`` (``via="files"``): spark_dask.read_delta on the spark-dask cluster, each
  data file a partition read on a Dask worker, its deletion vector applied;
- ``read_delta`` (``via="spark"``): Spark's Delta reader, the rows handed to the Dask
  workers by ``to_dask``;
- deltalake: ``QueryBuilder`` (DataFusion) ``select *`` in a process of its own, to
  pandas (``to_pandas()``: its strings become Python objects, the Dask methods' stay
  Arrow strings), then the summary;
- dask-deltatable: ``read_deltalake`` of the copy without deletion vectors, on the same
  Dask cluster.

Every method's summary must equal Spark's own (``spark.read.format("delta")``, untimed);
a mismatch fails the run (exit status 1). Memory, sampled every 50 ms: peak RSS of the
driver's Python process (deltalake: of its own process, from ``getrusage``), peak summed
RSS of the Dask worker processes, and how much the Spark JVMs (driver and executors)
grew. The ratios compare each method's median with ``via="files"``'s in the same run
(memory: driver Python + Dask workers, deltalake's one process).

``--store s3``: the table with deletion vectors is copied to an S3 API server (moto's,
``tests/support/s3.py``, on this machine) and read from there: ``via="files"`` through s3fs
on the Dask workers (``s3://``), ``via="spark"`` and Spark's own summary through
``s3a://`` (hadoop-aws, ``tests/support/jars.py``'s ``s3a-3.5``); deltalake and
dask-deltatable are not run then. The table is also registered by name
(``spark_catalog.bench.dv``) in Spark's catalog and in a stand-in for Unity Catalog's REST
API (``tests/support/unity_catalog.py``), which vends read credentials for it:
``read_delta(name)`` then reads the files on the workers with them (``unity``), and
``via="spark"`` reads the same name through Spark.

The cluster: ``local-cluster[2,3,2048]`` and a spark-dask cluster of 2 workers of 1
thread. Its gang's task profile takes 2 of each executor's 3 slots (one Dask worker per
executor), so each executor keeps a slot for Spark's reads and ``to_dask``: 2 Dask
threads and 2 Spark slots, as many as the machine this was written on has cores.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

import fsspec
import psutil

from benchmarks.machine import machine_facts
from benchmarks.measure import running
from spark_dask.delta import log
from spark_dask.delta.stores import redacted

MASTER = "local-cluster[2,3,2048]"
WORKERS = 2
BYTES_PER_ROW = 49  # Parquet bytes per row of COLUMNS as Spark writes them (measured)
COLUMNS = ["id", "CAST(pmod(hash(id), 100000) AS INT) AS k", "rand(7) AS x", "md5(CAST(id AS STRING)) AS s"]
SAMPLE_EVERY = 0.05
TIMEOUT = 900  # seconds, any one measurement
METHODS = {
    "files": 'read_delta(via="files")',
    "spark": 'read_delta(via="spark")',
    "unity": "read_delta(name), Unity Catalog vending",
    "deltalake": "deltalake QueryBuilder (one process)",
    "dask_deltatable": "dask-deltatable (copy without DVs)",
}


# ------------------------------------------------------------------------------ Spark
def delta_jars() -> list[str]:
    """Delta Lake's Spark jars (``tests/support/jars.py``'s ``delta-3.5``); exit when missing."""
    from tests.support.jars import paths

    jars = paths("delta-3.5")
    missing = [j for j in jars if not os.path.exists(j)]
    if missing:
        raise SystemExit(f"missing {', '.join(missing)}: python -m tests.support.jars fetch delta-3.5")
    return jars


def new_session(master: str, **confs):
    """A classic SparkSession on ``master`` with Delta Lake's connector (and ``confs``)."""
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(master)
        .appName("spark-dask-bench-delta")
        .config("spark.jars", ",".join(delta_jars()))
        .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "2g")
        .config("spark.executor.memory", "2g")
        .config("spark.executorEnv.PYSPARK_PYTHON", sys.executable)
    )
    for key, value in confs.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def stop_session(spark, timeout: float = 60) -> None:
    """Stop ``spark`` and its gateway JVM (which outlives ``spark.stop()`` otherwise)."""
    from pyspark import SparkContext

    spark.stop()
    gateway = SparkContext._gateway
    if gateway is None:
        return
    proc = getattr(gateway, "proc", None)
    gateway.shutdown()
    SparkContext._gateway = None
    SparkContext._jvm = None
    if proc is not None:
        proc.stdin.close()  # the gateway JVM exits on EOF
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout)


def jvm_pids() -> list[int]:
    """The driver JVM and its executor JVMs (its ``java`` descendants)."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    if gateway is None or getattr(gateway, "proc", None) is None:
        return []
    root = psutil.Process(gateway.proc.pid)
    kids = [p for p in root.children(recursive=True) if _name(p) == "java"]
    return [root.pid] + [p.pid for p in kids]


def _name(p: psutil.Process) -> str:
    try:
        return p.name()
    except psutil.Error:
        return ""


# ------------------------------------------------------------------------------ the tables
def file_count(gb: float) -> int:
    """40-100 data files of about 16 MB."""
    return max(40, min(100, round(gb * 1024 / 16)))


def write_tables(spark, base: str, gb: float, dv_fraction: float) -> dict:
    """The table with deletion vectors (``base/dv``) and the copy without (``base/nodv``)."""
    dv, nodv = os.path.join(base, "dv"), os.path.join(base, "nodv")
    for path in (dv, nodv):
        shutil.rmtree(path, ignore_errors=True)
    rows, files = int(gb * 2**30 / BYTES_PER_ROW), file_count(gb)
    touched = max(1, round(dv_fraction * files))
    schema = "id BIGINT, k INT, x DOUBLE, s STRING"
    spark.sql(
        f"CREATE TABLE delta.`{dv}` ({schema}) USING delta TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')"
    )
    # spark.range's partition i holds ids [i * rows // files, (i + 1) * rows // files): one file each
    spark.range(0, rows, 1, files).selectExpr(*COLUMNS).write.format("delta").mode("append").save(dv)
    spark.sql(f"DELETE FROM delta.`{dv}` WHERE id < {touched * rows // files} AND id % 100 = 0")
    spark.sql(
        f"CREATE TABLE delta.`{nodv}` ({schema}) USING delta TBLPROPERTIES ('delta.enableDeletionVectors' = 'false')"
    )
    spark.read.format("delta").load(dv).repartitionByRange(files, "id").write.format("delta").mode("append").save(nodv)
    return {"size_gb": gb, "dv_fraction": dv_fraction, "written_rows": rows, "dv": dv, "nodv": nodv}


def live_files(path: str) -> list[dict]:
    """The live files of the table's latest version (path, size, deletion vector), by
    spark_dask's log replay: it only describes the tables, each result is checked
    against Spark's own read."""
    fs = fsspec.filesystem("file")
    listing = log.list_log(fs, path)
    return log.replay(fs, path, log.latest_version(listing), listing).files


def describe(path: str) -> dict:
    """Files, bytes and deletion vectors (by storage type) of a table's latest version."""
    adds = live_files(path)
    types: dict[str, int] = {}
    for a in adds:
        if a.get("deletionVector"):
            t = a["deletionVector"]["storageType"]
            types[t] = types.get(t, 0) + 1
    deleted = sum(a["deletionVector"].get("cardinality", 0) for a in adds if a.get("deletionVector"))
    return {"files": len(adds), "bytes": sum(a["size"] for a in adds), "dv_files": sum(types.values()),
            "dv_types": types, "dv_rows": deleted}  # fmt: skip


def tables(spark, base: str, gb: float, dv_fraction: float) -> dict:
    """The two tables under ``base``: reused when ``base/tables.json`` says they have this
    size and fraction, else written; described from their logs."""
    meta = os.path.join(base, "tables.json")
    info = None
    if os.path.exists(meta):
        with open(meta) as f:
            info = json.load(f)
        if (info.get("size_gb"), info.get("dv_fraction")) != (gb, dv_fraction):
            info = None
    reused = info is not None
    if info is None:
        os.makedirs(base, exist_ok=True)
        t0 = time.perf_counter()
        info = write_tables(spark, base, gb, dv_fraction)
        info["write_seconds"] = time.perf_counter() - t0
        with open(meta, "w") as f:
            json.dump(info, f, indent=2)
    return {**info, "reused": reused, "dv_table": describe(info["dv"]), "nodv_table": describe(info["nodv"])}


# ------------------------------------------------------------------------------ the summary
SUMMARY = {
    "rows": lambda f: f.shape[0],
    "sum_id": lambda f: f.id.sum(),
    "sum_x": lambda f: f.x.sum(),
    "distinct_k": lambda f: f.k.nunique(),
    "s_chars": lambda f: f.s.str.len().sum(),
}


def plain(summary: dict) -> dict:
    """Numbers of any kind (numpy, pyarrow scalars) as Python ints and floats."""
    out = {}
    for k, v in summary.items():
        v = v.as_py() if hasattr(v, "as_py") else v
        out[k] = float(v) if k == "sum_x" else int(v)
    return out


def spark_summary(spark, path: str) -> dict:
    """What Spark's own Delta reader says the summary is."""
    row = (
        spark.read.format("delta").load(path)
        .selectExpr("count(*) AS rows", "sum(id) AS sum_id", "sum(x) AS sum_x",
                    "count(DISTINCT k) AS distinct_k", "sum(length(s)) AS s_chars")
        .collect()[0]
    )  # fmt: skip
    return plain(row.asDict())


def mismatch(got: dict, want: dict) -> str:
    """``""`` when ``got`` is ``want`` (``sum_x`` to a relative 1e-9), else what differs."""
    bad = []
    for k, v in want.items():
        same = abs(got[k] - v) <= 1e-9 * max(1.0, abs(v)) if k == "sum_x" else got[k] == v
        if not same:
            bad.append(f"{k} {got[k]} (Spark: {v})")
    return ", ".join(bad)


# ------------------------------------------------------------------------------ memory
class PeakRSS:
    """Peak summed RSS of groups of processes, sampled in a thread every ``every``
    seconds for at most ``limit`` seconds; ``base`` is the first sample."""

    def __init__(self, groups: dict[str, list[int]], every: float = SAMPLE_EVERY, limit: float = TIMEOUT + 60):
        self.procs = {g: [psutil.Process(p) for p in pids if psutil.pid_exists(p)] for g, pids in groups.items()}
        self.every, self.limit = every, limit
        self.base = self.sample()
        self.peak = dict(self.base)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-rss", daemon=True)

    def sample(self) -> dict[str, int]:
        out = {}
        for group, procs in self.procs.items():
            total = 0
            for p in procs:
                try:
                    total += p.memory_info().rss
                except psutil.Error:
                    pass
            out[group] = total
        return out

    def _run(self) -> None:
        deadline = time.monotonic() + self.limit
        while not self._stop.wait(self.every) and time.monotonic() < deadline:
            for group, rss in self.sample().items():
                self.peak[group] = max(self.peak[group], rss)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(10)

    def mb(self, group: str, growth: bool = False) -> float:
        return (self.peak[group] - (self.base[group] if growth else 0)) / 2**20


def trim_memory() -> int:
    """Give freed memory back to the system (Arrow's pool, glibc's heap), so that one
    method's leftovers do not count in the next one's peak."""
    gc.collect()
    if "pyarrow" in sys.modules:
        sys.modules["pyarrow"].default_memory_pool().release_unused()
    try:
        return ctypes.CDLL("libc.so.6").malloc_trim(0)
    except OSError:
        return 0


def held(dask_worker) -> int:
    """How many keys a Dask worker holds (run on each by ``client.run``)."""
    return len(dask_worker.data)


def settle(client, pids: list[int], timeout: float = 60) -> None:
    """Until no worker holds a key (a released result is freed asynchronously), every
    heap is trimmed and the workers' RSS stopped falling (Arrow's allocator gives pages
    back a second or two later)."""
    deadline = time.monotonic() + timeout
    while sum(client.run(held).values()) and time.monotonic() < deadline:
        time.sleep(0.1)
    client.run(trim_memory)
    trim_memory()
    workers = PeakRSS({"workers": pids})
    before = workers.sample()["workers"]
    while time.monotonic() < deadline:
        time.sleep(1)
        now = workers.sample()["workers"]
        if now > 0.99 * before:
            return
        before = now


# ------------------------------------------------------------------------------ the methods
def in_workers(client, ddf, timeout: float = TIMEOUT) -> tuple[dict, dict]:
    """Hold ``ddf`` in the Dask workers' memory (``persist``), then its summary;
    ``(summary, {"dtypes": ...})``."""
    from distributed import wait

    kept = client.persist(ddf)
    wait(kept, timeout=timeout)
    futures = client.compute([fn(kept) for fn in SUMMARY.values()])
    wait(futures, timeout=timeout)
    values = client.gather(futures)
    del kept, futures
    return plain(dict(zip(SUMMARY, values))), {"dtypes": {c: str(t) for c, t in ddf.dtypes.items()}}


def deltalake_child(path: str) -> dict:
    """deltalake's ``QueryBuilder`` ``select *`` to pandas, then the summary, in this
    process (run in a process of its own, so its peak RSS is the read's). DataFusion
    hands the strings over as ``string_view``, which pyarrow 17 turns into Python
    strings (``object``) only."""
    import pyarrow as pa
    from deltalake import DeltaTable, QueryBuilder

    def peak() -> int:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

    t0 = time.perf_counter()
    reader = QueryBuilder().register("t", DeltaTable(path)).execute("SELECT * FROM t")
    table = pa.RecordBatchReader.from_stream(reader).read_all()
    t_arrow, peak_arrow = time.perf_counter(), peak()
    frame = table.to_pandas()
    del table
    t_pandas = time.perf_counter()
    summary = plain({k: fn(frame) for k, fn in SUMMARY.items()})
    seconds = time.perf_counter() - t0
    dtypes = {c: str(t) for c, t in frame.dtypes.items()}
    steps = {"arrow_s": t_arrow - t0, "to_pandas_s": t_pandas - t_arrow, "summary_s": t0 + seconds - t_pandas,
             "arrow_peak_mb": peak_arrow / 2**20}  # fmt: skip
    return {"seconds": seconds, "summary": summary, "dtypes": dtypes, "steps": steps, "peak_rss": peak()}


def run_deltalake(path: str, timeout: float = TIMEOUT) -> dict:
    """:func:`deltalake_child` in a fresh Python process; its result."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    cmd = [sys.executable, "-m", "benchmarks.delta", "--deltalake-child", path]
    done = subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"deltalake child failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def methods(spark, client, info: dict) -> dict:
    """Method name -> a function that reads the table and returns ``(summary, extra)``;
    ``extra`` replaces measured figures (deltalake's own time and peak)."""
    from dask_deltatable import read_deltalake

    import spark_dask

    source, options = info.get("files_source", info["dv"]), info.get("storage_options")

    def files():
        ddf = spark_dask.read_delta(source, via="files", storage_options=options, spark=spark, client=client)
        return in_workers(client, ddf)

    def via_spark():
        source = info.get("name") or info.get("spark_source", info["dv"])
        ddf = spark_dask.read_delta(source, via="spark", spark=spark, client=client)
        return in_workers(client, ddf)

    def unity():
        ddf = spark_dask.read_delta(
            info["name"], catalog=info["catalog"], storage_options=info["endpoint_options"], spark=spark, client=client
        )
        return in_workers(client, ddf)

    def deltalake():
        out = run_deltalake(info["dv"])
        extra = {"own_seconds": out["seconds"], "driver_mb": out["peak_rss"] / 2**20, "workers_mb": None}
        return out["summary"], {**extra, "dtypes": out["dtypes"], "steps": out["steps"]}

    def dask_deltatable():
        return in_workers(client, read_deltalake(info["nodv"]))

    if "files_source" in info:  # on the S3 server: the read_delta paths only
        return {"files": files, "spark": via_spark, "unity": unity}
    return {"files": files, "spark": via_spark, "deltalake": deltalake, "dask_deltatable": dask_deltatable}


def warm_up(spark, client, info: dict) -> None:
    """Untimed: the executors' Python workers, the worker plugin, the first import of
    every reader on the workers."""
    from dask_deltatable import read_deltalake

    import spark_dask

    spark_dask.to_dask(spark.range(0, 1000, 1, 2), client=client).id.sum().compute()
    source, options = info.get("files_source", info["dv"]), info.get("storage_options")
    ddf = spark_dask.read_delta(source, via="files", columns=["k"], storage_options=options, spark=spark, client=client)
    ddf.k.sum().compute()
    if "files_source" not in info:
        read_deltalake(info["nodv"], columns=["k"]).k.sum().compute()


def measure(fn, groups: dict[str, list[int]]) -> dict:
    """One run of ``fn``: its time, peak RSS (driver, workers), JVM growth, summary."""
    with PeakRSS(groups) as peak:
        t0 = time.perf_counter()
        summary, extra = fn()
        seconds = time.perf_counter() - t0
    out = {"seconds": seconds, "driver_mb": peak.mb("driver"), "workers_mb": peak.mb("workers"),
           "jvms_growth_mb": peak.mb("jvms", growth=True), "summary": summary,
           "before_mb": {g: rss / 2**20 for g, rss in peak.base.items()}}  # fmt: skip
    return {**out, **extra}


def rounds(spark, client, info: dict, reps: int, t_all: float) -> dict:
    """``reps`` rounds of every method in turn; each on workers that hold nothing."""
    todo = methods(spark, client, info)
    groups = {"driver": [os.getpid()], "workers": sorted(client.run(os.getpid).values()), "jvms": jvm_pids()}
    runs: dict = {m: [] for m in todo}
    for r in range(reps):
        for name, fn in todo.items():
            settle(client, groups["workers"])
            runs[name].append(measure(fn, groups))
            print(f"round {r + 1}/{reps} {name}: {runs[name][-1]['seconds']:.1f} s ({time.perf_counter() - t_all:.0f}s)",
                  file=sys.stderr)  # fmt: skip
    return {"runs": runs, "pids": groups}


# ------------------------------------------------------------------------------ report
def spread(xs: list[float]) -> str:
    return f"{statistics.median(xs):.2f} ({min(xs):.2f}-{max(xs):.2f})"


def figures(runs: list[dict]) -> dict:
    """Medians of one method's runs; ``memory``: driver + workers (its Python processes)."""
    med = statistics.median
    workers = [r["workers_mb"] for r in runs if r["workers_mb"] is not None]
    return {
        "seconds": med([r["seconds"] for r in runs]),
        "driver_mb": med([r["driver_mb"] for r in runs]),
        "workers_mb": med(workers) if workers else None,
        "jvms_growth_mb": med([r["jvms_growth_mb"] for r in runs]),
        "memory_mb": med([r["driver_mb"] + (r["workers_mb"] or 0) for r in runs]),
    }


def checks(R: dict) -> dict[str, str]:
    """Per method: ``""`` when every run's summary is Spark's, else what differs."""
    out = {}
    for name, runs in R["runs"].items():
        bad = [m for m in (mismatch(r["summary"], R["expected"]) for r in runs) if m]
        out[name] = bad[0] if bad else ""
    return out


def render(R: dict) -> str:
    m, t = R["machine"], R["tables"]
    dv, nodv = t["dv_table"], t["nodv_table"]
    lines = [
        (
            f"machine: {m['cpus']} CPUs, {m['memory_gib']} GiB, {m['platform']}, Python {m['python']}, pyspark "
            f"{m['pyspark']}, distributed {m['distributed']}, deltalake {m['deltalake']}, dask-deltatable "
            f"{m['dask_deltatable']}; {R['master']}, {R['workers']} Dask workers x 1 thread beside Spark; median "
            f"(min-max) of {R['reps']} runs; load average before/after {R['load_before']}/{R['load_after']}"
        ),
        "",
        (
            f"table: {R['expected']['rows']:,} rows, {dv['files']} files, {dv['bytes'] / 2**30:.2f} GiB of Parquet, "
            f"{dv['dv_files']} files with a deletion vector ({', '.join(f'{n} {k}' for k, n in dv['dv_types'].items())}; "
            f"{dv['dv_rows']:,} rows deleted); copy without DVs: {nodv['files']} files, {nodv['bytes'] / 2**30:.2f} GiB"
        ),
        "",
        (
            "| method | s | time × files | driver Python peak RSS MB | Dask workers peak RSS MB | Spark JVMs growth MB "
            "| memory × files | rows | check |"
        ),
        "|---|---|---|---|---|---|---|---|---|",
    ]
    base = figures(R["runs"]["files"])
    for name, runs in R["runs"].items():
        f = figures(runs)
        wk = "-" if f["workers_mb"] is None else f"{f['workers_mb']:.0f}"
        check = R["checks"][name]
        lines.append(
            f"| {METHODS[name]} | {spread([r['seconds'] for r in runs])} | {f['seconds'] / base['seconds']:.2f}× | "
            f"{f['driver_mb']:.0f} | {wk} | {f['jvms_growth_mb']:.0f} | {f['memory_mb'] / base['memory_mb']:.2f}× | "
            f"{runs[0]['summary']['rows']:,} | {'ok' if not check else '**MISMATCH** ' + check} |"
        )
    before = [r["before_mb"] for runs in R["runs"].values() for r in runs]
    dl = R["runs"].get("deltalake")

    def step(key: str) -> float:
        return statistics.median(r["steps"][key] for r in dl)

    lines += [
        "",
        (
            "(memory = driver Python + Dask workers peaks; RSS before a run, median: driver Python "
            f"{statistics.median(b['driver'] for b in before):.0f} MB, Dask workers "
            f"{statistics.median(b['workers'] for b in before):.0f} MB)"
        ),
    ]
    if dl:
        lines += [
            "",
            (
                f"deltalake, in its own process, without its start-up: {spread([r['own_seconds'] for r in dl])} s; "
                f"medians: to Arrow {step('arrow_s'):.2f} s (peak RSS then {step('arrow_peak_mb'):.0f} MB), "
                f"to_pandas {step('to_pandas_s'):.2f} s, the summary {step('summary_s'):.2f} s"
            ),
        ]
    if R.get("store") == "s3":
        lines += ["", f"read from {t['files_source']} (files) and {t['spark_source']} (Spark), an S3 API server "
                      f"on this machine (moto), copied there in {t['copy_seconds']:.0f} s"]  # fmt: skip
    lines += [
        "",
        f"left running afterwards: {', '.join(R['left_running']) or 'nothing'}",
        "",
        f"total benchmark time: {R['total_seconds']:.0f} s",
    ]
    return "\n".join(lines)


def leftovers(pids: list[int], timeout: float = 30) -> list[str]:
    """What of this run still runs: its descendants and the recorded worker and JVM
    processes, after up to ``timeout`` seconds for them to exit."""
    deadline = time.monotonic() + timeout
    while True:
        alive = {p.pid: p for p in psutil.Process().children(recursive=True)}
        for pid in pids:
            if psutil.pid_exists(pid) and pid not in alive:
                alive[pid] = psutil.Process(pid)
        alive = {pid: p for pid, p in alive.items() if running(p)}
        if not alive or time.monotonic() > deadline:
            return [f"{pid} {_name(p)}" for pid, p in alive.items()]
        time.sleep(0.5)


# ------------------------------------------------------------------------------ main
def machine() -> dict:
    from importlib.metadata import version

    return machine_facts(deltalake=version("deltalake"), dask_deltatable=version("dask-deltatable"))


def bench(args, base: str, t_all: float) -> dict:
    """Tables, Spark's summary, then the rounds on a spark-dask cluster; Spark stopped."""
    import spark_dask
    from spark_dask.spark.shipping import ship_by_value

    ship_by_value(sys.modules[__name__])  # trim_memory runs on the workers
    R: dict = {"master": args.master, "workers": args.workers, "reps": args.reps, "store": args.store}
    server = s3_server() if args.store == "s3" else None
    catalog = None
    spark = new_session(args.master, **(s3a_confs(server) if server else {}))
    pids: list[int] = []
    try:
        R["tables"] = tables(spark, base, args.size_gb, args.dv_fraction)
        d = R["tables"]["dv_table"]
        print(f"tables {'reused' if R['tables']['reused'] else 'written'} in {base}: {d['files']} files, "
              f"{d['dv_files']} with a deletion vector {d['dv_types']} ({time.perf_counter() - t_all:.0f}s)", file=sys.stderr)  # fmt: skip
        if server is not None:
            R["tables"].update(copy_to_store(server, R["tables"]["dv"]))
            catalog = register(spark, server, R["tables"])
        R["expected"] = spark_summary(spark, R["tables"].get("spark_source", R["tables"]["dv"]))
        R["expected_nodv"] = spark_summary(spark, R["tables"]["nodv"])
        with spark_dask.start(
            spark, n_workers=args.workers, threads_per_worker=1, memory_limit="6GiB", progress=False
        ) as client:
            warm_up(spark, client, R["tables"])
            got = rounds(spark, client, R["tables"], args.reps, t_all)
            R["runs"] = got["runs"]
            pids = [p for group in got["pids"].values() for p in group if p != os.getpid()]
    finally:
        stop_session(spark)
        if catalog is not None:
            catalog.stop()
        if server is not None:
            server.stop()
    R["left_running"] = leftovers(pids)
    return R


def s3_server():
    """moto's S3 API server on this machine (``tests/support/s3.py``)."""
    from tests.support.s3 import S3Server

    os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")  # no instance-metadata lookups
    return S3Server.start()


def s3a_confs(server) -> dict:
    """Spark's s3a:// on ``server``: hadoop-aws on the class paths, the server's confs."""
    from tests.support.jars import paths

    jars = paths("s3a-3.5")
    missing = [j for j in jars if not os.path.exists(j)]
    if missing:
        raise SystemExit(f"missing {', '.join(missing)}: python -m tests.support.jars fetch s3a-3.5")
    classpath = ":".join(jars)
    return {"spark.driver.extraClassPath": classpath, "spark.executor.extraClassPath": classpath,
            "spark.executorEnv.AWS_EC2_METADATA_DISABLED": "true", **server.spark_conf()}  # fmt: skip


def register(spark, server, info: dict):
    """The copy on ``server`` named ``spark_catalog.bench.dv`` in Spark's catalog and in a
    stand-in Unity Catalog that vends credentials for it (returned, to stop);
    ``info`` gains the name, the catalog's client and the endpoint options."""
    import uuid

    from databricks.sdk import WorkspaceClient

    from tests.support.unity_catalog import CatalogStandIn

    name = "spark_catalog.bench.dv"
    spark.sql("CREATE SCHEMA IF NOT EXISTS spark_catalog.bench")
    spark.sql(f"DROP TABLE IF EXISTS {name}")
    spark.sql(f"CREATE TABLE {name} USING delta LOCATION '{info['spark_source']}'")
    catalog = CatalogStandIn.start(server, token=f"dapi-{uuid.uuid4().hex}")
    catalog.add_table(name, info["files_source"])
    catalog.grant_external_use("spark_catalog.bench")
    info.update(name=name, catalog=WorkspaceClient(host=catalog.url, token=catalog.token),
                endpoint_options=server.endpoint_options)  # fmt: skip
    return catalog


def copy_to_store(server, path: str) -> dict:
    """The table at ``path`` copied to the server; where each reader finds it."""
    t0 = time.perf_counter()
    server.filesystem().put(path, f"{server.bucket}/dv", recursive=True)
    print(f"copied to {server.url('dv')} in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return {"files_source": server.url("dv"), "spark_source": server.url("dv").replace("s3://", "s3a://"),
            "storage_options": server.storage_options, "copy_seconds": time.perf_counter() - t0}  # fmt: skip


def main(argv=None) -> dict:
    import logging
    import warnings

    warnings.filterwarnings("ignore")
    logging.getLogger("distributed").setLevel(logging.WARNING)  # its INFO lines would bury the table
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks delta", description=" ".join(__doc__.split("\n\n")[0].split())
    )
    ap.add_argument("--size-gb", type=float, default=1.0, help="the table's Parquet, GB of 2**30 bytes (default 1)")
    ap.add_argument("--dv-fraction", type=float, default=0.05, help="share of the files given a deletion vector")
    ap.add_argument("--reps", type=int, default=3, help="rounds of every method (default 3)")
    ap.add_argument("--path", default=None, help="keep the tables here and reuse them (default: a temporary directory)")
    ap.add_argument("--json", default=os.path.join(os.path.dirname(__file__), "results", "delta.json"))
    ap.add_argument("--master", default=MASTER, help=f"Spark master (default {MASTER})")
    ap.add_argument("--workers", type=int, default=WORKERS, help=f"Dask workers (default {WORKERS}, 1 thread each)")
    ap.add_argument(
        "--store", choices=("local", "s3"), default="local", help="read the table from here (default local)"
    )
    args = ap.parse_args(argv)
    base = os.path.abspath(args.path) if args.path else tempfile.mkdtemp(prefix="spark-dask-bench-delta-")
    t_all = time.perf_counter()
    load_before = f"{os.getloadavg()[0]:.2f}"
    try:
        R = bench(args, base, t_all)
    finally:
        if not args.path:
            shutil.rmtree(base, ignore_errors=True)
    R.update(machine=machine(), load_before=load_before, load_after=f"{os.getloadavg()[0]:.2f}",
             total_seconds=time.perf_counter() - t_all)  # fmt: skip
    R["checks"] = checks(R)
    copy = mismatch(R["expected_nodv"], R["expected"])
    if copy and "dask_deltatable" in R["checks"]:
        R["checks"]["dask_deltatable"] += f" (the copy without DVs: {copy})"
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    if "storage_options" in R["tables"]:  # the server's throwaway key, still not written out
        R["tables"]["storage_options"] = redacted(R["tables"]["storage_options"])
        R["tables"].pop("catalog", None)  # the stand-in's client: its host is gone, its token not for a file
    with open(args.json, "w") as f:
        json.dump(R, f, indent=2)
    print(render(R))
    if any(R["checks"].values()) or R["left_running"]:
        raise SystemExit(1)
    return R


if __name__ == "__main__":
    if sys.argv[1:2] == ["--deltalake-child"]:
        print(json.dumps(deltalake_child(sys.argv[2])))
    else:
        main()
