"""``python -m tools.gpu_check``: run the real dask-cuda path on a machine with GPUs.

On a machine with NVIDIA GPUs, Java and the RAPIDS packages, this starts a Spark
``local-cluster[1,<gpus + 2>,<mem>]`` whose GPUs Spark discovers with a script reading
``nvidia-smi``, starts ``spark_dask.start(spark)`` (dask-cuda workers, RMM pool ``auto``)
and prints, per worker, what it got: ``CUDA_VISIBLE_DEVICES``, ``CUDA_DEVICE_ORDER``,
the GPU's PCI bus id and name as NVML and as CUDA see them, the RMM pool and the
device memory limit. Then it runs a dask-cudf groupby checked against pandas, a Spark
-> dask-cudf -> Spark round trip, a Delta table with deletion vectors written by Spark
and read into cudf by ``spark_dask.read_delta`` (with ``--delta-jars``), and an XGBoost
training on the GPUs (``device="cuda"``, through ``xgboost.dask``), and prints start-up
and teardown times.

Without GPUs, ``nvidia-smi``, Java or the packages it exits at once with status 2 and
says what is missing. Status 1: a check failed. Status 0: everything passed.

The pure parts (reading ``nvidia-smi``, the discovery script, the Spark confs, the
table) are unit-tested without a GPU; the rest needs the hardware.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

import spark_dask
from spark_dask.capacity import needs_cpu_profile
from spark_dask.executor.checkup import version_of
from spark_dask.options import config
from spark_dask.registry import parts_of
from spark_dask.spark.compat import task_profiles_supported
from spark_dask.spark.jobs import map_collect

QUERY = ["--query-gpu=index,pci.bus_id,name,memory.total", "--format=csv,noheader,nounits"]
# What must be importable for the checks (module -> what to install).
REQUIRED = {
    "pyspark": "pyspark (pip install -e '.[spark]')",
    "dask_cuda": "dask-cuda[cu12] (pip install -e '.[cuda12]')",
    "rmm": "rmm-cu12 (comes with cudf-cu12)",
    "pynvml": "nvidia-ml-py",
}
# Checks that are skipped (and say so) when their package is missing.
OPTIONAL = {
    "cudf": "cudf-cu12 (pip install -e '.[cuda12]')",
    "dask_cudf": "dask-cudf-cu12 (pip install -e '.[cuda12]')",
    "xgboost": "xgboost (the CUDA build from PyPI)",
    "cupy": "cupy-cuda12x (comes with cudf)",
    "pyroaring": "pyroaring (pip install -e '.[delta]')",
}
# Delta Lake's Spark connector, for the read_delta row (--delta-jars).
DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"
DELTA_SKIPPED = (
    "skipped: needs Delta Lake's Spark connector: --delta-jars PATH,PATH (the jars of "
    "io.delta:delta-spark_2.12 and io.delta:delta-storage 3.3.x for Spark 3.5, delta-spark_2.13 4.x for Spark 4)"
)
# Distributions whose versions the check prints when they are installed.
VERSIONS = (
    "dask-cuda",
    "rmm-cu12",
    "rmm-cu13",
    "cudf-cu12",
    "cudf-cu13",
    "dask-cudf-cu12",
    "dask-cudf-cu13",
    "cupy-cuda12x",
    "cupy-cuda13x",
    "xgboost",
    "nvidia-ml-py",
    "pyroaring",
)


@dataclass(frozen=True)
class Gpu:
    index: str
    pci_bus_id: str
    name: str
    memory_mib: int


def parse_nvidia_smi(text: str) -> list[Gpu]:
    """GPUs from ``nvidia-smi --query-gpu=index,pci.bus_id,name,memory.total
    --format=csv,noheader,nounits`` (one ``0, 00000000:3B:00.0, NVIDIA H200, 143771``
    line per GPU, in NVML's PCI order)."""
    out = []
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 4 or not parts[0].isdigit():
            raise ValueError(f"unexpected nvidia-smi line: {line!r}")
        index, bus, memory = parts[0], parts[1], parts[-1]
        name = ", ".join(parts[2:-1])  # a name could hold a comma
        out.append(Gpu(index, bus, name, int(float(memory)) if memory.replace(".", "").isdigit() else 0))
    return out


def discovery_script(nvidia_smi: str = "nvidia-smi") -> str:
    """A Spark GPU discovery script: prints ``{"name": "gpu", "addresses": ["0", ...]}``
    with the indices ``nvidia-smi`` reports (NVML order, i.e. PCI bus order)."""
    return (
        "#!/usr/bin/env bash\n"
        "# Spark GPU discovery for tools.gpu_check: the GPU indices nvidia-smi reports\n"
        "set -euo pipefail\n"
        f"ids=$({nvidia_smi} --query-gpu=index --format=csv,noheader "
        '| awk \'NF { gsub(/ /, ""); printf "%s\\"%s\\"", (n++ ? "," : ""), $0 }\')\n'
        'echo "{\\"name\\": \\"gpu\\", \\"addresses\\": [${ids}]}"\n'
    )


def discovery_json(indices: list[str]) -> dict:
    """What Spark expects from the discovery script."""
    return {"name": "gpu", "addresses": [str(i) for i in indices]}


def spark_conf(script: str, n_gpus: int, python: str, gpu_amount: float = 1, delta_jars=()) -> dict:
    """Spark confs of the check's local-cluster: one Spark worker owning every GPU, one
    executor, ``gpu_amount`` GPU per task (1: one dask-cuda worker per GPU holding it
    whole; a fraction: the workers share their GPUs with Spark's GPU tasks); with
    ``delta_jars``, Delta Lake's Spark connector (:func:`delta_conf`)."""
    return {
        **(delta_conf(delta_jars) if delta_jars else {}),
        "spark.worker.resource.gpu.amount": str(n_gpus),
        "spark.worker.resource.gpu.discoveryScript": script,
        "spark.executor.resource.gpu.amount": str(n_gpus),
        "spark.task.resource.gpu.amount": f"{gpu_amount:g}",
        "spark.executorEnv.PYSPARK_PYTHON": python,
        "spark.dynamicAllocation.enabled": "false",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
    }


def delta_conf(jars) -> dict:
    """Spark confs that load Delta Lake's Spark connector from ``jars`` (paths of
    delta-spark and delta-storage) and read Delta's log in 2 tasks, not 50."""
    return {
        "spark.jars": ",".join(jars),
        "spark.sql.extensions": DELTA_EXTENSION,
        "spark.sql.catalog.spark_catalog": DELTA_CATALOG,
        "spark.databricks.delta.snapshotPartitions": "2",
    }


def same_pci(a: str | None, b: str | None) -> bool:
    """Whether two PCI bus ids name one device (NVML writes an 8-digit domain
    ``00000000:3B:00.0``, CUDA a 4-digit one ``0000:3b:00.0``)."""
    if not a or not b:
        return False

    def norm(x: str) -> str:
        parts = x.strip().lower().split(":")
        return ":".join([parts[0].lstrip("0") or "0", *parts[1:]]) if len(parts) == 3 else x.strip().lower()

    return norm(a) == norm(b)


def missing_prerequisites(which=shutil.which, find_spec=importlib.util.find_spec, env=os.environ) -> list[str]:
    """What this machine lacks for the check, as lines for the user; empty when ready."""
    missing = []
    if which("nvidia-smi") is None:
        missing.append("nvidia-smi (the NVIDIA driver): not on PATH")
    if which("java") is None and not env.get("JAVA_HOME"):
        missing.append("java (Spark needs Java 17 or 21): not on PATH and JAVA_HOME unset")
    for module, package in REQUIRED.items():
        if find_spec(module) is None:
            missing.append(f"Python module {module}: install {package}")
    return missing


def table(rows: list[tuple[str, str]], title: str = "") -> str:
    """Two aligned columns."""
    width = max((len(k) for k, _ in rows), default=0)
    lines = [title] if title else []
    for k, v in rows:
        v = str(v).replace("\n", "\n" + " " * (width + 3))
        lines.append(f"  {k.ljust(width)} {v}")
    return "\n".join(lines)


def _query_gpus(timeout: float = 30) -> list[Gpu]:
    proc = subprocess.run(["nvidia-smi", *QUERY], capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"nvidia-smi failed ({proc.returncode}): {proc.stderr.strip() or proc.stdout.strip()}")
    return parse_nvidia_smi(proc.stdout)


def _make_worker_probe():
    # A closure: pickled by value, so the workers need not import this module.
    def probe(dask_worker):
        import os as _os

        info = {
            "name": dask_worker.name,
            "CUDA_VISIBLE_DEVICES": _os.environ.get("CUDA_VISIBLE_DEVICES"),
            "CUDA_DEVICE_ORDER": _os.environ.get("CUDA_DEVICE_ORDER"),
            "nthreads": dask_worker.state.nthreads,
            "memory_limit": dask_worker.memory_manager.memory_limit,
        }
        visible = (info["CUDA_VISIBLE_DEVICES"] or "0").split(",")[0]
        try:
            import pynvml

            pynvml.nvmlInit()
            if visible.isdigit():
                handle = pynvml.nvmlDeviceGetHandleByIndex(int(visible))
            else:
                handle = pynvml.nvmlDeviceGetHandleByUUID(visible)
            bus = pynvml.nvmlDeviceGetPciInfo(handle).busId
            name = pynvml.nvmlDeviceGetName(handle)
            info["nvml_pci"] = bus.decode() if isinstance(bus, bytes) else bus
            info["nvml_name"] = name.decode() if isinstance(name, bytes) else name
            mem = pynvml.nvmlDeviceGetMemoryInfo(handle)
            info["gpu_total"], info["gpu_used"] = int(mem.total), int(mem.used)
        except Exception as e:  # noqa: BLE001 - reported, not raised
            info["nvml_error"] = repr(e)
        try:  # the device CUDA calls 0 in this process: must be the one NVML named
            import cupy

            info["cuda_pci"] = cupy.cuda.runtime.deviceGetPCIBusId(0)
        except Exception as e:  # noqa: BLE001
            info["cuda_error"] = repr(e)
        try:
            import rmm

            mr = rmm.mr.get_current_device_resource()
            info["rmm_resource"] = type(mr).__name__
            size = getattr(mr, "pool_size", None)
            info["rmm_pool_size"] = size() if callable(size) else None
        except Exception as e:  # noqa: BLE001
            info["rmm_error"] = repr(e)
        data = dask_worker.data
        # dask-cuda's DeviceHostFile: a zict Buffer whose n is the device memory limit
        # (a plain dict when there is no limit)
        buffer = getattr(data, "device_buffer", None)
        info["device_memory_limit"] = getattr(buffer, "n", None) if buffer is not None else None
        info["data"] = type(data).__name__
        return info

    return probe


def _gib(n) -> str:
    return f"{n / 2**30:.1f} GiB" if isinstance(n, (int, float)) and n else str(n)


def _has(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _cupy_check(client) -> tuple[bool | None, str]:
    """A Dask array of CuPy blocks on the workers: a reduction checked against its
    closed form, and every block checked to be a CuPy (device) array. The blocks are
    brought back to host memory on the workers, so the client needs no CUDA."""
    if not _has("cupy"):
        return None, f"skipped: cupy is not installed ({OPTIONAL['cupy']})"
    import dask.array as da
    import numpy as np

    n, chunk = 200_000_000, 12_500_000  # 1.6 GB of float64 in 16 blocks

    def to_device(block):
        import cupy

        return cupy.asarray(block)

    def on_device(block):
        import cupy
        import numpy

        return numpy.full(1, isinstance(block, cupy.ndarray))

    def to_host(block):
        return block.get() if hasattr(block, "get") else block

    x = da.arange(n, chunks=chunk, dtype="f8").map_blocks(to_device, dtype="f8")
    t0 = time.monotonic()
    total = float((x * 2).sum().map_blocks(to_host, dtype="f8").compute())
    took = time.monotonic() - t0
    device = bool(x.map_blocks(on_device, chunks=(1,), dtype=bool).all().compute())
    want = float(n) * (n - 1)
    ok = device and np.isclose(total, want, rtol=1e-12)
    return ok, (f"{n:,} float64 in {n // chunk} CuPy blocks, sum {took:.2f} s, "
                f"blocks on the GPU: {device}, exact: {bool(np.isclose(total, want, rtol=1e-12))}")  # fmt: skip


def _spark_gpu_job_check(spark, n_tasks: int, timeout: float = 60) -> tuple[bool, str]:
    """A Spark job whose tasks ask for GPU shares (Spark's default profile) while the
    Dask cluster runs: it must finish (shared mode), and its tasks must see the GPU
    addresses Spark gave them."""
    import threading

    sc = spark.sparkContext
    group = f"spark-dask-gpu-check-{os.getpid()}"

    def addresses(_):
        import os as _os

        from pyspark import TaskContext as _TC

        res = _TC.get().resources().get("gpu")
        return (",".join(res.addresses) if res else "", _os.environ.get("CUDA_VISIBLE_DEVICES", ""))

    timer = threading.Timer(timeout, lambda: sc.cancelJobGroup(group))
    timer.start()
    t0 = time.monotonic()
    try:
        sc.setJobGroup(group, "spark-dask gpu check: a Spark GPU job beside the Dask cluster", True)
        got = sc.parallelize(range(n_tasks), n_tasks).map(addresses).collect()
    except Exception as e:  # noqa: BLE001 - a cancelled or failed job is the check's failure
        return False, f"the Spark GPU job did not finish within {timeout:g} s: {type(e).__name__}: {str(e)[:200]}"
    finally:
        timer.cancel()
        sc.setLocalProperty("spark.jobGroup.id", None)
    took = time.monotonic() - t0
    ok = len(got) == n_tasks and all(a for a, _ in got)
    return (
        ok,
        f"{n_tasks} tasks with GPU shares finished in {took:.1f} s beside the cluster; their GPUs: {sorted({a for a, _ in got})}",
    )


def _groupby_check(client) -> tuple[bool | None, str]:
    missing = [m for m in ("cudf", "dask_cudf") if not _has(m)]
    if missing:
        return None, "skipped: " + ", ".join(f"{m} is not installed ({OPTIONAL[m]})" for m in missing)
    import dask.dataframe as dd
    import numpy as np
    import pandas as pd

    n = 2_000_000
    rng = np.random.default_rng(0)
    pdf = pd.DataFrame({"k": rng.integers(0, 1000, n), "x": rng.random(n)})
    ddf = dd.from_pandas(pdf, npartitions=16).to_backend("cudf").persist()
    backend = type(ddf._meta).__module__.split(".")[0]
    t0 = time.monotonic()
    # back to pandas on the workers: the client never needs CUDA
    got = ddf.groupby("k").x.sum().to_backend("pandas").compute().sort_index()
    took = time.monotonic() - t0
    want = pdf.groupby("k").x.sum().sort_index()
    ok = backend == "cudf" and got.index.equals(want.index) and np.allclose(got.to_numpy(), want.to_numpy())
    return ok, f"{n:,} rows, {len(got)} groups, partitions are {backend}, {took:.2f} s, matches pandas: {ok}"


def _handoff_check(spark, client, n: int = 1_000_000) -> tuple[bool, str]:
    """Spark -> dask-cudf -> Spark through spark_dask.to_dask / to_spark (docs/handoff.md):
    the transfer's Spark tasks run beside a gang that holds every GPU (CPU-only profile).

    No other Spark job may run here: Spark's default task asks for a GPU, which the gang
    holds. The expected values are computed on the driver from the data's definition,
    and the Spark side of the result is read by a job with the transfer's CPU-only
    profile.
    """
    import numpy as np
    import pandas as pd

    profile = needs_cpu_profile(parts_of(client.cluster).facts, task_profiles_supported(spark))
    expected = "cudf" if _has("cudf") else "pandas"
    df = spark.range(0, n, 1, 8).selectExpr(
        "id", "id % 97 AS k", "CAST(id % 13 AS DOUBLE) * 0.25 AS x", "CAST(id AS STRING) AS s"
    )
    ids = np.arange(n)
    want = pd.Series((ids % 13) * 0.25).groupby(ids % 97).sum().sort_index()
    t0 = time.monotonic()
    ddf = spark_dask.to_dask(df, backend=expected)
    backend = type(ddf._meta).__module__.split(".")[0]
    got = ddf.groupby("k").x.sum()
    got = (got.to_backend("pandas") if backend != "pandas" else got).compute().sort_index()
    took = time.monotonic() - t0
    same = got.index.tolist() == want.index.tolist() and np.allclose(got.to_numpy(), want.to_numpy())
    s_ok = bool((ddf.s.astype("int64") == ddf.id).all().compute())
    t1 = time.monotonic()
    back = spark_dask.to_spark(ddf)

    def totals(batches):
        import pyarrow as pa
        import pyarrow.compute as pc

        rows = total = 0
        for b in batches:
            rows += b.num_rows
            total += pc.sum(b.column("id")).as_py() or 0
        yield pa.RecordBatch.from_pylist(
            [{"n": rows, "t": total}], schema=pa.schema([("n", pa.int64()), ("t", pa.int64())])
        )

    parts = map_collect(back, "n long, t long", totals, profile, f"{client.cluster.tag}-gpu-check",
                        "spark-dask: gpu check, to_spark result")  # fmt: skip
    back_ok = sum(r["n"] for r in parts) == n and sum(r["t"] for r in parts) == n * (n - 1) // 2
    took_back = time.monotonic() - t1
    ok = backend == expected and same and s_ok and back_ok
    return ok, (
        f"{n:,} rows: to_dask + groupby {took:.2f} s (partitions are {backend}, exact: {same and s_ok}), "
        f"to_spark {took_back:.2f} s (exact: {back_ok}); transfer tasks "
        + ("with a CPU-only profile" if profile else "in Spark's default profile")
    )


def _log_actions(path: str, version: int) -> list[dict]:
    """The actions of one commit of a Delta table's log."""
    with open(os.path.join(path, "_delta_log", f"{version:020d}.json"), encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _delta_table(spark, path: str, n: int = 10_000) -> dict:
    """Write ``n`` rows in 4 files with Spark, deletion vectors on, DELETE every 7th row
    in place, and read the table back with Spark: ``{"path", "n", "dv_files", "rows"
    (Spark's, by column: :func:`_by_column`), "took"}``.

    This runs before the Dask cluster starts: with ``gpu.amount`` 1 the cluster's gang
    holds every GPU, and a Spark SQL task (Spark's default profile asks for a GPU) would
    wait for it.
    """
    t0 = time.monotonic()
    table = f"delta.`{path}`"
    shuffle = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "4")  # the DELETE's shuffle: 4 tasks, not 200
    try:
        spark.sql(f"""CREATE TABLE {table} USING delta TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')
            AS SELECT id, CAST(id % 1000 AS INT) AS i, IF(id % 17 = 5, NULL, id * 0.25D) AS x,
                IF(id % 13 = 4, NULL, concat('s', id % 101)) AS s,
                timestamp_micros(1700000000000000 + id * 1234567) AS ts
            FROM range(0, {n}, 1, 4)""")  # fmt: skip
        spark.sql(f"DELETE FROM {table} WHERE id % 7 = 3")
        read = spark.read.format("delta").load(path).selectExpr("id", "i", "x", "s", "unix_micros(ts) AS ts")
        rows = sorted(read.collect(), key=lambda r: r["id"])
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", shuffle)
    adds = [a["add"] for a in _log_actions(path, 1) if "add" in a]
    dv_files = sum(1 for a in adds if a.get("deletionVector"))
    if not dv_files:
        raise RuntimeError(f"the DELETE wrote no deletion vector; its commit's adds: {adds[:2]}")
    by_column = {c: [r[c] for r in rows] for c in ("id", "i", "x", "s", "ts")}
    return {"path": path, "n": n, "dv_files": dv_files, "rows": by_column, "took": time.monotonic() - t0}


def _prepared_delta(spark, args, workdir: str) -> dict | str:
    """The table of the read_delta row (:func:`_delta_table`, under ``workdir``), ``{"error":
    ...}`` when Spark could not write it, or the row's text when it is skipped."""
    missing = [m for m in ("cudf", "dask_cudf", "pyroaring") if not _has(m)]
    if missing:
        return "skipped: " + ", ".join(f"{m} is not installed ({OPTIONAL[m]})" for m in missing)
    if not args.delta_jars:
        return DELTA_SKIPPED
    try:
        return _delta_table(spark, os.path.join(workdir, "delta-table"))
    except Exception as e:  # noqa: BLE001 - the row's failure
        return {"error": f"{type(e).__name__}: {str(e)[:400]}"}


def _by_column(pdf) -> dict[str, list]:
    """A pandas frame's columns as lists of Python values in ``id`` order: a null is None,
    a timestamp its microseconds since the epoch (Spark's ``unix_micros``; no zone: UTC)."""
    import pandas as pd

    pdf = pdf.sort_values("id").reset_index(drop=True)
    out = {}
    for name in pdf.columns:
        column = pdf[name]
        if pd.api.types.is_datetime64_any_dtype(column.dtype):
            column = column.dt.tz_localize("UTC") if column.dt.tz is None else column
            column = (column - pd.Timestamp(0, tz="UTC")) // pd.Timedelta(microseconds=1)
        out[name] = [None if pd.isna(v) else v for v in column.tolist()]
    return out


def _read_delta_check(client, table: dict | str, backend: str = "cudf") -> tuple[bool | None, str]:
    """``spark_dask.read_delta`` of :func:`_delta_table`'s table on the workers: every
    partition of ``backend``, the rows (brought to pandas on the workers) equal to those
    of ``read_delta(backend="pandas")`` and of Spark's read. Removes the table."""
    if isinstance(table, str):
        return None, table
    if "error" in table:
        return False, f"Spark could not write the Delta table: {table['error']}"
    import dask

    def kind(part):
        return type(part).__module__.split(".")[0]

    try:
        t0 = time.monotonic()
        ddf = spark_dask.read_delta(table["path"], via="files", backend=backend, client=client)
        got = (ddf.to_backend("pandas") if backend != "pandas" else ddf).compute()
        took = time.monotonic() - t0
        kinds = sorted(set(client.compute([dask.delayed(kind)(p) for p in ddf.to_delayed()], sync=True)))
        plain = spark_dask.read_delta(table["path"], via="files", backend="pandas", client=client).compute()
    finally:
        shutil.rmtree(table["path"], ignore_errors=True)
    rows = _by_column(got)
    same_pandas, same_spark = rows == _by_column(plain), rows == table["rows"]
    types, plain_types = got.dtypes.astype(str).to_dict(), plain.dtypes.astype(str).to_dict()
    ok = kinds == [backend] and same_pandas and same_spark
    return ok, (
        f"Spark wrote {table['n']:,} rows and deleted {table['n'] - len(table['rows']['id']):,} "
        f"({table['dv_files']} files with a deletion vector) in {table['took']:.1f} s; read_delta: "
        f"{ddf.npartitions} partitions of {'/'.join(kinds)}, {len(got):,} rows in {took:.2f} s, equal to "
        f"read_delta(backend='pandas'): {same_pandas}, to Spark's read: {same_spark}"
        + ("" if types == plain_types else f"\ndtypes {types}; pandas backend's {plain_types}")
    )


def _xgboost_check(client) -> tuple[bool | None, str]:
    missing = [m for m in ("xgboost", "cudf", "dask_cudf") if not _has(m)]
    if missing:
        return None, "skipped: " + ", ".join(f"{m} is not installed ({OPTIONAL[m]})" for m in missing)
    import dask.dataframe as dd
    import numpy as np
    import pandas as pd
    import xgboost as xgb

    n = 500_000
    rng = np.random.default_rng(1)
    pdf = pd.DataFrame({f"f{i}": rng.random(n) for i in range(8)})
    pdf["y"] = 3 * pdf.f0 - 2 * pdf.f1 + rng.normal(0, 0.1, n)
    ddf = dd.from_pandas(pdf, npartitions=8).to_backend("cudf").persist()
    X, y = ddf.drop(columns="y"), ddf.y
    t0 = time.monotonic()
    dtrain = xgb.dask.DaskQuantileDMatrix(client, X, y)
    out = xgb.dask.train(
        client,
        {"device": "cuda", "tree_method": "hist", "objective": "reg:squarederror"},
        dtrain,
        num_boost_round=50,
        evals=[(dtrain, "train")],
    )
    took = time.monotonic() - t0
    rmse = out["history"]["train"]["rmse"]
    ok = rmse[-1] < 0.2 < rmse[0]
    return (
        ok,
        f"xgboost {xgb.__version__}, {n:,} rows, 50 rounds in {took:.1f} s, train rmse {rmse[0]:.3f} -> {rmse[-1]:.3f}",
    )


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tools.gpu_check", description=__doc__.split("\n\n")[0])
    parser.add_argument("--timeout", type=float, default=300, help="seconds to wait for the dask-cuda workers")
    parser.add_argument("--memory", type=int, default=8192, help="MiB of the local-cluster's Spark worker")
    parser.add_argument("--no-xgboost", action="store_true", help="skip the XGBoost training")
    parser.add_argument("--gpu-amount", type=float, default=1.0,
                        help="spark.task.resource.gpu.amount: 1 (the workers hold their GPUs) or a fraction "
                             "(gpu_mode 'shared': a Spark GPU job then runs beside the Dask cluster)")  # fmt: skip
    parser.add_argument("--delta-jars", metavar="PATH[,PATH]", default="",
                        help="Delta Lake's Spark connector (the delta-spark and delta-storage jars): the check then "
                             "writes a Delta table with deletion vectors in Spark and reads it into cudf")  # fmt: skip
    args = parser.parse_args(argv)
    if not 0 < args.gpu_amount <= 1:
        parser.error("--gpu-amount must be in (0, 1]")
    args.delta_jars = [p.strip() for p in args.delta_jars.split(",") if p.strip()]
    missing = [p for p in args.delta_jars if not os.path.isfile(p)]
    if missing:
        parser.error(f"--delta-jars: no file {missing[0]}")
    return args


def _gpus_or_exit_status() -> list[Gpu] | int:
    """This machine's GPUs, or exit status 2 (what is missing printed on stderr)."""
    missing = missing_prerequisites()
    if missing:
        print("spark-dask gpu check: cannot run on this machine, it lacks:", file=sys.stderr)
        for line in missing:
            print(f"  - {line}", file=sys.stderr)
        print("See docs/rapids.md ('Checking the GPU path') for the install line.", file=sys.stderr)
        return 2
    try:
        gpus = _query_gpus()
    except Exception as e:  # noqa: BLE001
        print(f"spark-dask gpu check: {e}", file=sys.stderr)
        return 2
    if not gpus:
        print("spark-dask gpu check: nvidia-smi lists no GPU", file=sys.stderr)
        return 2
    return gpus


def _print_versions(gpus: list[Gpu]) -> None:
    import distributed
    import pyspark

    print(table([(f"GPU {g.index}", f"{g.name}, {g.pci_bus_id}, {g.memory_mib} MiB") for g in gpus], "nvidia-smi"))
    # versions from the metadata: importing cudf here would open a CUDA context on GPU 0
    # in this process and shrink the pool of the worker there
    versions = {d: v for d in VERSIONS if (v := version_of(d)) is not None}
    print(table([("python", sys.version.split()[0]), ("pyspark", pyspark.__version__),
                 ("distributed", distributed.__version__), *versions.items()], "versions"))  # fmt: skip


def _discovery(workdir: str, gpus: list[Gpu], results: list) -> str | None:
    """Write and run the GPU discovery script; its path, None when its answer is wrong."""
    script = os.path.join(workdir, "gpus.sh")
    with open(script, "w") as f:
        f.write(discovery_script())
    os.chmod(script, 0o755)
    found = subprocess.run([script], capture_output=True, text=True, timeout=30)
    results.append(("discovery script", found.stdout.strip() or found.stderr.strip()))
    try:
        discovered = json.loads(found.stdout)
        if discovered != discovery_json([g.index for g in gpus]):
            raise ValueError(discovered)
    except ValueError:
        return None
    return script


def _worker_row(info: dict, by_bus: dict, spill: float) -> tuple[tuple[str, str], bool]:
    """(the result row of one worker, whether it failed a check)."""
    order_ok = info.get("CUDA_DEVICE_ORDER") == "PCI_BUS_ID"
    cuda_ok = same_pci(info.get("nvml_pci"), info.get("cuda_pci"))
    gpu = next((g for b, g in by_bus.items() if same_pci(b, info.get("nvml_pci"))), None)
    pinned_ok = gpu is not None and gpu.index == info.get("CUDA_VISIBLE_DEVICES")
    pool, limit = info.get("rmm_pool_size"), info.get("device_memory_limit")
    pool_ok = isinstance(pool, int) and pool > 0
    spill_ok = pool_ok and isinstance(limit, (int, float)) and abs(limit / pool - spill) < 0.01
    threads_ok = info.get("nthreads") == 1
    problems = [what for what, ok in (("device order", order_ok), ("CUDA/NVML device", cuda_ok),
                                      ("GPU pinning", pinned_ok), ("RMM pool", pool_ok),
                                      (f"spill limit {spill:g} x pool", spill_ok), ("1 thread", threads_ok))
                if not ok]  # fmt: skip
    return (
        f"worker {info['name']}",
        f"CUDA_VISIBLE_DEVICES={info.get('CUDA_VISIBLE_DEVICES')} CUDA_DEVICE_ORDER={info.get('CUDA_DEVICE_ORDER')} "
        f"threads={info.get('nthreads')}\n"
        f"NVML: {info.get('nvml_name')} {info.get('nvml_pci')}; CUDA device 0: {info.get('cuda_pci')} "
        f"-> {'same GPU' if cuda_ok else 'MISMATCH'}{'' if pinned_ok else ' (not the GPU Spark assigned)'}\n"
        f"RMM: {info.get('rmm_resource')} pool {_gib(info.get('rmm_pool_size'))}; device memory limit "
        f"{_gib(info.get('device_memory_limit'))} ({info.get('data')}); host memory limit "
        f"{_gib(info.get('memory_limit'))}"
        + "".join(f"\n{k}: {info[k]}" for k in ("nvml_error", "cuda_error", "rmm_error") if k in info)
        + (f"\nFAILED: {', '.join(problems)}" if problems else "\nchecks passed"),
    ), bool(problems)  # fmt: skip


def _run_checks(spark, client, gpus: list[Gpu], args, results: list, delta: dict | str) -> bool:
    """The workers' rows, then each check's row; whether any failed."""
    failed = False
    spill = float(config.get("rapids.spill-fraction"))
    infos = client.run(_make_worker_probe())
    by_bus = {g.pci_bus_id: g for g in gpus}
    for info in sorted(infos.values(), key=lambda i: str(i["name"])):
        row, bad = _worker_row(info, by_bus, spill)
        failed |= bad
        results.append(row)
    checks = [("cupy dask array", lambda: _cupy_check(client)),
              ("dask-cudf groupby", lambda: _groupby_check(client))]  # fmt: skip
    if args.gpu_amount < 1:
        checks.append(("Spark GPU job beside", lambda: _spark_gpu_job_check(spark, len(gpus))))
    checks.append(("to_dask / to_spark", lambda: _handoff_check(spark, client)))
    checks.append(("read_delta into cudf", lambda: _read_delta_check(client, delta)))
    if args.no_xgboost:
        results.append(("xgboost", "skipped (--no-xgboost)"))
    else:
        checks.append(("xgboost", lambda: _xgboost_check(client)))
    for name, check in checks:
        try:
            ok, text = check()
        except Exception as e:  # noqa: BLE001 - one check's error is its row, the others still run
            ok, text = False, f"{type(e).__name__}: {e}"
        failed |= ok is False
        results.append((name, ("FAILED: " if ok is False else "") + text))
    return failed


def _on_the_cluster(spark, gpus: list[Gpu], args, results: list, workdir: str) -> bool:
    """Start the Dask cluster, check it, close it; whether anything failed."""
    client = None
    failed = False
    try:
        delta = _prepared_delta(spark, args, workdir)  # Spark's SQL jobs before the gang holds the GPUs
        t0 = time.monotonic()
        client = spark_dask.start(spark, progress=False, timeout=args.timeout)
        cluster = client.cluster
        results.append(
            (
                "start-up",
                f"{time.monotonic() - t0:.1f} s to {cluster.gang_plan.n_workers} {cluster.gang_plan.kind} workers",
            )
        )
        if cluster.gang_plan.kind != "cuda":
            failed = True
            results.append(("worker kind", f"FAILED: {cluster.gang_plan.kind}, expected cuda"))
        failed |= _run_checks(spark, client, gpus, args, results, delta)
    except Exception as e:  # noqa: BLE001 - printed in the table
        failed = True
        results.append(("error", f"{type(e).__name__}: {e}"))
    finally:
        if client is not None:
            cluster = client.cluster
            t0 = time.monotonic()
            client.close()
            results.append(("teardown", f"{time.monotonic() - t0:.2f} s"))
            for row in cluster.task_rows:
                for note in row.get("notes", []):
                    results.append((f"task {row['partition']} note", note))
    return failed


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    t_begin = time.monotonic()
    gpus = _gpus_or_exit_status()
    if isinstance(gpus, int):
        return gpus
    results: list[tuple[str, str]] = []
    _print_versions(gpus)
    workdir = tempfile.mkdtemp(prefix="spark-dask-gpu-check-")
    script = _discovery(workdir, gpus, results)
    if script is None:
        print(table(results, "FAILED"), file=sys.stderr)
        return 1

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    # two cores more than GPUs: the to_dask / to_spark check's Spark tasks run beside the gang
    builder = SparkSession.builder.master(f"local-cluster[1,{len(gpus) + 2},{args.memory}]").appName(
        "spark-dask-gpu-check"
    )
    for k, v in spark_conf(script, len(gpus), sys.executable, args.gpu_amount, args.delta_jars).items():
        builder = builder.config(k, v)
    t0 = time.monotonic()
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    results.append(("spark session", f"{spark.sparkContext.master} in {time.monotonic() - t0:.1f} s"))
    try:
        failed = _on_the_cluster(spark, gpus, args, results, workdir)
    finally:
        spark.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    results.append(("total", f"{time.monotonic() - t_begin:.1f} s"))
    print(table(results, "spark-dask gpu check: " + ("FAILED" if failed else "passed")))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
