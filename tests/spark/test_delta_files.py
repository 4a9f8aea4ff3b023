"""spark_dask.read_delta's file reader without Spark: deletion vectors (file, inline,
absolute; portable and native bitmaps; corrupt ones refused), the log replay
(checkpoints, time travel by version and by timestamp, cleaned logs), the refusal of
features it does not implement, and filters that skip files. Tables written by the
deltalake package (the newest-pyspark environment has no Delta jars); deletion
vectors are added to their logs here, as the protocol describes them. Spark-written
tables: tests/spark/test_delta_spark.py."""

from __future__ import annotations

import json
import os
import struct
import sys
import uuid
import zlib

import dask
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import spark_dask
from spark_dask.delta import dv, features, log
from spark_dask.delta import read as delta_read

pytestmark = pytest.mark.core

from tests.support.delta_tables import z85_encode  # noqa: E402
from tests.support.extras import needs  # noqa: E402

deltalake = needs("deltalake", "examples")
pyroaring = needs("pyroaring", "delta")


def portable(rows) -> bytes:
    return struct.pack("<i", dv.PORTABLE_MAGIC) + pyroaring.BitMap64(rows).serialize()


def native(rows) -> bytes:
    rows = sorted(rows)
    buckets = max(r >> 32 for r in rows) + 1
    out = struct.pack("<ii", dv.NATIVE_MAGIC, buckets)
    for high in range(buckets):
        body = pyroaring.BitMap([r & 0xFFFFFFFF for r in rows if r >> 32 == high]).serialize()
        out += struct.pack("<i", len(body)) + body
    return out


def write_dv_file(directory: str, bitmaps: list[bytes], prefix: str = "") -> tuple[str, list[int]]:
    """A DV file as Delta writes one: version byte, then (BE size, bitmap, BE CRC-32)
    records. Returns its ``pathOrInlineDv`` and each bitmap's offset."""
    ident = uuid.uuid4()
    os.makedirs(os.path.join(directory, prefix), exist_ok=True)
    offsets, body = [], b"\x01"
    for bitmap in bitmaps:
        offsets.append(len(body))
        body += struct.pack(">i", len(bitmap)) + bitmap + struct.pack(">I", zlib.crc32(bitmap))
    with open(os.path.join(directory, prefix, f"deletion_vector_{ident}.bin"), "wb") as f:
        f.write(body)
    return prefix + z85_encode(ident.bytes), offsets


# ---------------------------------------------------------------------- deletion vectors
def test_z85_round_trip_and_uuid_paths():
    data = bytes(range(256)) * 3
    assert dv.z85_decode(z85_encode(data)) == data
    ident = uuid.uuid4()
    assert dv.relative_dv_path("ab" + z85_encode(ident.bytes)) == f"ab/deletion_vector_{ident}.bin"
    with pytest.raises(spark_dask.DeltaError, match="character"):
        dv.z85_decode("abc d")


@pytest.mark.parametrize("layout", [portable, native])
def test_bitmaps_in_both_layouts(layout):
    rows = [0, 3, 70000, 2**32 + 5, 2**33]  # across 32-bit buckets
    assert dv.bitmap_rows(layout(rows)).tolist() == rows
    with pytest.raises(spark_dask.DeltaError, match="magic number 7"):
        dv.bitmap_rows(struct.pack("<i", 7) + b"\0" * 8)


def test_stored_inline_and_absolute_deletion_vectors(tmp_path):
    import fsspec

    fs = fsspec.filesystem("file")
    root = str(tmp_path)
    name, offsets = write_dv_file(root, [portable([1, 2]), portable([0, 9, 10])], prefix="xy")
    second = {
        "storageType": "u",
        "pathOrInlineDv": name,
        "offset": offsets[1],
        "sizeInBytes": len(portable([0, 9, 10])),
        "cardinality": 3,
    }
    assert dv.deleted_rows(second, root, fs).tolist() == [0, 9, 10]
    absolute = {**second, "storageType": "p", "pathOrInlineDv": "file:" + os.path.join(root, dv.relative_dv_path(name))}
    assert dv.deleted_rows(absolute, "/elsewhere", fs).tolist() == [0, 9, 10]
    bitmap = portable([4, 5])
    inline = {"storageType": "i", "pathOrInlineDv": z85_encode(bitmap), "sizeInBytes": len(bitmap), "cardinality": 2}
    assert dv.deleted_rows(inline, root, fs).tolist() == [4, 5]
    assert dv.deleted_rows(None, root, fs).tolist() == []
    with pytest.raises(spark_dask.DeltaError, match="holds 3 rows where the log says 4"):
        dv.deleted_rows({**second, "cardinality": 4}, root, fs)
    with pytest.raises(spark_dask.DeltaError, match="corrupt"):
        dv.deleted_rows({**second, "offset": offsets[0]}, root, fs)  # the first DV's size


# ---------------------------------------------------------------------- tables
def frame(n: int, start: int = 0) -> pd.DataFrame:
    i = np.arange(start, start + n)
    return pd.DataFrame({"k": (i % 2).astype("int32"), "x": i.astype("int64"), "s": [f"v{j}" for j in i]})


def commit(root: str, actions: list[dict]) -> int:
    """Append a commit of these actions to the table's log; its version."""
    log_dir = os.path.join(root, "_delta_log")
    version = max(int(n[:20]) for n in os.listdir(log_dir) if n.endswith(".json")) + 1
    with open(os.path.join(log_dir, f"{version:020d}.json"), "x") as f:
        f.write("".join(json.dumps(a) + "\n" for a in actions))
    return version


def written_adds(root: str) -> dict[str, dict]:
    """The add actions of a table written by appends only (no removes), by path."""
    log_dir = os.path.join(root, "_delta_log")
    adds = {}
    for name in sorted(n for n in os.listdir(log_dir) if n.endswith(".json")):
        with open(os.path.join(log_dir, name)) as f:
            adds.update({a["add"]["path"]: a["add"] for a in map(json.loads, f) if "add" in a})
    return adds


def with_deletion_vectors(root: str, deleted: dict[str, list[int]], kind: str) -> int:
    """A DELETE in place, as Delta writes one: for each file, remove it and add it again
    with a DV (stored in a file, inline or at an absolute path); also turn the
    protocol to reader version 3 with the deletionVectors feature."""
    adds = written_adds(root)
    actions = [{"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["deletionVectors"],
                             "writerFeatures": ["deletionVectors"]}}]  # fmt: skip
    for path, rows in deleted.items():
        add = adds[path]
        bitmap = portable(rows)
        if kind == "i":
            descriptor = {"storageType": "i", "pathOrInlineDv": z85_encode(bitmap)}
        else:
            name, (offset,) = write_dv_file(root, [bitmap])
            descriptor = {"storageType": "u", "pathOrInlineDv": name, "offset": offset}
            if kind == "p":
                descriptor = {**descriptor, "storageType": "p",
                              "pathOrInlineDv": "file://" + os.path.join(root, dv.relative_dv_path(name))}  # fmt: skip
        descriptor.update(sizeInBytes=len(bitmap), cardinality=len(rows))
        actions.append({"remove": {"path": path, "dataChange": True, "deletionTimestamp": 1}})
        actions.append({"add": {**add, "deletionVector": descriptor}})
    return commit(root, actions)


def read(source, **kw) -> pd.DataFrame:
    with dask.config.set(scheduler="sync"):
        return spark_dask.read_delta(source, via="files", **kw).compute().sort_values("x").reset_index(drop=True)


@pytest.fixture
def table(tmp_path):
    root = str(tmp_path / "t")
    deltalake.write_deltalake(root, frame(10), partition_by=["k"])
    deltalake.write_deltalake(root, frame(10, 10), partition_by=["k"], mode="append")
    return root


def test_deletion_vectors_without_pyroaring_are_refused_before_the_graph(table, monkeypatch):
    """Issue 55, point 3: without pyroaring the read returned a DataFrame that failed on
    the workers with ModuleNotFoundError; now refused at once, naming the extra."""
    files = sorted(deltalake.DeltaTable(table).file_uris())
    v = with_deletion_vectors(table, {os.path.relpath(files[0], table): [0]}, "i")
    monkeypatch.setitem(sys.modules, "pyroaring", None)  # what a Python without it answers: ImportError
    with pytest.raises(spark_dask.DeltaError, match=r"has deletion vectors.*pip install 'spark-dask\[delta\]'"):
        spark_dask.read_delta(table, via="files")
    assert len(read(table, version=v - 1)) == 20  # no deletion vector: no pyroaring needed


@pytest.mark.parametrize("kind", ["u", "i", "p"])
def test_deletion_vectors_are_applied_on_the_workers(table, kind):
    files = sorted(deltalake.DeltaTable(table).file_uris())
    first = os.path.relpath(files[0], table)
    xs = pq.read_table(files[0]).column("x").to_pylist()
    v = with_deletion_vectors(table, {first: [0, 2]}, kind)
    got = read(table)
    want = sorted(set(range(20)) - {xs[0], xs[2]})
    assert got.x.tolist() == want
    assert len(read(table, version=v - 1)) == 20  # time travel: before the DELETE
    # deltalake's own Arrow path refuses such a table; dask-deltatable would return 20 rows


def test_types_and_partition_column(table):
    got = read(table)
    assert got.x.tolist() == list(range(20))
    assert got.s.tolist() == [f"v{i}" for i in range(20)]
    assert got.k.tolist() == [i % 2 for i in range(20)]
    assert str(got.x.dtype).startswith("int64") and str(got.k.dtype).startswith("int32")


def test_checkpoints_and_cleaned_logs(table):
    deltalake.write_deltalake(table, frame(5, 20), partition_by=["k"], mode="append")  # version 2
    deltalake.DeltaTable(table).create_checkpoint()
    deltalake.write_deltalake(table, frame(5, 25), partition_by=["k"], mode="append")  # version 3
    os.remove(os.path.join(table, "_delta_log", f"{0:020d}.json"))
    os.remove(os.path.join(table, "_delta_log", f"{1:020d}.json"))
    assert read(table).x.tolist() == list(range(30))
    assert read(table, version=2).x.tolist() == list(range(25))
    with pytest.raises(
        spark_dask.DeltaError, match="version 1 of the table can no longer be rebuilt: commit 0 is gone"
    ):
        spark_dask.read_delta(table, version=1, via="files")
    with pytest.raises(spark_dask.DeltaError, match="has no version 9 \\(its latest is 3\\)"):
        spark_dask.read_delta(table, version=9, via="files")


def test_time_travel_by_timestamp(table):
    log_dir = os.path.join(table, "_delta_log")
    for version, seconds in [(0, 1_700_000_000), (1, 1_700_000_100)]:
        os.utime(os.path.join(log_dir, f"{version:020d}.json"), (seconds, seconds))
    assert len(read(table, timestamp="2023-11-14 22:14:00")) == 10  # 1_700_000_040, between them
    assert len(read(table, timestamp="2023-11-14T22:15:00+00:00")) == 20
    with pytest.raises(spark_dask.DeltaError) as e:
        spark_dask.read_delta(table, timestamp="2001-01-01", via="files")
    assert str(e.value) == (  # the table named; the commit shown in the zone the time was taken in
        f"spark-dask: the Delta table {table} has no version as of 2001-01-01 (in the session time zone UTC): its "
        "earliest available commit is from 2023-11-14 22:13:20.000 UTC"
    )
    with pytest.raises(spark_dask.DeltaError, match="after the latest commit of the Delta table .* \\(version 1"):
        spark_dask.read_delta(table, timestamp="2030-01-01", via="files")


def test_filters_skip_files_and_filter_rows(table):
    with dask.config.set(scheduler="sync"):
        everything = spark_dask.read_delta(table, via="files")
        one_partition = spark_dask.read_delta(table, via="files", filters=[("k", "==", 1)])
        by_stats = spark_dask.read_delta(table, via="files", filters=[("x", ">=", 10)], columns=["s"])
        either = spark_dask.read_delta(table, via="files", filters=[[("x", "<", 3)], [("s", "==", "v19")]])
        assert everything.npartitions == 4 and one_partition.npartitions == 2 and by_stats.npartitions == 2
        assert sorted(one_partition.compute().x) == list(range(1, 20, 2))
        assert sorted(by_stats.compute().s) == sorted(f"v{i}" for i in range(10, 20))
        assert list(by_stats.columns) == ["s"]
        assert sorted(either.compute().x) == [0, 1, 2, 19]
    with pytest.raises(spark_dask.PlanError, match="filter on 'nope', which is not a column"):
        spark_dask.read_delta(table, via="files", filters=[("nope", "==", 1)])


@pytest.mark.parametrize("feature, why", [
    ("someFutureFeature", "'someFutureFeature', which spark-dask's file reader does not know"),
    ("catalogManaged", "'catalogManaged': its newest commits are kept by the catalog"),
])  # fmt: skip
def test_unknown_reader_features_are_refused(table, feature, why):
    before = sorted(os.listdir(os.path.join(table, "_delta_log")))
    commit(table, [{"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": [feature],
                                 "writerFeatures": [feature]}}])  # fmt: skip
    with pytest.raises(spark_dask.DeltaError) as e:
        spark_dask.read_delta(table, via="files")
    assert why in str(e.value) and 'via="spark"' in str(e.value)
    assert len(read(table, version=1)) == 20  # an older version without the feature still reads
    assert sorted(os.listdir(os.path.join(table, "_delta_log"))) == [*before, f"{2:020d}.json"]  # nothing written


def test_feature_decisions_are_pure():
    ok = {"minReaderVersion": 3, "readerFeatures": sorted(features.READ_RIGHT)}
    assert features.refusal(ok, {"format": {"provider": "parquet"}}) is None
    assert "not Parquet" in features.refusal({"minReaderVersion": 1}, {"format": {"provider": "orc"}})
    assert log.start_point(log.LogListing({0: 0, 1: 0}, {}), 1) == (None, None)


def test_bad_arguments_fail_at_once(table):
    for kwargs, message in [
        ({"via": "disk"}, "via must be one of auto, files, spark"),
        ({"version": 1, "timestamp": "2024-01-01"}, "version or timestamp, not both"),
        ({"version": -1}, "non-negative integer"),
        ({"columns": "x"}, "list of column names"),
        ({"columns": ["zz"]}, "no column 'zz' in the table"),
        ({"timestamp": "yesterday"}, "not an ISO date or time"),
    ]:
        with pytest.raises(spark_dask.PlanError, match=message):
            spark_dask.read_delta(table, **{"via": "files", **kwargs})
    with pytest.raises(spark_dask.DeltaError, match="is not a Delta table"):
        spark_dask.read_delta(os.path.dirname(table), via="files")
    with pytest.raises(spark_dask.DeltaError, match=f"^spark-dask: file://{os.path.dirname(table)} is not a Delta"):
        spark_dask.read_delta("file://" + os.path.dirname(table), via="files")  # the scheme kept (issue 68, 7)


def test_real_workers_read_it(table):
    """A real scheduler and worker processes (the file read is shipped by value)."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        with Client(cluster) as client:
            ddf = spark_dask.read_delta(table, via="files", client=client)
            got = client.compute(ddf).result(timeout=60)
    assert sorted(got.x) == list(range(20))


@pytest.mark.parametrize("module", ["dv", "features", "log", "prune", "schema", "files", "read"])
def test_doctests(module):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(f"spark_dask.delta.{module}"))
    assert result.failed == 0 and result.attempted > 0


def test_the_file_read_runs_where_spark_dask_is_missing(table, tmp_path):
    """Dask workers on executors may lack spark_dask: the file read (and the deletion
    vector's decoding) travels by value, as the hand-off's task code does."""
    import subprocess
    import sys

    import cloudpickle
    import fsspec

    from spark_dask.delta import files, schema
    from spark_dask.delta import read as delta_read
    from spark_dask.spark.shipping import ship_by_value

    first = os.path.relpath(sorted(deltalake.DeltaTable(table).file_uris())[0], table)
    version = with_deletion_vectors(table, {first: [1]}, "u")
    fs = fsspec.filesystem("file")
    snapshot = log.replay(fs, table, version, log.list_log(fs, table))
    plan = files.plan(table, schema.table_schema(snapshot.metadata), "none", "UTC", ["x"], None, None, "pandas")
    ship_by_value(*delta_read.SHIPPED)
    (tmp_path / "payload").write_bytes(cloudpickle.dumps((files.read_file, snapshot.files, plan)))
    script = (
        "import sys, pickle\n"
        "sys.modules['spark_dask'] = None  # any import of it fails\n"
        "read, tasks, plan = pickle.loads(open('payload', 'rb').read())\n"
        "print(sum(len(read(t, plan)) for t in tasks))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["19"]


def test_multi_part_checkpoints_count_only_when_whole(table):
    """A checkpoint in two parts (as Spark writes large ones) is read as one; a set with
    a part missing is passed over for the JSON commits."""
    deltalake.DeltaTable(table).create_checkpoint()  # version 1, one file
    log_dir = os.path.join(table, "_delta_log")
    single = os.path.join(log_dir, f"{1:020d}.checkpoint.parquet")
    rows = pq.read_table(single)
    half = rows.num_rows // 2
    for part, piece in ((1, rows.slice(0, half)), (2, rows.slice(half))):
        pq.write_table(piece, os.path.join(log_dir, f"{1:020d}.checkpoint.{part:010d}.{2:010d}.parquet"))
    os.remove(single)
    os.remove(os.path.join(log_dir, "_last_checkpoint"))
    os.remove(os.path.join(log_dir, f"{0:020d}.json"))  # only the checkpoint has version 0's files now
    assert read(table).x.tolist() == list(range(20))
    os.remove(os.path.join(log_dir, f"{1:020d}.checkpoint.{2:010d}.{2:010d}.parquet"))
    with pytest.raises(spark_dask.DeltaError, match="commit 0 is gone"):
        spark_dask.read_delta(table, via="files")


def test_filter_values_are_taken_as_their_columns_types(tmp_path):
    """As Spark casts a literal: "2024-01-02" on a DATE column, a time without a zone on
    a TIMESTAMP column (in the session time zone, UTC here), numbers on a DECIMAL."""
    from decimal import Decimal

    root = str(tmp_path / "typed")
    days = pd.date_range("2024-01-01", periods=6, freq="D")

    def typed(start: int):
        return pa.table({
            "x": pa.array(np.arange(start, start + 6)),
            "d": pa.array(days.date, pa.date32()),
            "t": pa.array(days.tz_localize("UTC"), pa.timestamp("us", tz="UTC")),
            "m": pa.array([Decimal(f"{i}.50") for i in range(6)], pa.decimal128(5, 2)),
        })  # fmt: skip

    deltalake.write_deltalake(root, typed(0))
    deltalake.write_deltalake(root, typed(6), mode="append")
    for filters, want in [
        ([("d", ">=", "2024-01-05")], [4, 5, 10, 11]),
        ([("t", "<", "2024-01-02 12:00")], [0, 1, 6, 7]),
        ([("m", ">", 3)], [3, 4, 5, 9, 10, 11]),
        ([("d", "in", ["2024-01-01", "2024-01-06"])], [0, 5, 6, 11]),
    ]:
        assert read(root, filters=filters).x.tolist() == want, filters
    # Spark 3.5 (ANSI off) casts 'soon' to NULL: no row; Spark 4's ANSI mode fails the query;
    # without a session (this module starts none, another module's may be active) the two differ
    soon = [("d", "<", "soon")]
    ansi = delta_read.session_ansi(None)
    if ansi is False:
        assert read(root, filters=soon).empty
    else:
        why = "compares differently" if ansi is None else "CAST_INVALID_INPUT"
        with pytest.raises(spark_dask.PlanError, match=f"filter value 'soon' of column 'd' .*{why}"):
            spark_dask.read_delta(root, via="files", filters=soon)


# ---------------------------------------------------------------------- the review's findings (issue 66)
def metadata_action(root: str) -> dict:
    """The table's latest ``metaData`` action (a table written by appends)."""
    log_dir = os.path.join(root, "_delta_log")
    found = None
    for name in sorted(n for n in os.listdir(log_dir) if n.endswith(".json")):
        with open(os.path.join(log_dir, name)) as f:
            found = next((a["metaData"] for a in map(json.loads, f) if "metaData" in a), found)
    return found


def with_schema(root: str, change, protocol: dict | None = None, configuration: dict | None = None) -> int:
    """A commit that changes the schema's fields (``change(fields)`` edits them in
    place) and the table's properties, as ALTER TABLE commits it; its version."""
    metadata = metadata_action(root)
    schema = json.loads(metadata["schemaString"])
    change(schema["fields"])
    metadata = {**metadata, "schemaString": json.dumps(schema),
                "configuration": {**(metadata.get("configuration") or {}), **(configuration or {})}}  # fmt: skip
    return commit(root, ([{"protocol": protocol}] if protocol else []) + [{"metaData": metadata}])


@pytest.mark.parametrize("protocol, configuration, shown", [
    ({"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": ["coordinatedCommits-preview"]}, {},
     "(the writer feature 'coordinatedCommits-preview')"),
    (None, {"delta.coordinatedCommits.commitCoordinator-preview": "dynamodb"},
     "(delta.coordinatedCommits.commitCoordinator-preview = dynamodb)"),
])  # fmt: skip
def test_coordinated_commits_are_refused(table, protocol, configuration, shown):
    """Finding 4: a commit coordinator keeps the newest commits in _delta_log/_commits
    until they are backfilled; the file reader listed _delta_log only and read an older
    version with no word. A commit there that _delta_log lacks: refused, not skipped."""
    v = with_schema(table, lambda fields: None, protocol, configuration)
    os.makedirs(os.path.join(table, "_delta_log", "_commits"))
    with open(os.path.join(table, "_delta_log", "_commits", f"{v + 1:020d}.{uuid.uuid4()}.json"), "w") as f:
        f.write(json.dumps({"commitInfo": {"operation": "WRITE"}}) + "\n")  # not yet backfilled
    with pytest.raises(spark_dask.DeltaError) as e:
        spark_dask.read_delta(table, via="files")
    assert f"its commits go through a commit coordinator {shown}" in str(e.value)
    assert "_delta_log/_commits" in str(e.value) and 'via="spark"' in str(e.value)
    assert len(read(table, version=v - 1)) == 20  # before the coordinator: backfilled, read


def test_filters_on_collated_columns_are_refused(table):
    """Finding 3: under UTF8_LCASE Spark (Databricks) finds 'ABC' for s = 'abc'; the file
    reader compares bytes. A filter on such a column is refused, naming it; the column's
    values, and filters on the other columns, read as before."""

    def collate(fields):
        s = next(f for f in fields if f["name"] == "s")
        s["metadata"] = {"__COLLATIONS": {"s": "spark.UTF8_LCASE"}}

    with_schema(table, collate, {"minReaderVersion": 1, "minWriterVersion": 7,
                                 "writerFeatures": ["collations-preview", "domainMetadata"]})  # fmt: skip
    with pytest.raises(spark_dask.DeltaError) as e:
        spark_dask.read_delta(table, via="files", filters=[[("x", "<", 3)], [("s", "==", "V19")]])
    assert "its column 's' has the collation spark.UTF8_LCASE" in str(e.value) and 'via="spark"' in str(e.value)
    assert read(table).s.tolist() == [f"v{i}" for i in range(20)]
    assert read(table, filters=[("x", ">=", 18)]).s.tolist() == ["v18", "v19"]


def spark_printed_float_statistics(root: str, column: str) -> None:
    """The FLOAT column's statistics in the log as Spark's Delta writer prints them
    (Java's ``Float.toString``, the shortest text of the FLOAT: ``0.1``); deltalake
    prints the DOUBLE of the FLOAT (``0.10000000149011612``)."""
    log_dir = os.path.join(root, "_delta_log")
    for name in sorted(n for n in os.listdir(log_dir) if n.endswith(".json")):
        path = os.path.join(log_dir, name)
        with open(path) as f:
            actions = [json.loads(line) for line in f if line.strip()]
        for action in actions:
            if "add" in action and action["add"].get("stats"):
                stats = json.loads(action["add"]["stats"])
                for kind in ("minValues", "maxValues"):
                    stats[kind][column] = float(str(np.float32(stats[kind][column])))
                action["add"]["stats"] = json.dumps(stats)
        with open(path, "w") as f:
            f.write("".join(json.dumps(a) + "\n" for a in actions))


def test_statistics_from_before_a_float_widening_skip_nothing(tmp_path):
    """Finding 7: a FLOAT column widened to DOUBLE (delta.typeChanges): the old file's
    max statistic 0.1 is the FLOAT 0.1, whose DOUBLE is 0.10000000149011612 > 0.1; the
    file was skipped for x == 0.10000000149011612 and its row lost. Integer widenings keep their
    statistics (the same numbers)."""
    root = str(tmp_path / "widened")
    deltalake.write_deltalake(root, pa.table({"i": pa.array([1, 2], pa.int16()),
                                              "x": pa.array([0.05, 0.1], pa.float32())}))  # fmt: skip
    deltalake.write_deltalake(root, pa.table({"i": pa.array([3, 4], pa.int16()),
                                              "x": pa.array([0.5, 0.7], pa.float32())}), mode="append")  # fmt: skip
    spark_printed_float_statistics(root, "x")
    stats = [json.loads(a["stats"]) for a in written_adds(root).values()]
    assert sorted(s["maxValues"]["x"] for s in stats) == [0.1, 0.7]

    def widen(fields):
        for f in fields:
            before, f["type"] = f["type"], {"i": "integer", "x": "double"}[f["name"]]
            f["metadata"] = {"delta.typeChanges": [{"fromType": before, "toType": f["type"]}]}

    with_schema(root, widen, {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["typeWidening"],
                              "writerFeatures": ["typeWidening"]})  # fmt: skip
    widened = float(np.float32(0.1))  # the row's value, as Spark reads the widened column
    assert read(root, filters=[("x", "==", widened)]).i.tolist() == [2]
    assert read(root, filters=[("x", "in", [widened, 0.7])]).i.tolist() == [2]
    with dask.config.set(scheduler="sync"):
        assert spark_dask.read_delta(root, via="files", filters=[("i", ">", 2)]).npartitions == 1  # stats used
