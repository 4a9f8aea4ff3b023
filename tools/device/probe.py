"""Device probe (tools/device/README.md): dask-cuda start-up and teardown with the RMM pool
auto, 8 GiB and off, one application, clusters one after the other; after each close,
the processes left on the machine."""

import os
import sys
import tempfile
import time

import dask
import psutil

import spark_dask
from spark_dask.registry import parts_of
from tools import gpu_check


def processes(label: str) -> None:
    me = os.getpid()
    rows = [
        p
        for p in psutil.process_iter(["pid", "ppid", "cmdline"])
        if p.info["pid"] != me and any(k in " ".join(p.info["cmdline"] or []) for k in ("dask", "java", "pyspark"))
    ]
    print(f"-- processes ({label}): {len(rows)}")
    for p in rows:
        print(f"   {p.info['pid']} ppid={p.info['ppid']} {' '.join(p.info['cmdline'] or [])[:300]}")


def main() -> None:
    processes("before")
    script = os.path.join(tempfile.mkdtemp(), "gpus.sh")
    with open(script, "w") as f:
        f.write(gpu_check.discovery_script())
    os.chmod(script, 0o755)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(os.environ.get("PROBE_MASTER", "local-cluster[1,3,16384]")).appName("probe")
    for k, v in gpu_check.spark_conf(script, 1, sys.executable).items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    for pool in ["auto", "auto", "8GiB", "8GiB", None]:
        with dask.config.set({"spark-dask.rapids.rmm-pool-size": pool}):
            t0 = time.monotonic()
            client = spark_dask.start(spark, progress=False, timeout=120)
            up = time.monotonic() - t0
            cluster = client.cluster
            parts = parts_of(cluster)  # the registry's, while the cluster runs
            logs = client.get_worker_logs(n=60)
            t1 = time.monotonic()
            client.close()
            down = time.monotonic() - t1
            timings = {k: round(v, 3) for k, v in parts.timings.items()}
            print(f"== pool={pool}: start {up:.2f} s  timings={timings} close {down:.2f} s")
            for row in cluster.task_rows:
                print("   notes:", row.get("notes"), {"status": row.get("status")})
            for lines in logs.values():
                for _level, line in reversed(lines[:30]):  # newest first
                    print("   log:", line[:220])
            time.sleep(0.5)
            processes(f"after close, pool={pool}")
    spark.stop()
    time.sleep(2)
    processes("after spark.stop")


if __name__ == "__main__":
    main()
