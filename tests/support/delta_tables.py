"""Small Delta tables written the way Databricks writes them, for the tests of a Delta reader.

Delta Lake's Spark connector (Delta 3.3.2 on Spark 3.5, tests/support/jars.py's ``delta-3.5``;
Delta 4.0.1 on Spark 4.0, ``delta-4.0``) writes each table with SQL or the DataFrame writer
on table paths (``delta.`/path```, no metastore), a few commits each, tens to a few
hundred rows. A reader under test must return exactly what Spark returns for every
version (``versionAsOf``) and for the recorded timestamps (``timestampAsOf``). A few variants are made from Spark's output by
rewriting its ``_delta_log`` (no Spark), for log features Delta 3.3.2 does not write.

Each ``write_*`` function takes ``(spark, base_dir)``, writes under ``base_dir/<name>``
(replacing an earlier table of that name) and returns a :class:`Table`; the variants take
the :class:`Table` they are made from. :func:`write_all` writes them all::

    .venv35/bin/python -m tests.support.delta_tables /tmp/delta-tables

writes everything there and prints, per table and version, the log's actions, the
deletion vectors' storage types, the checkpoint files and Spark's row count.

Tables
------
cm_name_dv
    Column mapping ``name``, deletion vectors, classic checkpoints every 2 commits,
    partitioned by ``part`` (then renamed ``region``). Every common type: long, int,
    double, string, decimal(12,2), date, timestamp, timestamp_ntz, array<int>,
    struct<a:int,b:string>, map<string,int>, with nulls; timestamps written as INT96 with
    far values (years 0001, 1900 and 9999, written without calendar rebasing:
    ``CORRECTED``). Commits: CTAS, DELETE (DVs), UPDATE (DVs and new files), MERGE
    (update, delete and insert; DVs), RENAME COLUMN, DROP COLUMN, RENAME of the partition
    column, OPTIMIZE (its files written after the renames and the drop).
cm_id_v2_clustered
    Column mapping ``id`` (Parquet field ids), v2 checkpoints (``checkpointPolicy=v2``,
    every 2 commits, with sidecar files), deletion vectors, liquid clustering
    (``CLUSTER BY (k)``), microsecond timestamps. Commits: CTAS, DELETE, UPDATE, MERGE,
    RENAME COLUMN, DROP of a nested field, OPTIMIZE (clustering).
plain_partitioned
    No table feature (protocol 1/2), hive-style directories over ``p_int`` (int) and
    ``p_str`` (string, with a null partition value); 8 data files whose ``x`` ranges do
    not overlap, so ``x > N`` skips files on their stats. Commits: CTAS, append, DELETE
    (copy on write: one file rewritten).
dv
    Deletion vectors only (no column mapping), two data files; two DELETEs.
dv_inline
    :func:`inline_dv_variant` of ``dv``: every deletion vector inline in the log
    (``storageType "i"``, Z85 of the bitmap), the ``.bin`` files removed.
dv_absolute
    :func:`absolute_dv_variant` of ``dv``: every deletion vector by absolute URI
    (``storageType "p"``).
future_reader_feature
    A small deletion-vector table whose last commit (written here, not by Spark) is a
    ``protocol`` action naming the unknown reader feature ``someFutureFeature``: a reader
    must refuse that version (Spark does); the earlier versions stay readable by Spark.
type_widening
    ``delta.enableTypeWidening`` (Delta 3.3.2 lists the feature ``typeWidening-preview``):
    a SMALLINT column widened to INT, rows inserted before and after. Delta 3.3.2 on
    Spark 3.5 refuses INT -> BIGINT and decimal widening; Delta 4.0.1 on Spark 4.0 (the
    feature ``typeWidening``) widens ``id`` INT -> BIGINT and ``dec`` DECIMAL(5,2) ->
    DECIMAL(10,4) too.

:class:`Table` records, per table, all its versions and, for versions with a later one,
an ISO timestamp (UTC) strictly between that commit and the next (both the commit file's
modification time, which Delta's ``timestampAsOf`` uses, and ``commitInfo.timestamp``).
Spark runs with ``spark.sql.session.timeZone=UTC``, as Databricks clusters do.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import itertools
import json
import os
import re
import shutil
import sys
import time
import urllib.parse

import fsspec

from spark_dask.delta import dv as dvs
from tests.support.jars import JARS, delta_group, require
from tests.support.spark import PYSPARK_VERSION, SharedSpark, make_spark, stop_spark

DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"

# Spark 3.5 refuses to write dates before 1582-10-15 and timestamps before 1900 without a
# rebase mode (EXCEPTION); CORRECTED writes them as they are (proleptic Gregorian), as
# Spark 4 does by default.
NO_REBASE = {
    "spark.sql.parquet.datetimeRebaseModeInWrite": "CORRECTED",
    "spark.sql.parquet.int96RebaseModeInWrite": "CORRECTED",
}

FUTURE_FEATURE = "someFutureFeature"


@dataclasses.dataclass
class Table:
    """A table written here: its name, absolute path, every version it has, and ISO
    timestamps that ``timestampAsOf`` resolves to the version they map from."""

    name: str
    path: str
    versions: list[int]
    timestamps: dict[int, str] | None
    notes: str


def delta_jars_group() -> str:
    """tests/support/jars.py's group of Delta Lake's Spark connector for the running
    pyspark's line (``delta-3.5``, ``delta-4.0``); a skip on another (the newest pyspark,
    for which no Delta release is pinned)."""
    import pytest

    group = delta_group(PYSPARK_VERSION)
    if group is None:
        lines = ", ".join(g.removeprefix("delta-") for g in JARS if g.startswith("delta-"))
        message = f"tests/support/jars.py pins Delta Lake's jars for Spark {lines} only (pyspark {PYSPARK_VERSION})"
        pytest.skip(message)
    return group


def delta_conf(**conf) -> dict[str, str]:
    """The confs of a classic SparkSession with Delta Lake's Spark connector for the
    running pyspark (tests/support/jars.py's ``delta-3.5`` or ``delta-4.0``:
    :func:`delta_jars_group`); ``conf`` adds to or overrides them (keys with dots:
    ``delta_conf(**{"spark.x": "y"})``). Spark's own defaults stay: ANSI mode off on 3.5,
    on on 4.0 (as on Databricks 17.3 LTS)."""
    return {
        "spark.jars": ",".join(require(delta_jars_group())),
        "spark.sql.extensions": DELTA_EXTENSION,
        "spark.sql.catalog.spark_catalog": DELTA_CATALOG,
        "spark.sql.session.timeZone": "UTC",
        # log replay of these tiny tables in 2 tasks, not 50: halves each command's time
        "spark.databricks.delta.snapshotPartitions": "2",
        "spark.sql.shuffle.partitions": "2",
        # MERGE reads its (deterministic) source twice instead of caching it first
        "spark.databricks.delta.merge.materializeSource": "none",
        # tens of rows: interpreting beats compiling each of Delta's many small plans
        # (Janino under C1): write_all in 50 s instead of 65 on 2 cores
        "spark.sql.codegen.wholeStage": "false",
        "spark.sql.codegen.factoryMode": "NO_CODEGEN",
        # Delta's log store for the dbfs: scheme that tests/spark/test_delta_write.py mounts
        # (Databricks brings its own for DBFS): read from the application's conf only
        "spark.delta.logStore.dbfs.impl": "io.delta.storage.LocalLogStore",
        **conf,
    }


def spark_with_delta(**conf):
    """A classic SparkSession on ``local-cluster[2,1,1024]`` with Delta Lake's Spark
    connector (:func:`delta_conf`, ``conf`` added)."""
    return make_spark(SharedSpark.MASTER, **delta_conf(**conf))


# The Delta session the test modules share (tests/conftest.py's ``delta_spark``): one
# application for tests/spark/test_delta_read.py, test_delta_stores.py and
# test_delta_filters.py, which leave it as they found it.
DELTA_SPARK = SharedSpark(SharedSpark.MASTER, delta_conf)


# --- the log, read as files -----------------------------------------------------------


def log_dir(path: str) -> str:
    return os.path.join(path, "_delta_log")


def commit_path(path: str, version: int) -> str:
    return os.path.join(log_dir(path), f"{version:020d}.json")


def log_versions(path: str) -> list[int]:
    """The versions whose commit files are in the log."""
    names = os.listdir(log_dir(path))
    return sorted(int(n[:20]) for n in names if re.fullmatch(r"\d{20}\.json", n))


def read_commit(path: str, version: int) -> list[dict]:
    with open(commit_path(path, version), encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def latest_metadata(path: str, version: int | None = None) -> dict:
    """The ``metaData`` action in force at ``version`` (default: the latest)."""
    versions = [v for v in log_versions(path) if version is None or v <= version]
    for v in reversed(versions):
        for action in read_commit(path, v):
            if "metaData" in action:
                return action["metaData"]
    raise LookupError(f"no metaData action in {path} up to version {version}")


def physical_names(path: str, version: int | None = None) -> dict[str, tuple[str, int | None]]:
    """Top-level column name -> (physical name, field id) under column mapping."""
    schema = json.loads(latest_metadata(path, version)["schemaString"])
    out = {}
    for field in schema["fields"]:
        meta = field.get("metadata", {})
        out[field["name"]] = (
            meta.get("delta.columnMapping.physicalName", field["name"]),
            meta.get("delta.columnMapping.id"),
        )
    return out


def data_files(path: str) -> list[str]:
    """Every data file some commit added (relative paths, as the log has them)."""
    files = []
    for v in log_versions(path):
        files += [a["add"]["path"] for a in read_commit(path, v) if "add" in a]
    return files


def _mtime_ms(file: str) -> int:
    return os.stat(file).st_mtime_ns // 1_000_000


def _commit_info_ms(path: str, version: int) -> int | None:
    for action in read_commit(path, version):
        if "commitInfo" in action:
            info = action["commitInfo"]
            return info.get("inCommitTimestamp", info.get("timestamp"))
    return None


def commit_timestamps(path: str) -> dict[int, str]:
    """Version -> an ISO timestamp (UTC, milliseconds) strictly after that commit and
    before the next one, for every version with a next one whose gap allows it. "After"
    and "before" hold for both the commit file's modification time (Delta's commit
    timestamp without in-commit timestamps) and ``commitInfo.timestamp``."""
    out = {}
    for v, width in commit_windows(path).items():
        if width >= 2:
            ms = _window_start(path, v) + width // 2
            out[v] = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.timezone.utc).isoformat(
                timespec="milliseconds"
            )
    return out


def _window_start(path: str, version: int) -> int:
    return max(t for t in (_mtime_ms(commit_path(path, version)), _commit_info_ms(path, version)) if t is not None)


def commit_windows(path: str) -> dict[int, int]:
    """Version -> how many ms :func:`commit_timestamps`' window for it spans."""
    versions = log_versions(path)
    out = {}
    for v, nxt in itertools.pairwise(versions):
        high = min(t for t in (_mtime_ms(commit_path(path, nxt)), _commit_info_ms(path, nxt)) if t is not None)
        out[v] = high - _window_start(path, v)
    return out


def _table(name: str, path: str, notes: str) -> Table:
    """The :class:`Table` at ``path``; one of its versions must have a timestamp window
    of a second or more (a DML command's own run time, or :func:`_ticks`)."""
    windows = commit_windows(path)
    if windows and max(windows.values()) < 1000:
        raise AssertionError(f"{path}: no version has a timestamp window of 1 s: {windows}")
    return Table(name, path, log_versions(path), commit_timestamps(path) or None, notes)


def _fresh(base_dir: str, name: str) -> str:
    """``base_dir/name``, empty: an earlier Delta table there is removed, anything else
    refused."""
    path = os.path.abspath(os.path.join(base_dir, name))
    if os.path.exists(path):
        if not os.path.isdir(log_dir(path)):
            raise FileExistsError(f"{path} exists and is not a Delta table: not replacing it")
        shutil.rmtree(path)
    os.makedirs(base_dir, exist_ok=True)
    return path


@contextlib.contextmanager
def _spark_conf(spark, conf: dict):
    """Set session confs for the block, then put back what was there."""
    old = {k: spark.conf.get(k, None) for k in conf}
    for k, v in conf.items():
        spark.conf.set(k, v)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)


def _ticks() -> None:
    """The one pause of a table whose second commit is quick (a DELETE, UPDATE or MERGE
    takes over a second itself): a timestamp window wide enough for any reader."""
    time.sleep(1.1)


# --- Z85 (Delta's Base85Codec) --------------------------------------------------------

Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"


def z85_encode(data: bytes) -> str:
    """Z85 of ``data`` zero-padded to a multiple of 4 bytes (each 4 bytes big-endian ->
    5 characters, most significant first)."""
    data = data + b"\0" * (-len(data) % 4)
    out = []
    for i in range(0, len(data), 4):
        value = int.from_bytes(data[i : i + 4], "big")
        chunk = []
        for _ in range(5):
            value, digit = divmod(value, 85)
            chunk.append(Z85[digit])
        out.append("".join(reversed(chunk)))
    return "".join(out)


# --- deletion vectors -----------------------------------------------------------------


def dv_file(table_path: str, dv: dict) -> str:
    """The ``.bin`` file of an on-disk deletion vector (storage type ``u`` or ``p``)."""
    return dvs.dv_file(dv, table_path)  # a "p" one's URI decoded to a local path there


def dv_bitmap(table_path: str, dv: dict) -> bytes:
    """The serialized bitmap of an on-disk deletion vector (size and CRC-32 checked)."""
    return dvs.read_stored(fsspec.filesystem("file"), dv_file(table_path, dv), dv)


def _rewrite_dvs(src: Table, name: str, base_dir: str, rewrite) -> str:
    """Copy ``src``'s directory to ``base_dir/name`` (modification times kept, so the
    timestamps stay valid) and apply ``rewrite(dv) -> dv`` to every deletion vector of
    its commits' add and remove actions."""
    path = _fresh(base_dir, name)
    shutil.copytree(src.path, path, copy_function=shutil.copy2)
    for v in log_versions(path):
        actions = read_commit(path, v)
        changed = False
        for action in actions:
            for kind in ("add", "remove"):
                dv = action.get(kind, {}).get("deletionVector")
                if dv:
                    action[kind]["deletionVector"] = rewrite(dv)
                    changed = True
        if changed:
            file = commit_path(path, v)
            stat = os.stat(file)
            with open(file, "w", encoding="utf-8") as f:
                f.write("".join(json.dumps(a, separators=(",", ":")) + "\n" for a in actions))
            os.utime(file, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    for name_ in os.listdir(log_dir(path)):
        if name_.endswith(".crc") or ".checkpoint." in name_ or name_ == "_last_checkpoint":
            os.remove(os.path.join(log_dir(path), name_))  # they would hold the old descriptors
    return path


def inline_dv_variant(src: Table, base_dir: str, name: str = "dv_inline") -> Table:
    """``src`` with every deletion vector inline in the log (``storageType "i"``,
    ``pathOrInlineDv`` the Z85 of the bitmap, no ``offset``); the ``.bin`` files are
    removed from the copy, so a reader that reads one fails."""

    def inline(dv: dict) -> dict:
        bitmap = dv_bitmap(src.path, dv)
        out = {"storageType": "i", "pathOrInlineDv": z85_encode(bitmap), "sizeInBytes": len(bitmap)}
        return {**out, **{k: dv[k] for k in ("cardinality", "maxRowIndex") if k in dv}}

    path = _rewrite_dvs(src, name, base_dir, inline)
    for root, _, files in os.walk(path):
        for f in files:
            if f.startswith("deletion_vector_") and f.endswith(".bin"):
                os.remove(os.path.join(root, f))
    return Table(name, path, log_versions(path), src.timestamps,
                 f"{src.name} with inline deletion vectors (storageType i), no .bin files")  # fmt: skip


def absolute_dv_variant(src: Table, base_dir: str, name: str = "dv_absolute") -> Table:
    """``src`` with every deletion vector named by the absolute URI of its ``.bin`` file
    in the copy (``storageType "p"``, ``file:/...`` as Hadoop writes local paths)."""
    target = os.path.abspath(os.path.join(base_dir, name))

    def absolute(dv: dict) -> dict:
        rel = os.path.relpath(dv_file(src.path, dv), src.path)
        uri = "file:" + urllib.parse.quote(os.path.join(target, rel))
        return {**dv, "storageType": "p", "pathOrInlineDv": uri}

    path = _rewrite_dvs(src, name, base_dir, absolute)
    return Table(name, path, log_versions(path), src.timestamps,
                 f"{src.name} with absolute-path deletion vectors (storageType p)")  # fmt: skip


# --- cm_name_dv -----------------------------------------------------------------------


def _wide_select(lo: int, hi: int, parts: int = 2) -> str:
    """Rows ``lo <= id < hi`` with every common type, nulls and far dates/timestamps."""
    return f"""
    SELECT
      CAST(id AS BIGINT) AS id,
      CAST(IF(id % 11 = 3, NULL, id * 37 - 1000) AS INT) AS i,
      IF(id % 13 = 4, NULL, id / 8.0D - 2.5D) AS d,
      IF(id % 12 = 5, NULL, concat('s', id)) AS s,
      CAST(IF(id % 14 = 6, NULL, IF(id = 7, 9999999999.99BD, id * 12.34BD - 100)) AS DECIMAL(12,2)) AS dec,
      CASE id % 20 WHEN 0 THEN DATE'0001-01-01' WHEN 1 THEN DATE'9999-12-31'
        WHEN 2 THEN DATE'1900-01-01' WHEN 3 THEN NULL
        ELSE date_add(DATE'2024-02-27', CAST(id AS INT)) END AS dt,
      CASE id % 20 WHEN 0 THEN make_timestamp(1, 1, 1, 0, 0, 0, 'UTC')
        WHEN 1 THEN make_timestamp(9999, 12, 31, 23, 59, 59.999999, 'UTC')
        WHEN 2 THEN make_timestamp(1900, 1, 1, 0, 0, 0, 'UTC') WHEN 4 THEN NULL
        ELSE make_timestamp(2024, 3, 1 + id % 28, id % 24, id % 60, id % 60 + 0.654321, 'UTC') END AS ts,
      CASE id % 20 WHEN 0 THEN make_timestamp_ntz(1, 1, 1, 0, 0, 0)
        WHEN 1 THEN make_timestamp_ntz(9999, 12, 31, 23, 59, 59.999999)
        WHEN 2 THEN make_timestamp_ntz(1900, 1, 1, 12, 0, 0) WHEN 5 THEN NULL
        ELSE make_timestamp_ntz(2024, 3, 1 + id % 28, id % 24, id % 60, id % 60 + 0.123456) END AS ntz,
      CASE id % 9 WHEN 0 THEN NULL WHEN 1 THEN CAST(array() AS ARRAY<INT>)
        WHEN 2 THEN array(1, NULL, 3) ELSE array(CAST(id AS INT), CAST(id * 2 AS INT)) END AS arr,
      IF(id % 8 = 0, NULL, named_struct('a', CAST(IF(id % 8 = 1, NULL, id) AS INT),
                                        'b', IF(id % 3 = 0, NULL, concat('b', id)))) AS st,
      CASE id % 10 WHEN 0 THEN NULL WHEN 1 THEN CAST(map() AS MAP<STRING,INT>)
        ELSE map('k', CAST(id AS INT), 'n', CAST(NULL AS INT)) END AS m,
      CASE WHEN id % 10 = 9 THEN NULL WHEN id % 3 = 0 THEN 'a' WHEN id % 3 = 1 THEN 'b' ELSE 'c' END AS part
    FROM range({lo}, {hi}, 1, {parts})"""


def parquet_physical_types(table_path: str, file: str) -> dict[str, str]:
    """Top-level Parquet column (physical name) -> its leaf's physical type, of one data
    file (first leaf for nested columns)."""
    import pyarrow.parquet as pq

    schema = pq.ParquetFile(os.path.join(table_path, urllib.parse.unquote(file))).schema
    out = {}
    for i in range(len(schema)):
        column = schema.column(i)
        out.setdefault(column.path.split(".")[0], column.physical_type)
    return out


def write_cm_name_dv(spark, base_dir: str) -> Table:
    """Column mapping ``name`` + deletion vectors + classic checkpoints every 2 commits,
    partitioned, INT96 timestamps (the Parquet footers are checked)."""
    path = _fresh(base_dir, "cm_name_dv")
    t = f"delta.`{path}`"
    conf = {**NO_REBASE, "spark.sql.parquet.outputTimestampType": "INT96"}
    with _spark_conf(spark, conf):
        spark.sql(f"""CREATE TABLE {t} USING delta PARTITIONED BY (part)
            TBLPROPERTIES ('delta.columnMapping.mode' = 'name', 'delta.enableDeletionVectors' = 'true',
                           'delta.checkpointInterval' = '2')
            AS {_wide_select(0, 60)}""")  # v0
        spark.sql(f"DELETE FROM {t} WHERE id % 7 = 0")  # v1
        spark.sql(f"UPDATE {t} SET d = d * 2, s = upper(s), part = 'c' WHERE id % 5 = 1")  # v2
        spark.sql(f"""MERGE INTO {t} AS t USING ({_wide_select(50, 70, 1)}) AS s ON t.id = s.id
            WHEN MATCHED AND s.id % 2 = 0 THEN UPDATE SET t.d = s.d + 1000, t.s = 'merged'
            WHEN MATCHED THEN DELETE
            WHEN NOT MATCHED THEN INSERT *""")  # v3
        spark.sql(f"ALTER TABLE {t} RENAME COLUMN s TO label")  # v4
        spark.sql(f"ALTER TABLE {t} DROP COLUMN i")  # v5
        spark.sql(f"ALTER TABLE {t} RENAME COLUMN part TO region")  # v6
        spark.sql(f"OPTIMIZE {t}")  # v7: its files are written without i, under the new names
    ts_column = physical_names(path, 0)["ts"][0]
    types = {parquet_physical_types(path, f)[ts_column] for f in data_files(path)}
    if types != {"INT96"}:
        raise AssertionError(f"{path}: column ts has Parquet physical types {types}, not INT96")
    notes = ("v0 CTAS 60 rows; v1 DELETE (DVs); v2 UPDATE (DVs + new files, rows moved to part c); "
             "v3 MERGE update/delete/insert; v4 RENAME s->label; v5 DROP i; v6 RENAME part->region; "
             "v7 OPTIMIZE; ts is INT96 in every data file")  # fmt: skip
    return _table("cm_name_dv", path, notes)


# --- cm_id_v2_clustered ---------------------------------------------------------------


def _clustered_select(lo: int, hi: int, parts: int = 2) -> str:
    return f"""
    SELECT
      CAST(id AS BIGINT) AS id,
      CAST(id % 5 AS INT) AS k,
      IF(id % 7 = 3, NULL, id * 1.25D) AS v,
      IF(id % 9 = 4, NULL, concat('r', id)) AS s,
      CASE id % 15 WHEN 0 THEN make_timestamp(1, 1, 1, 0, 0, 0, 'UTC')
        WHEN 1 THEN make_timestamp(9999, 12, 31, 23, 59, 59.999999, 'UTC')
        WHEN 2 THEN make_timestamp(1899, 12, 31, 23, 59, 59.000001, 'UTC') WHEN 3 THEN NULL
        ELSE make_timestamp(2023, 11, 1 + id % 28, id % 24, id % 60, id % 60 + 0.000007, 'UTC') END AS ts,
      IF(id % 6 = 1, NULL, array(concat('t', id % 4), IF(id % 5 = 0, NULL, 'x'))) AS tags,
      IF(id % 8 = 2, NULL, named_struct('x', CAST(id * 10 AS INT), 'y', IF(id % 4 = 0, NULL, concat('y', id)))) AS info
    FROM range({lo}, {hi}, 1, {parts})"""


def _v2_checkpoint_files(path: str) -> list[str]:
    names = os.listdir(log_dir(path))
    found = [n for n in names if re.fullmatch(r"\d{20}\.checkpoint\.[0-9a-f-]{36}\.(json|parquet)", n)]
    sidecars = os.path.join(log_dir(path), "_sidecars")
    if os.path.isdir(sidecars):
        found += [f"_sidecars/{n}" for n in os.listdir(sidecars) if not n.startswith(".")]
    return sorted(found)


def write_cm_id_v2_clustered(spark, base_dir: str) -> Table:
    """Column mapping ``id`` + v2 checkpoints + deletion vectors + liquid clustering,
    microsecond timestamps."""
    path = _fresh(base_dir, "cm_id_v2_clustered")
    t = f"delta.`{path}`"
    props = ("'delta.columnMapping.mode' = 'id', 'delta.checkpointPolicy' = 'v2', "
             "'delta.checkpointInterval' = '2', 'delta.enableDeletionVectors' = 'true'")  # fmt: skip
    notes = []
    with _spark_conf(spark, {**NO_REBASE, "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS"}):
        try:
            spark.sql(
                f"CREATE TABLE {t} USING delta CLUSTER BY (k) TBLPROPERTIES ({props}) AS {_clustered_select(0, 40)}"
            )
        except Exception as e:  # noqa: BLE001 - reported in the notes, the rest still written
            notes.append(f"CLUSTER BY refused: {_message(e)}")
            shutil.rmtree(path, ignore_errors=True)
            spark.sql(f"CREATE TABLE {t} USING delta TBLPROPERTIES ({props}) AS {_clustered_select(0, 40)}")
        spark.sql(f"DELETE FROM {t} WHERE id % 6 = 0")  # v1
        spark.sql(f"UPDATE {t} SET v = v + 0.5, s = concat(s, '+') WHERE k = 2")  # v2
        spark.sql(f"""MERGE INTO {t} AS t USING ({_clustered_select(30, 50, 1)}) AS s ON t.id = s.id
            WHEN MATCHED AND s.id % 3 = 0 THEN DELETE
            WHEN MATCHED THEN UPDATE SET *
            WHEN NOT MATCHED THEN INSERT *""")  # v3
        spark.sql(f"ALTER TABLE {t} RENAME COLUMN s TO label")  # v4
        spark.sql(f"ALTER TABLE {t} DROP COLUMN info.y")  # v5
        spark.sql(f"OPTIMIZE {t}")  # v6
    v2 = _v2_checkpoint_files(path)
    notes.append(f"v2 checkpoint files: {v2}" if v2 else "NO v2 checkpoint file in the log")
    notes.insert(0, "v0 CTAS 40 rows; v1 DELETE; v2 UPDATE; v3 MERGE delete/update/insert; "
                    "v4 RENAME s->label; v5 DROP info.y; v6 OPTIMIZE (clustering)")  # fmt: skip
    return _table("cm_id_v2_clustered", path, "; ".join(notes))


# --- plain_partitioned ----------------------------------------------------------------


def _plain_select(lo: int, hi: int) -> str:
    """10 rows per partition in one task, so one file per partition and disjoint ``x``."""
    p_int = "element_at(array(1, 1, 2, 2, 3, 1, 2, 3), CAST(id DIV 10 + 1 AS INT))"
    p_str = "element_at(array('a', 'b', 'a', NULL, 'b', 'a', NULL, NULL), CAST(id DIV 10 + 1 AS INT))"
    return f"""
    SELECT /*+ REPARTITION(1) */
      CAST(id AS INT) AS x,
      concat('y', lpad(CAST(id AS STRING), 3, '0')) AS y,
      IF(id % 4 = 1, NULL, id * 0.5D) AS z,
      CAST({p_int} AS INT) AS p_int,
      CAST({p_str} AS STRING) AS p_str
    FROM range({lo}, {hi}, 1, 1)"""


def write_plain_partitioned(spark, base_dir: str) -> Table:
    """No table features, hive-style partitions over an int and a string column (one
    value null), 8 data files with disjoint ``x`` ranges."""
    path = _fresh(base_dir, "plain_partitioned")
    t = f"delta.`{path}`"
    spark.sql(f"CREATE TABLE {t} USING delta PARTITIONED BY (p_int, p_str) AS {_plain_select(0, 40)}")  # v0
    _ticks()
    spark.sql(f"INSERT INTO {t} {_plain_select(40, 80)}")  # v1
    spark.sql(f"DELETE FROM {t} WHERE x BETWEEN 12 AND 14")  # v2: rewrites the x 10..19 file
    notes = ("v0 CTAS x 0..39 (4 files); v1 append x 40..79 (4 files); v2 DELETE x 12..14 "
             "(one file rewritten); file k holds x in [10k, 10k+9]")  # fmt: skip
    return _table("plain_partitioned", path, notes)


# --- dv -------------------------------------------------------------------------------


def write_dv(spark, base_dir: str) -> Table:
    """Deletion vectors, two data files, no other feature: the source of
    :func:`inline_dv_variant` and :func:`absolute_dv_variant`."""
    path = _fresh(base_dir, "dv")
    t = f"delta.`{path}`"
    spark.sql(f"""CREATE TABLE {t} USING delta TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')
        AS SELECT id, concat('g', id % 3) AS g, IF(id % 17 = 5, NULL, id * 0.25D) AS val
        FROM range(0, 200, 1, 2)""")  # v0
    spark.sql(f"DELETE FROM {t} WHERE id % 10 = 3")  # v1: a DV on each file
    _ticks()  # Delta 4.0's DELETE takes under a second here (3.3.2's over one)
    spark.sql(f"DELETE FROM {t} WHERE id BETWEEN 150 AND 180 OR id = 20")  # v2: both DVs replaced
    notes = "v0 CTAS 200 rows in 2 files; v1 DELETE id%10=3 (a DV per file); v2 DELETE 150..180 and 20 (both replaced)"
    return _table("dv", path, notes)


# --- future_reader_feature ------------------------------------------------------------


def write_future_reader_feature(spark, base_dir: str) -> Table:
    """A small deletion-vector table and a last commit, written here, whose ``protocol``
    adds the reader (and writer) feature ``someFutureFeature``."""
    path = _fresh(base_dir, "future_reader_feature")
    t = f"delta.`{path}`"
    spark.sql(f"""CREATE TABLE {t} USING delta TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')
        AS SELECT id, concat('n', id) AS name FROM range(0, 20, 1, 1)""")  # v0
    _ticks()
    spark.sql(f"INSERT INTO {t} SELECT id, concat('n', id) FROM range(20, 30, 1, 1)")  # v1
    protocol = next(
        a["protocol"] for v in reversed(log_versions(path)) for a in read_commit(path, v) if "protocol" in a
    )
    version = log_versions(path)[-1] + 1
    new = {
        "minReaderVersion": 3,
        "minWriterVersion": 7,
        "readerFeatures": sorted({*protocol.get("readerFeatures", []), FUTURE_FEATURE}),
        "writerFeatures": sorted({*protocol.get("writerFeatures", []), FUTURE_FEATURE}),
    }
    info = {"timestamp": int(time.time() * 1000), "operation": "UPGRADE PROTOCOL",
            "operationParameters": {}, "isBlindAppend": False, "engineInfo": "tests/support/delta_tables.py"}  # fmt: skip
    with open(commit_path(path, version), "x", encoding="utf-8") as f:
        f.write(json.dumps({"commitInfo": info}) + "\n" + json.dumps({"protocol": new}) + "\n")
    notes = f"v0 CTAS 20 rows; v1 append 10; v{version} protocol {new} (written by hand): refuse it"
    return _table("future_reader_feature", path, notes)


# --- type_widening --------------------------------------------------------------------


def write_type_widening(spark, base_dir: str) -> Table:
    """``delta.enableTypeWidening``: SMALLINT column ``c`` widened to INT, rows inserted
    before and after. Delta 3.3.2 on Spark 3.5 widens byte -> short -> int only: INT ->
    BIGINT and DECIMAL(5,2) -> DECIMAL(10,4) are refused (tried here, the refusals go
    to the notes); Delta 4.0.1 on Spark 4.0 accepts both (v1, v2)."""
    path = _fresh(base_dir, "type_widening")
    t = f"delta.`{path}`"
    spark.sql(f"""CREATE TABLE {t} USING delta TBLPROPERTIES ('delta.enableTypeWidening' = 'true')
        AS SELECT CAST(id AS INT) AS id, CAST(IF(id = 3, NULL, id * 1000 - 32000) AS SMALLINT) AS c,
                  CAST(id * 11.11BD AS DECIMAL(5,2)) AS dec
        FROM range(0, 10, 1, 1)""")  # v0
    _ticks()
    notes = ["v0 CTAS 10 rows c SMALLINT, dec DECIMAL(5,2)"]
    for change in ("id TYPE BIGINT", "dec TYPE DECIMAL(10,4)"):
        try:
            spark.sql(f"ALTER TABLE {t} ALTER COLUMN {change}")
            notes.append(f"ALTER COLUMN {change} accepted (v{log_versions(path)[-1]})")
        except Exception as e:  # noqa: BLE001 - Delta 3.3.2 refuses it (4.0.1 does not): the finding
            notes.append(f"ALTER COLUMN {change} refused: {_message(e)}")
    spark.sql(f"ALTER TABLE {t} ALTER COLUMN c TYPE INT")
    notes.append(f"v{log_versions(path)[-1]} ALTER COLUMN c TYPE INT")
    spark.sql(
        f"INSERT INTO {t} SELECT CAST(id AS INT), CAST(id * 100000 AS INT), CAST(id AS DECIMAL(5,2)) FROM range(10, 15, 1, 1)"
    )
    protocol = [a["protocol"] for v in log_versions(path) for a in read_commit(path, v) if "protocol" in a][-1]
    notes.append(f"v{log_versions(path)[-1]} append 5 rows past SMALLINT; protocol {protocol}")
    return _table("type_widening", path, "; ".join(notes))


def _message(e: Exception) -> str:
    """An exception's first line; for a Spark error the JVM exception's message (its
    ``str()`` can fail)."""
    origin = getattr(e, "_origin", None) or getattr(e, "java_exception", None)
    text = origin.toString() if origin is not None else str(e)
    return text.strip().splitlines()[0][:400]


def write_all(spark, base_dir: str, seconds: dict[str, float] | None = None) -> dict[str, Table]:
    """Every table of this module under ``base_dir``, by name; ``seconds`` (if given)
    gets how long each took."""
    tables = {}
    seconds = {} if seconds is None else seconds
    writers = [lambda write=write: write(spark, base_dir) for write in (
        write_cm_name_dv, write_cm_id_v2_clustered, write_plain_partitioned, write_dv,
        write_future_reader_feature, write_type_widening)]  # fmt: skip
    writers += [lambda: inline_dv_variant(tables["dv"], base_dir), lambda: absolute_dv_variant(tables["dv"], base_dir)]
    for writer in writers:
        started = time.monotonic()
        table = writer()
        tables[table.name] = table
        seconds[table.name] = time.monotonic() - started
    return tables


# --- __main__: write and describe -----------------------------------------------------


def checkpoint_files(path: str, version: int) -> list[str]:
    """The checkpoint files of ``version`` (classic, multi-part or v2) in the log."""
    prefix = f"{version:020d}.checkpoint"
    return sorted(n for n in os.listdir(log_dir(path)) if n.startswith(prefix))


def version_summary(path: str, version: int) -> str:
    """Actions by type, deletion vectors' storage types and checkpoint files of a version."""
    kinds: dict[str, int] = {}
    dvs: dict[str, int] = {}
    for action in read_commit(path, version):
        for kind, body in action.items():
            kinds[kind] = kinds.get(kind, 0) + 1
            dv = body.get("deletionVector") if isinstance(body, dict) else None
            if dv:
                key = f"{kind}:{dv['storageType']}"
                dvs[key] = dvs.get(key, 0) + 1
    parts = [" ".join(f"{n} {k}" for k, n in sorted(kinds.items()))]
    if dvs:
        parts.append("DVs " + " ".join(f"{n} {k}" for k, n in sorted(dvs.items())))
    if checkpoint_files(path, version):
        parts.append("checkpoint " + ", ".join(checkpoint_files(path, version)))
    if os.path.exists(os.path.join(log_dir(path), f"{version:020d}.crc")):
        parts.append("crc")
    return "; ".join(parts)


def _spark_count(spark, path: str, **options) -> str:
    try:
        return str(spark.read.format("delta").options(**options).load(path).count())
    except Exception as e:  # noqa: BLE001 - printed: the future-feature table's refusal
        return "refused: " + _message(e)


def describe(spark, table: Table) -> list[str]:
    """Lines describing ``table``: per version its log and Spark's row count, the
    recorded timestamps checked with ``timestampAsOf``."""
    lines = [f"{table.name}: {table.path}", f"  versions {table.versions}", f"  notes: {table.notes}"]
    try:
        lines.append(f"  columns (name: physical, id): {physical_names(table.path)}")
    except Exception as e:  # noqa: BLE001
        lines.append(f"  columns: {e}")
    lines.append(f"  _last_checkpoint: {_read_or_none(os.path.join(log_dir(table.path), '_last_checkpoint'))}")
    for v in table.versions:
        lines.append(
            f"  v{v}: {version_summary(table.path, v)}; Spark rows {_spark_count(spark, table.path, versionAsOf=v)}"
        )
    types = timestamp_physical_types(table.path)
    if types:
        lines.append(f"  Parquet physical types of the timestamp columns: {types}")
    history = _history_ms(spark, table.path)
    for v, ts in (table.timestamps or {}).items():
        by_ts = _spark_count(spark, table.path, timestampAsOf=ts)
        ms = int(datetime.datetime.fromisoformat(ts).timestamp() * 1000)
        if isinstance(history, str):
            where = f"DESCRIBE HISTORY {history}"
        else:
            inside = history[v] <= ms < history.get(v + 1, ms + 1)
            where = f"{'between' if inside else 'NOT between'} history's v{v} {history[v]} and v{v + 1} {history.get(v + 1)}"
        lines.append(f"  timestampAsOf {ts} -> rows {by_ts} (version {v}: {where})")
    return lines


def _history_ms(spark, path: str) -> dict[int, int] | str:
    """Version -> commit timestamp (ms) as ``DESCRIBE HISTORY`` has it, or why not."""
    try:
        rows = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").selectExpr("version", "unix_millis(timestamp)").collect()
    except Exception as e:  # noqa: BLE001
        return "refused: " + _message(e)
    return {int(v): int(ms) for v, ms in rows}


def timestamp_physical_types(path: str) -> dict[str, list[str]]:
    """Timestamp column -> the Parquet physical types it has in the table's data files
    (those still on disk)."""
    schema = json.loads(latest_metadata(path)["schemaString"])
    columns = {
        f["name"]: f.get("metadata", {}).get("delta.columnMapping.physicalName", f["name"])
        for f in schema["fields"]
        if f["type"] in ("timestamp", "timestamp_ntz")
    }
    found: dict[str, set[str]] = {name: set() for name in columns}
    for file in data_files(path):
        if not os.path.exists(os.path.join(path, urllib.parse.unquote(file))):
            continue
        types = parquet_physical_types(path, file)
        for name, physical in columns.items():
            if physical in types:
                found[name].add(types[physical])
    return {name: sorted(t) for name, t in found.items()}


def _read_or_none(file: str) -> str | None:
    if not os.path.exists(file):
        return None
    with open(file, encoding="utf-8") as f:
        return f.read().strip()


def check_dv_variants(spark, tables: dict[str, Table]) -> list[str]:
    """Spark's rows of every version of ``dv_inline`` and ``dv_absolute`` next to ``dv``'s."""
    lines = []
    for v in tables["dv"].versions:
        want = sorted(spark.read.format("delta").option("versionAsOf", v).load(tables["dv"].path).collect())
        for name in ("dv_inline", "dv_absolute"):
            try:
                got = sorted(spark.read.format("delta").option("versionAsOf", v).load(tables[name].path).collect())
                verdict = "same rows" if got == want else f"DIFFERENT rows ({len(got)} vs {len(want)})"
            except Exception as e:  # noqa: BLE001 - what Spark says is the finding
                verdict = "refused: " + _message(e)
            lines.append(f"{name} v{v}: {verdict} as dv ({len(want)} rows)")
    return lines


def main(argv: list[str]) -> int:
    base_dir = os.path.abspath(argv[0] if argv else "/tmp/delta-tables")
    spark = spark_with_delta()
    try:
        seconds: dict[str, float] = {}
        tables = write_all(spark, base_dir, seconds)
        took = sum(seconds.values())
        for table in tables.values():
            print("\n".join(describe(spark, table)), flush=True)
        print("\n".join(check_dv_variants(spark, tables)))
        print(
            f"wrote {len(tables)} tables under {base_dir} in {took:.1f} s: "
            + ", ".join(f"{name} {s:.1f} s" for name, s in seconds.items())
        )
    finally:
        stop_spark(spark)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
