"""Write a Delta Lake table from Dask and read it back with Dask, right, on a spark-dask cluster.

``spark_dask.write_delta`` writes 1000 rows partitioned by ``k`` through Spark's own
Delta writer (version 0), as on Databricks; then a ``DELETE`` (with
``--deletion-vectors``, Databricks' default on new tables in many workspaces, it marks
the rows in deletion vectors instead of rewriting the files). ``spark_dask.read_delta``
reads the latest version and version 0 (time travel) from the table's files on the
Dask workers, each file's deletion vector applied there, and both reads must equal
Spark's own read of those versions (row counts and sums per ``k``).

    python examples/delta_lake.py [--writer auto|spark|deltalake] [--jars JARS]
                                  [--deletion-vectors] [--master local-cluster[2,1,1024]]
                                  [--path DIR]

Writers (the output's first lines say which one ran):

- ``spark``: Delta Lake's Spark connector (``write_delta``). ``--jars`` (or
  ``$SPARK_DASK_DELTA_JARS``): the connector's jars, comma-separated (``delta-spark``
  and ``delta-storage``); without them ``spark.jars.packages`` fetches the release for
  this pyspark's Spark line from Maven Central (:func:`delta_connector`). Delta Lake
  names its Spark line: 3.3.x for Spark 3.5 (Scala 2.12, pip's pyspark 3.5), 4.0.x for
  Spark 4.0, and from 4.1 the artifact carries it (``delta-spark_4.1_2.13``,
  ``delta-spark_4.2_2.13``). There is no release for Spark 4.3 yet.
- ``deltalake``: the ``deltalake`` package (delta-rs) writes the same table, the same
  Delta log format, on a Spark without Delta's jars; the check is then against the
  pandas frames written.
- ``auto`` (default): ``spark`` when jars are given, on Databricks (Delta is part of the
  runtime) or when the active session has Delta's SQL extension; ``deltalake``
  otherwise.

A flag that would not act on the run is refused before Spark starts (exit status 2,
:func:`flag_problem`): ``--deletion-vectors`` with the deltalake writer (chosen or given:
its ``DELETE`` rewrites the files, it writes no deletion vectors) or on a table that is
there already, ``--jars`` with ``--writer deltalake``, ``--master`` or ``--jars`` when an
active session is used as it is.

Tested (tests/spark/test_delta_spark.py, tests/spark/test_examples.py): the Spark writer on pyspark
3.5.5 with Delta Lake 3.3.2 (``io.delta:delta-spark_2.12:3.3.2``), with and without
deletion vectors; the deltalake writer on the newest pyspark. docs/delta.md says what
``read_delta`` reads right and which path to take on Databricks.

On Databricks, point ``--path`` at the table's location that the workers can read: a
volume path (``/Volumes/<catalog>/<schema>/<volume>/table``) or cloud storage
(``s3://...``, ``abfss://...``, ``gs://...``) with ``storage_options`` for credentials;
a Unity Catalog table name reads through Spark (``read_delta("main.sales.orders")``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import warnings

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # local runs: executors' Python

DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"

# Spark line: Delta Lake's Spark connector for it on Maven Central (delta-storage comes
# with it through spark.jars.packages)
DELTA_SPARK = {
    (3, 5): "io.delta:delta-spark_2.12:3.3.2",
    (4, 0): "io.delta:delta-spark_2.13:4.0.1",
    (4, 1): "io.delta:delta-spark_4.1_2.13:4.4.0",
    (4, 2): "io.delta:delta-spark_4.2_2.13:4.4.0",
}

DELETE_WHERE = "x < 100"  # version 1: the rows it leaves are x >= 100
MASTER = "local-cluster[2,1,1024]"  # --master's default
JARS_ENV = "SPARK_DASK_DELTA_JARS"  # --jars' default


def spark_line(pyspark_version: str) -> tuple[int, int]:
    """``"3.5.5"`` → ``(3, 5)`` (``"4.1.0.dev1"`` → ``(4, 1)``)."""
    major, minor = pyspark_version.split(".")[:2]
    return int(major), int("".join(c for c in minor if c.isdigit()) or 0)


def delta_connector(pyspark_version: str) -> str | None:
    """The Maven coordinate of Delta Lake's Spark connector for this pyspark, or None
    where Delta Lake has no release for its Spark line."""
    return DELTA_SPARK.get(spark_line(pyspark_version))


def no_connector_message(pyspark_version: str) -> str:
    major, minor = spark_line(pyspark_version)
    newest = ".".join(map(str, max(DELTA_SPARK)))
    return f"no Delta Lake release for Spark {major}.{minor} yet: use --writer deltalake or pyspark {newest}"


def choose_writer(writer: str, jars: str | None, on_databricks: bool, session_extensions: str) -> str:
    """``auto``: Spark when it can write Delta (jars given, Databricks, or an active
    session with Delta's extension), the deltalake package otherwise."""
    if writer != "auto":
        return writer
    if jars or on_databricks or DELTA_EXTENSION in session_extensions:
        return "spark"
    return "deltalake"


def flag_problem(args, writer: str, fresh: bool, active: bool, on_databricks: bool) -> str | None:
    """What the command line asks that this run would not do, or None.

    ``writer``: the writer chosen (:func:`choose_writer`); ``fresh``: the table is not
    there yet (the example writes it); ``active``: a session is active (a notebook,
    Databricks), which the example uses as it is. ``args.master`` and ``args.jars`` are
    None unless given on the command line."""
    if args.deletion_vectors and writer != "spark":
        why = "" if args.writer == "deltalake" else (
            " (--writer auto chose it: no --jars or $" + JARS_ENV + ", not on Databricks, no Delta extension "
            "in an active session)"
        )  # fmt: skip
        return (
            f"--deletion-vectors needs the Spark writer: the deltalake package writes this table{why}, and its "
            "DELETE rewrites the files, it writes no deletion vectors. Give Delta Lake's jars (--jars) or "
            "--writer spark, or leave --deletion-vectors out"
        )
    if args.deletion_vectors and not fresh:
        return (
            f"--deletion-vectors acts when the example writes the table, and {args.path} holds one already "
            "(read as it is): give a --path without a table, or leave --deletion-vectors out"
        )
    if args.jars and writer == "deltalake":
        return "--jars loads Delta Lake's Spark connector, which --writer deltalake does not use: leave one out"
    given = [flag for flag, value in (("--master", args.master), ("--jars", args.jars)) if value]
    if active and given:
        where = "Databricks' session" if on_databricks else "the active Spark session"
        return f"{' and '.join(given)} cannot change {where}, which the example uses as it is: leave them out"
    return None


def build_session(args, writer: str, active, on_databricks: bool, extensions: str):
    """The active session (Databricks, a notebook) or a new one; with the Spark writer,
    a new one loads Delta's connector."""
    import pyspark
    from pyspark.sql import SparkSession

    if active is not None:
        if writer == "spark" and not on_databricks and DELTA_EXTENSION not in extensions:
            sys.exit(
                "the active Spark session has no Delta Lake extension: "
                f"start it with spark.sql.extensions={DELTA_EXTENSION}, or --writer deltalake"
            )
        return active, "Databricks Runtime" if on_databricks else "the active session's jars"
    builder = (
        SparkSession.builder.master(args.master or MASTER)
        .appName("spark-dask delta lake")
        # Spark's console progress bar (spark.ui.showConsoleProgress) would show the Dask
        # cluster's barrier stage, which runs as long as the cluster, as "[Stage 0:> (0 + 2) / 2]"
        # in front of every later line: Spark cannot leave one stage out of it, so it is off.
        .config("spark.ui.showConsoleProgress", "false")
    )
    source = ""
    # a small table on a small cluster: a few partitions for the shuffles and for Delta's
    # log state (200 and 50 by default, each a task)
    builder = builder.config("spark.sql.shuffle.partitions", "4").config(
        "spark.databricks.delta.snapshotPartitions", "2"
    )
    jars = args.jars or os.environ.get(JARS_ENV)
    if writer == "spark":
        if jars:
            builder = builder.config("spark.jars", jars)
            source = ", ".join(os.path.basename(j) for j in jars.split(","))
        else:
            coordinate = delta_connector(pyspark.__version__)
            if coordinate is None:
                sys.exit(no_connector_message(pyspark.__version__))
            builder = builder.config("spark.jars.packages", coordinate)
            source = f"{coordinate} from Maven Central"
        builder = builder.config("spark.sql.extensions", DELTA_EXTENSION).config(
            "spark.sql.catalog.spark_catalog", DELTA_CATALOG
        )
    return builder.getOrCreate(), source


def first_rows():
    """Version 0's rows: k = i % 4, x = i for i in 0..999."""
    import numpy as np
    import pandas as pd

    return pd.DataFrame({"k": np.arange(1000) % 4, "x": np.arange(1000, dtype="float64")})


def write_with_spark(spark, path: str, deletion_vectors: bool = False) -> None:
    """Version 0: 1000 rows from Dask, partitioned by k, by Spark's Delta writer
    (``write_delta``, on the running cluster); then a DELETE.

    With ``deletion_vectors`` (Databricks' default on new tables in many workspaces):
    version 1 enables them, and version 2's DELETE marks the rows in deletion vectors
    instead of rewriting the files."""
    import dask.dataframe as dd

    import spark_dask

    spark_dask.write_delta(dd.from_pandas(first_rows(), npartitions=2), path, partition_by="k")
    table = f"delta.`{path}`"
    if deletion_vectors:  # Databricks' default on new tables; a commit of its own
        spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    spark.sql(f"DELETE FROM {table} WHERE {DELETE_WHERE}")


def write_with_deltalake(path: str):
    """The same table with the deltalake package; returns the pandas frame of each version."""
    from deltalake import DeltaTable, write_deltalake

    first = first_rows()
    write_deltalake(path, first, partition_by=["k"])
    DeltaTable(path).delete(DELETE_WHERE)
    return {0: first, 1: first[first.x >= 100]}


def summary(frame) -> dict:
    """{k: (rows, sum of x)} of a pandas or Dask frame (Dask's is computed)."""
    grouped = frame.groupby("k").x.agg(["count", "sum"])
    if hasattr(grouped, "compute"):
        grouped = grouped.compute()
    return {int(k): (int(r["count"]), float(r["sum"])) for k, r in grouped.iterrows()}


def summary_of_spark(spark, path: str, version: int) -> dict:
    rows = (
        spark.read.format("delta")
        .option("versionAsOf", version)
        .load(path)
        .groupBy("k")
        .agg({"x": "sum", "*": "count"})
        .collect()
    )
    return {int(r["k"]): (int(r["count(1)"]), float(r["sum(x)"])) for r in rows}


def commit(path: str, version: int) -> list[dict]:
    """The actions of the version's commit (``_delta_log/<version>.json``)."""
    with open(os.path.join(path, "_delta_log", f"{version:020d}.json")) as f:
        return [json.loads(line) for line in f if line.strip()]


def log_actions(path: str, version: int) -> dict:
    """How many actions of each kind (add, remove, ...) the version's commit has."""
    counts: dict = {}
    for action in commit(path, version):
        for kind in action:
            counts[kind] = counts.get(kind, 0) + 1
    return counts


def files_with_deletion_vectors(path: str, version: int) -> int | None:
    """How many of the version's data files have a deletion vector (rows deleted in
    place), from the log's JSON commits 0..version; None where the log no longer has
    them all (cleaned up after a checkpoint)."""

    def key(action: dict) -> tuple:  # a file is its path and its deletion vector (the protocol)
        dv = action.get("deletionVector") or {}
        return action["path"], dv.get("storageType"), dv.get("pathOrInlineDv"), dv.get("offset")

    live: dict = {}
    for v in range(version + 1):
        try:
            actions = commit(path, v)
        except FileNotFoundError:
            return None
        for action in actions:  # a DELETE's commit may list the new add before the old remove
            if "add" in action:
                live[key(action["add"])] = action["add"]
            elif "remove" in action:
                live.pop(key(action["remove"]), None)
    return sum(1 for add in live.values() if add.get("deletionVector"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--master", default=None, help=f"a new session's master (default {MASTER})")
    parser.add_argument("--path", default=None, help="Delta table location (written if absent)")
    parser.add_argument("--writer", choices=["auto", "spark", "deltalake"], default="auto")
    parser.add_argument(
        "--jars", default=None, help=f"Delta Lake's Spark connector jars, comma-separated (default ${JARS_ENV})"
    )
    parser.add_argument(
        "--deletion-vectors",
        action="store_true",
        help="Spark writer: enable deletion vectors before the DELETE (Databricks' default)",
    )
    args = parser.parse_args()

    # pyspark 4.x warns (a FutureWarning) that it "does not yet fully support pandas >= 3.0.0"
    # when the session starts; pandas is not used through Spark here (the rows go to Spark
    # as Arrow batches), so that one warning is off, as in the quick start
    warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas", category=FutureWarning)
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    extensions = active.conf.get("spark.sql.extensions", "") if active is not None else ""
    on_databricks = bool(os.environ.get("DATABRICKS_RUNTIME_VERSION"))
    writer = choose_writer(args.writer, args.jars or os.environ.get(JARS_ENV), on_databricks, extensions)
    fresh = not (args.path and os.path.exists(os.path.join(args.path, "_delta_log")))
    problem = flag_problem(args, writer, fresh, active is not None, on_databricks)
    if problem:
        parser.error(problem)  # before Spark starts (and spark_dask is imported): exit status 2
    import numpy as np

    import spark_dask

    # without --path: a scratch directory, removed at the end
    scratch = None if args.path else tempfile.TemporaryDirectory(prefix="spark-dask-delta-")
    path = args.path or os.path.join(scratch.name, "events")
    spark, source = build_session(args, writer, active, on_databricks, extensions)
    spark.sparkContext.setLogLevel("ERROR")
    try:
        # one Dask worker: the other executor stays free for Spark's writes and reads
        with spark_dask.start(spark, n_workers=1) as client:
            written = None
            if fresh and writer == "spark":
                write_with_spark(spark, path, args.deletion_vectors)
                print(f"table written by Spark (Delta Lake's Spark connector, {source})")
            elif fresh:
                written = write_with_deltalake(path)
                print("table written by the deltalake package (no Delta jars on this Spark)")
            else:
                print(f"table {path} exists: read as it is")
            latest = max(int(n[:20]) for n in os.listdir(os.path.join(path, "_delta_log")) if n.endswith(".json"))
            actions = log_actions(path, latest)
            print(
                f"delta table {path}: version {latest}; its commit: "
                + ", ".join(f"{n} {kind}" for kind, n in sorted(actions.items()))
            )
            if fresh:  # the DELETE rewrote (or marked) files: the log says which it removed
                assert actions.get("remove"), actions
            marked = files_with_deletion_vectors(path, latest)
            if marked:
                print(
                    f"deletion vectors: {marked} files of version {latest} have them; read_delta applies "
                    "each on the worker that reads the file"
                )
            # the reference: Spark's own read of both versions when Spark has Delta, else the
            # frames written (or, for a table that was there, the deltalake package's read)
            if writer == "spark":
                want = {v: summary_of_spark(spark, path, v) for v in (latest, 0)}
                against = "Spark's read"
            elif written is not None:
                want = {v: summary(written[v]) for v in (latest, 0)}
                against = "the pandas frames written"
            else:
                from deltalake import DeltaTable

                want = {v: summary(DeltaTable(path, version=v).to_pandas()) for v in (latest, 0)}
                against = "the deltalake package's read"
            got = {v: summary(spark_dask.read_delta(path, version=v, via="files")) for v in (latest, 0)}
            for v in (latest, 0):
                assert sorted(got[v]) == sorted(want[v]), (v, got[v], want[v])
                for k in want[v]:
                    assert got[v][k][0] == want[v][k][0], (v, k, got[v], want[v])
                    assert np.isclose(got[v][k][1], want[v][k][1]), (v, k, got[v], want[v])
            rows = {v: sum(n for n, _ in got[v].values()) for v in got}
            sums = [round(got[latest][k][1], 1) for k in sorted(got[latest])]
            print(f"latest version: {rows[latest]} rows, sum per k {sums}")
            print(f"version 0 (time travel): {rows[0]} rows")
            print(f"Dask's reads equal {against} of versions {latest} and 0")
            n = len(client.scheduler_info()["workers"])
            print(f"read by {n} Dask worker{'s' if n != 1 else ''}")
    finally:
        if not on_databricks:
            spark.stop()
        if scratch is not None:
            scratch.cleanup()


if __name__ == "__main__":
    main()
