"""Class data sharing for the tests' JVMs: a Spark application's driver and executors
start ~35 % quicker from archives of the classes a first application loaded.

A JVM spends most of a local-cluster application's start loading and verifying Spark's
classes. JDK 13+ can write the classes an application loaded to an archive when it exits
(``-XX:ArchiveClassesAtExit``, "dynamic CDS"), and map that archive at the next start
(``-XX:SharedArchiveFile``): on CI's 2 cores a local-cluster[2,1,1024] application
starts and runs its first jobs in ~8.5 s instead of ~13. :func:`build` runs one such
application (``python -m tests.support.cds dump DIR``: local-cluster[1,1,1024], the
kinds of job the tests run) and keeps its driver's and its executor's archives under
``~/.cache/spark-dask/cds/KEY`` (``$SPARK_DASK_CDS_CACHE``), KEY naming the JDK, the
pyspark and its jars, and :data:`QUICK_JVM`. Each build removes the archives of pyspark
installs that are gone (:func:`prune`: a fresh clone's environment, deleted, leaves
~280 MB behind otherwise).

The JVM maps an archive only where its class path is the one the archive was written with
and every directory on it is empty (JDK 17's ``SharedClassPathEntry::validate``): Spark
puts its conf directory first on the class path, so the tests' defaults travel in
``PYSPARK_SUBMIT_ARGS`` and ``--conf`` (:func:`tests.support.spark.submit_confs`), not in
a SPARK_CONF_DIR. A JVM that cannot map its archive (another class path: an
``extraClassPath``, a SPARK_CONF_DIR of the user's) starts as without one, silently
(``-Xlog:cds=off``): the archives change start-up time, nothing else.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time

# JVM options of every JVM the tests start: C1 only and the serial GC start a local-cluster
# application (and run its first job) in about 16 s instead of 25 on a 2-CPU machine (the
# test JVMs are short-lived and small); the product sets no JVM option.
QUICK_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
ROLES = ("driver", "executor")
SOURCE = "jars"  # the file in a KEY directory naming the pyspark jars its archives were made from
STALE_WORK = 3600  # s: a build's work directory this old is a killed build's (a build's timeout is 300 s)
# A JVM that cannot use its archive says so on stdout unless these are off.
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"


def cache_root() -> str:
    return os.environ.get("SPARK_DASK_CDS_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "spark-dask", "cds"
    )


def _pyspark_jars() -> str | None:
    try:
        import pyspark
    except ImportError:
        return None
    return os.path.join(os.path.dirname(pyspark.__file__), "jars")


@functools.lru_cache(maxsize=1)
def key() -> str | None:
    """What the archives depend on: the JDK (``java -version``), the pyspark and its jars,
    :data:`QUICK_JVM`; None without java or pyspark."""
    jars = _pyspark_jars()
    java = (
        shutil.which("java", path=os.path.join(os.environ["JAVA_HOME"], "bin")) if os.environ.get("JAVA_HOME") else None
    )
    java = java or shutil.which("java")
    if jars is None or java is None or not os.path.isdir(jars):
        return None
    try:
        version = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30).stderr
    except (OSError, subprocess.SubprocessError):
        return None
    h = hashlib.sha1(f"{java}\n{version}\n{QUICK_JVM}\n{jars}\n".encode())
    for name in sorted(os.listdir(jars)):
        h.update(f"{name} {os.path.getsize(os.path.join(jars, name))}\n".encode())
    return h.hexdigest()[:16]


def archives() -> dict[str, str] | None:
    """The driver's and the executor's archive for this JDK and pyspark, if built."""
    k = key()
    if k is None:
        return None
    paths = {role: os.path.join(cache_root(), k, f"{role}.jsa") for role in ROLES}
    return paths if all(os.path.isfile(p) for p in paths.values()) else None


def java_options(role: str) -> str:
    """:data:`QUICK_JVM`, and the archive of ``role`` (driver or executor) where built:
    the options of the tests' drivers, executors and Spark daemons (the driver's archive
    holds a standalone Master's and Worker's classes: local-cluster runs them in the
    driver's JVM)."""
    paths = archives()
    if not paths:
        return QUICK_JVM
    return f"{QUICK_JVM} {QUIET} -XX:SharedArchiveFile={paths[role]}"


def build(timeout: float = 300) -> dict[str, str] | None:
    """The archives, built now if missing (one application, ~35 s on 2 cores); None,
    with a line on stderr saying why, where they cannot be. One build at a time per
    JDK and pyspark (a lock file beside them): a second caller waits for the first's
    archives (``tests/run-all.sh`` starts the builds while the unit tests run)."""
    found = archives()
    if found:
        return found
    k = key()
    if k is None:
        return None
    os.makedirs(cache_root(), exist_ok=True)
    with open(os.path.join(cache_root(), f"{k}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # bounded: the holder's build ends within its timeout
        return archives() or _dump_into(k, timeout)


def _dump_into(k: str, timeout: float) -> dict[str, str] | None:
    work = tempfile.mkdtemp(prefix=f"{k}.", dir=cache_root())
    env = {k_: v for k_, v in os.environ.items() if k_ not in ("SPARK_CONF_DIR", "PYSPARK_SUBMIT_ARGS")}
    try:
        done = subprocess.run(
            [sys.executable, "-m", "tests.support.cds", "dump", work],
            env=env, capture_output=True, text=True, timeout=timeout,
            cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
        )  # fmt: skip
        written = all(os.path.isfile(os.path.join(work, f"{r}.jsa")) for r in ROLES)
        if done.returncode != 0 or not written:
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            print(f"tests/support/cds.py: no class-data archives (exit {done.returncode}): {' | '.join(tail)}",
                  file=sys.stderr)  # fmt: skip
            return None
        with open(os.path.join(work, SOURCE), "w") as f:
            f.write(_pyspark_jars() or "")
        os.rename(work, os.path.join(cache_root(), k))
        prune()
        return archives()
    except subprocess.TimeoutExpired:
        print(f"tests/support/cds.py: building the class-data archives took over {timeout:.0f} s", file=sys.stderr)
        return None
    finally:
        shutil.rmtree(work, ignore_errors=True)


def prune(now: float | None = None) -> list[str]:
    """Remove what no test run can use any more: the archives (and lock file) of each key
    whose pyspark jars directory is gone, and a killed build's work directory; the paths
    removed. Archives of builds before :data:`SOURCE` was written are kept (nothing says
    where they came from)."""
    root = cache_root()
    now = time.time() if now is None else now
    removed = []
    try:
        entries = list(os.scandir(root))
    except OSError:
        return removed
    for e in entries:
        if not e.is_dir(follow_symlinks=False):
            continue
        if "." in e.name:  # KEY.xxxx: a build's work directory
            try:
                gone = now - e.stat(follow_symlinks=False).st_mtime > STALE_WORK
            except FileNotFoundError:  # its build ended (or another prune removed it) since the scan
                continue
        else:
            try:
                with open(os.path.join(e.path, SOURCE)) as f:
                    jars = f.read().strip()
            except OSError:
                continue
            gone = not jars or not os.path.isdir(jars)
        if gone:
            shutil.rmtree(e.path, ignore_errors=True)
            if "." not in e.name:
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(root, f"{e.name}.lock"))
            removed.append(e.path)
    return removed


def _same(batches):
    yield from batches


def dump(directory: str) -> None:
    """One application whose JVMs write their archives into ``directory`` at exit: the
    kinds of work the tests' applications do (SQL with a shuffle, Python and Arrow UDFs,
    pandas both ways, a barrier stage), so that their classes are in the archives."""
    import pandas as pd
    from pyspark import BarrierTaskContext
    from pyspark.sql import SparkSession

    def opts(role: str) -> str:
        return f"{QUICK_JVM} {QUIET} -XX:ArchiveClassesAtExit={os.path.join(directory, role + '.jsa')}"

    os.environ["PYSPARK_PYTHON"] = sys.executable  # the Python of the UDFs' workers

    spark = (
        SparkSession.builder.master("local-cluster[1,1,1024]")
        .appName("spark-dask-tests-cds")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.executorEnv.PYSPARK_PYTHON", sys.executable)
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.driver.extraJavaOptions", opts("driver"))
        .config("spark.executor.extraJavaOptions", opts("executor"))
        .getOrCreate()
    )
    sc = spark.sparkContext
    sc.setLogLevel("ERROR")
    sc.setJobGroup("cds", "class-data archive", interruptOnCancel=True)
    sc.parallelize(range(100), 2).map(lambda x: x + 1).sum()
    sc.parallelize(range(1), 1).barrier().mapPartitions(lambda it: [BarrierTaskContext.get().partitionId()]).collect()
    spark.range(1000).selectExpr("id % 7 AS k", "id").groupBy("k").count().collect()
    frame = spark.createDataFrame(pd.DataFrame({"a": [1, 2, 3], "s": ["x", "y", "z"]}))
    frame.toPandas()
    frame.mapInArrow(_same, frame.schema).collect()
    with tempfile.TemporaryDirectory() as data:
        frame.write.parquet(os.path.join(data, "t"))
        spark.read.parquet(os.path.join(data, "t")).count()
    spark.stop()


if __name__ == "__main__":
    if sys.argv[1:2] == ["dump"] and len(sys.argv) == 3:
        dump(sys.argv[2])
    elif sys.argv[1:] == ["build"]:
        sys.exit(0 if build() else 1)
    elif sys.argv[1:] == ["prune"]:
        for path in prune():
            print(f"removed {path}")
    else:
        sys.exit("usage: python -m tests.support.cds build | prune | dump DIR")
