"""Spark's comparison semantics for read_delta's filters (spark_dask/delta/compare.py),
without Spark: the rules of each finding of issue 53, the row filter (Arrow) and the
file skipping (partition values, statistics) agreeing on every value, and the file
reader's handling of timestamps, time zones, paths and column ids. Spark's own answers
for the same rules: tests/spark/test_delta_filters.py."""

from __future__ import annotations

import json
import os
import random
from datetime import date, datetime, timezone
from decimal import Decimal

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import spark_dask
from spark_dask.delta import compare, files, prune
from spark_dask.delta import dv as delta_dv
from spark_dask.delta import schema as schemas

NAN = float("nan")
NY = "America/New_York"


def rows(kind: str, values, op: str, value, tz: str = "UTC") -> list:
    """The values of a column of type ``kind`` that ``(column, op, value)`` keeps."""
    match = compare.term({"name": "c", "type": kind}, op, value, tz)
    return [v for v in values if compare.holds(match, compare.column_value(v, kind))]


def test_a_float_value_widens_an_integer_column():
    assert rows("integer", [1, 2, 3], "<", 2.5) == [1, 2]  # was [1]: 2.5 cast to 2
    assert rows("integer", [1, 2, 3], "==", 2.5) == []  # was [2]
    assert rows("integer", [1, 2, 3], "in", [1, 2.5]) == [1]
    assert rows("long", [2**53, 2**53 + 1, 2**53 + 2], "==", 2.0**53) == [2**53, 2**53 + 1]  # both round to 2**53
    assert rows("long", [2**53 + 1], "in", [2**53, 0.5]) == [2**53 + 1]  # the list compares as DOUBLE
    assert rows("float", [16777216.0], "==", 16777217) == [16777216.0]  # the INT literal cast to FLOAT
    assert rows("float", [0.1], "==", 0.1) == [] and rows("float", [0.1], "==", "0.1") == [0.1]


def test_nulls_match_nothing():
    assert rows("integer", [1, 2, None], "not in", [1]) == [2]
    assert rows("integer", [1, 2, None], "!=", 1) == [2]
    assert rows("integer", [1, 2, None], "in", [1, None]) == [1]
    assert rows("integer", [1, 2, None], "not in", [1, None]) == []
    assert rows("string", ["a", "b", None], "not in", ["a"]) == ["b"]
    assert rows("integer", [1, None], "==", None) == [] and rows("integer", [1, None], "!=", None) == []


def test_nan_is_above_every_number_and_equal_to_itself():
    values = [1.0, NAN, float("inf"), -0.0, None]
    assert [repr(v) for v in rows("double", values, ">", 100)] == ["nan", "inf"]
    assert [repr(v) for v in rows("double", values, "==", NAN)] == ["nan"]
    assert rows("double", values, "<", NAN) == [1.0, float("inf"), -0.0]
    assert len(rows("double", values, "<=", NAN)) == 4 and rows("double", values, ">", NAN) == []
    assert rows("double", values, "==", 0.0) == [-0.0]  # -0.0 = 0.0
    assert rows("integer", [1, 2], "<", NAN) == [1, 2] and rows("integer", [1, 2], ">", NAN) == []


def test_dates_and_timestamps_are_promoted_in_the_session_zone():
    days = [date(2024, 3, 9), date(2024, 3, 10), date(2024, 3, 11)]
    # the DATE cast up to midnight in New York (05:00 UTC): 2024-03-10 00:00 NY < 06:00 UTC
    assert rows("date", days, "<", datetime(2024, 3, 10, 6, tzinfo=timezone.utc), NY) == days[:2]
    assert rows("date", days, "<", datetime(2024, 3, 10, 4, tzinfo=timezone.utc), NY) == days[:1]
    assert rows("date", days, "==", datetime(2024, 3, 10), NY) == [date(2024, 3, 10)]
    assert rows("date", days, "==", datetime(2024, 3, 10, 0, 0, 1), NY) == []
    stamps = [datetime(2024, 3, 10, 5, tzinfo=timezone.utc), datetime(2024, 3, 10, tzinfo=timezone.utc)]
    assert rows("timestamp", stamps, "==", date(2024, 3, 10), NY) == stamps[:1]
    # a local time in the spring-forward gap moves forward, as java.time moves it
    assert rows("timestamp", [datetime(2024, 3, 10, 7, 30, tzinfo=timezone.utc)], "==", "2024-03-10 02:30", NY)
    with pytest.raises(spark_dask.PlanError, match='TIMESTAMP.*use via="spark"'):
        rows("timestamp_ntz", [], "<", datetime(2024, 1, 1, tzinfo=timezone.utc))


def test_decimals_with_more_scale_than_the_column():
    values = [Decimal("1.23"), Decimal("1.24"), Decimal("0.10")]
    assert rows("decimal(12,2)", values, "<", Decimal("1.234")) == [Decimal("1.23"), Decimal("0.10")]
    assert rows("decimal(12,2)", values, "==", Decimal("1.230")) == [Decimal("1.23")]
    assert rows("decimal(12,2)", values, "==", Decimal("1.234")) == []
    assert rows("decimal(12,2)", values, "==", 0.1) == [Decimal("0.10")]  # as DOUBLE: 0.10 -> 0.1
    assert rows("decimal(12,2)", values, ">", 10**20) == []  # past the column's range
    with pytest.raises(spark_dask.PlanError, match="38 digits"):
        rows("decimal(38,0)", [], "<", Decimal("0.5"))


def test_lists_mixing_types():
    assert rows("date", [date(2024, 3, 10)], "in", [date(2024, 3, 9), datetime(2024, 3, 10)], NY)
    # Spark compares a list holding a string as strings: "02" is no integer's string
    assert rows("integer", [1, 2, 3, None], "in", [1, "2", "03", 3.0]) == [1, 2]
    assert rows("integer", [1, 2, None], "not in", ["1"]) == [2]
    assert rows("date", [date(2024, 3, 10), date(2024, 3, 11)], "in", ["2024-03-10", datetime(2024, 3, 11)]) == [
        date(2024, 3, 10)
    ]
    with pytest.raises(spark_dask.PlanError, match="compares such a list as strings"):
        rows("double", [1.0], "in", [1.0, "2"])
    with pytest.raises(spark_dask.PlanError, match="mixes values of types"):
        rows("string", ["a"], "in", ["a", b"a"])


# ---------------------------------------------------------------------- row filter = file skipping
POOLS = {
    "integer": [None, -(2**31), -3, 0, 1, 2, 3, 2**31 - 1],
    "long": [None, -(2**63), -1, 0, 2**53, 2**53 + 1, 2**63 - 1],
    "float": [None, NAN, float("-inf"), -0.0, 0.0, 0.1, 1.5, 16777216.0, float("inf")],
    "double": [None, NAN, float("-inf"), -0.0, 0.0, 0.1, 2.5, 1e300, float("inf")],
    "decimal(12,2)": [None, Decimal("-9999999999.99"), Decimal("-1.50"), Decimal("0.00"), Decimal("0.10"),
                      Decimal("1.23"), Decimal("9999999999.99")],
    "string": [None, "", "a", "ab", "b", "é", "東京"],
    "date": [None, date(1, 1, 1), date(1970, 1, 1), date(2024, 3, 10), date(2024, 11, 3), date(9999, 12, 31)],
    "timestamp": [None, datetime(1970, 1, 1, tzinfo=timezone.utc), datetime(2024, 3, 10, 5, tzinfo=timezone.utc),
                  datetime(2024, 3, 10, 7, 30, tzinfo=timezone.utc), datetime(2024, 11, 3, 5, 30, tzinfo=timezone.utc)],
    "timestamp_ntz": [None, datetime(1970, 1, 1), datetime(2024, 3, 10, 2, 30), datetime(2024, 11, 3, 1, 30)],
    "boolean": [None, False, True],
}  # fmt: skip
OTHERS = {"integer": [2.5, NAN, Decimal("1.5"), 2**40, "2"], "long": [2.0**53, 0.5, Decimal("-0.5")],
          "float": [0.1, 16777217, Decimal("0.1"), "0.1", NAN], "double": [16777217, Decimal("0.1"), "2.5", NAN],
          "decimal(12,2)": [Decimal("1.234"), 0.1, 2, NAN, "1.23"], "string": ["zz"],
          "date": [datetime(2024, 3, 10), datetime(2024, 3, 10, 5, tzinfo=timezone.utc), "2024-03-10"],
          "timestamp": [date(2024, 3, 10), datetime(2024, 3, 10, 2, 30), "2024-11-03 01:30"],
          "timestamp_ntz": [date(2024, 3, 10), datetime(2024, 3, 10, 2, 30)], "boolean": []}  # fmt: skip


def _value(rng: random.Random, kind: str):
    return rng.choice([v for v in POOLS[kind] if v is not None] + OTHERS[kind] + [None])


@pytest.mark.parametrize("kind", sorted(POOLS))
def test_the_row_filter_and_the_file_skipping_agree(kind):
    """For every value of a column: the Arrow row filter keeps it exactly where the
    partition-value check does; a file's statistics never skip a file holding a match."""
    rng = random.Random(53)
    arrow_type = schemas.arrow_schema({"fields": [{"name": "c", "type": kind}]}, NY).field("c").type
    table = pa.table({"c": pa.array(POOLS[kind], arrow_type)})
    for _ in range(150):
        op = rng.choice(["==", "!=", "<", "<=", ">", ">=", "in", "not in"])
        value = [_value(rng, kind) for _ in range(rng.randint(0, 3))] if "in" in op else _value(rng, kind)
        if "in" in op and kind != "string":
            value = [v for v in value if not isinstance(v, str)]
        match = compare.term({"name": "c", "type": kind}, op, value, NY)
        kept = table.filter(files.match_expression("c", match, arrow_type))["c"].to_pylist()
        held = [v for v in POOLS[kind] if compare.holds(match, compare.column_value(v, kind))]
        shown = lambda values: [repr(compare.column_value(v, kind)) for v in values]  # noqa: E731
        assert shown(kept) == shown(held), (kind, op, value, match)
        present = [compare.column_value(v, kind) for v in rng.sample(POOLS[kind][1:], 2)]
        low, high = min(present, key=_order_key), max(present, key=_order_key)
        if any(compare.holds(match, v) for v in present) and kind not in ("timestamp", "timestamp_ntz", "boolean"):
            assert compare.overlaps(match, low, high, kind in ("float", "double")), (kind, op, value, present)


def _order_key(value):
    import functools

    return functools.cmp_to_key(compare.order)(value)


def test_statistics_skip_files_exactly_where_no_row_can_match():
    fields = {"x": {"name": "x", "type": "long"}, "f": {"name": "f", "type": "double"}}

    def keep(filters, stats):
        dnf = prune.normalize(filters, list(fields.values()), "UTC")
        return prune.keep({"partitionValues": {}, "stats": json.dumps(stats)}, dnf, fields, "none")

    ints = {"numRecords": 3, "minValues": {"x": 5}, "maxValues": {"x": 9}, "nullCount": {"x": 0}}
    assert not keep([("x", ">", 9.5)], ints) and keep([("x", ">", 8.5)], ints) and not keep([("x", "==", 7.5)], ints)
    assert not keep([("x", "not in", [1, None])], ints)  # never true
    nans = {"numRecords": 3, "minValues": {"f": 1.0}, "maxValues": {"f": "NaN"}, "nullCount": {"f": 0}}
    assert keep([("f", ">", 100)], nans) and keep([("f", "==", NAN)], nans)  # NaN is above 100
    no_nan_seen = {"numRecords": 3, "minValues": {"f": 1.0}, "maxValues": {"f": 2.0}, "nullCount": {"f": 0}}
    assert keep([("f", ">", 100)], no_nan_seen) and not keep([("f", "<", 0.5)], no_nan_seen)
    nulls = {"numRecords": 3, "nullCount": {"x": 3}}
    assert not keep([("x", "not in", [1])], nulls) and not keep([("x", "!=", 1)], nulls)


# ---------------------------------------------------------------------- times, zones, paths, ids
def test_timestamp_partition_values_without_a_zone_are_in_the_session_zone():
    field = {"name": "t", "type": "timestamp"}
    naive, utc = {"partitionValues": {"t": "2024-01-01 10:00:00"}}, {"partitionValues": {"t": "2024-01-01T15:00:00Z"}}
    dnf = prune.normalize([("t", "==", datetime(2024, 1, 1, 10))], [field], NY)  # 10:00 in New York
    assert prune.keep(naive, dnf, {"t": field}, "none", NY) and prune.keep(utc, dnf, {"t": field}, "none", NY)
    assert schemas.partition_value("2024-01-01 10:00:00", "timestamp", "t", NY) == datetime(
        2024, 1, 1, 15, tzinfo=timezone.utc
    )


@pytest.mark.parametrize("text", ["2024-01-01 10:00:00.5", "2024-01-01 10:00:00.12345", "2024-01-01T10:00:00.1234567Z",
                                  "2024-01-01 10:00:00.123456789", "2024-01-01T10:00Z", "2024-1-1 10:00:00"])  # fmt: skip
def test_fractions_python_3_10_rejects(text):
    """``datetime.fromisoformat`` of Python 3.10 takes 3 or 6 fraction digits only."""
    value = schemas.partition_value(text, "timestamp", "t", "UTC")
    assert value.replace(microsecond=0) == datetime(2024, 1, 1, 10, tzinfo=timezone.utc)
    assert str(value.microsecond).rjust(6, "0")[:2] in ("50", "12", "00")


@pytest.mark.parametrize("tz, hours", [("+01:00", 1), ("+1", 1), ("GMT+1", 1), ("UTC+01:00", 1), ("UT+01:00", 1),
                                       ("Z", 0), ("-0530", -5.5), ("EST", -5), ("PST", -8), ("CET", 1)])  # fmt: skip
def test_session_zones_as_spark_takes_them(tz, hours):
    """Every form Spark 3.5 took for spark.sql.session.timeZone (checked in Spark)."""
    offset = schemas.zone(tz).utcoffset(datetime(2024, 1, 1))
    assert offset.total_seconds() == hours * 3600
    # Arrow takes the name where the reader uses it: the column's type, its comparisons and
    # its pandas conversion (pyarrow < 18 casts a fixed offset's times to strings only with
    # an IANA name, which the reader never does)
    column = pa.array([0], pa.timestamp("us", tz=schemas.arrow_zone(tz)))
    assert pc.greater(column, pa.scalar(-1, column.type)).to_pylist() == [True]
    assert column.to_pandas().iloc[0].utcoffset().total_seconds() == hours * 3600


def test_absolute_paths_are_percent_decoded():
    assert files.file_uri("s3://b/t", "s3://b/t/d%3D1/part%20one.parquet") == "s3://b/t/d=1/part one.parquet"
    assert files.file_uri("/t", "file:/t/x%2520.parquet") == "/t/x%20.parquet"
    dv = {"storageType": "p", "pathOrInlineDv": "file:/t/deletion_vector%201.bin", "sizeInBytes": 1}
    assert delta_dv.dv_file(dv, "/t") == "/t/deletion_vector 1.bin"  # the same form as add.path (PROTOCOL.md)


def test_column_mapping_id_mode_reads_a_missing_id_as_nulls(tmp_path):
    """A file whose column has the field's physical name but not its id: nulls
    (PROTOCOL.md, "Reader Requirements for Column Mapping"), not the other column."""
    ids = [pa.field("col-a", pa.int64(), metadata={b"PARQUET:field_id": b"1"}),
           pa.field("col-b", pa.int64(), metadata={b"PARQUET:field_id": b"7"})]  # fmt: skip
    pq.write_table(pa.table([[1, 2], [3, 4]], schema=pa.schema(ids)), tmp_path / "f.parquet")
    data = pq.read_table(tmp_path / "f.parquet")
    meta = lambda i, name: {schemas.FIELD_ID: i, schemas.PHYSICAL: name}  # noqa: E731
    a = {"name": "a", "type": "long", "metadata": meta(1, "col-a")}
    b = {"name": "b", "type": "long", "metadata": meta(2, "col-b")}  # id 2: not in the file
    target = pa.field("b", pa.int64())
    assert schemas.logical_column(data, a, pa.field("a", pa.int64()), "id").to_pylist() == [1, 2]
    assert schemas.logical_column(data, b, target, "id").to_pylist() == [None, None]


def test_the_file_reader_filters_a_table_as_spark_does(tmp_path):
    """The findings through ``read_delta`` itself, on a table written here (pyarrow files,
    a log by hand): Spark's answers, from tests/spark/test_delta_filters.py's rules."""
    root = str(tmp_path / "t")
    os.makedirs(os.path.join(root, "_delta_log"))
    schema = {"type": "struct", "fields": [{"name": n, "type": t, "nullable": True, "metadata": {}} for n, t in
              [("x", "integer"), ("f", "double"), ("s", "string"), ("k", "long")]]}  # fmt: skip
    adds = []
    for k, (xs, fs, ss) in enumerate(
        [([1, 2, 3], [1.0, NAN, 200.0], ["a", None, "b"]), ([None, 5, 6], [None, NAN, NAN], [None, None, None])]
    ):
        name = f"k={k}/part %d.parquet" % k
        os.makedirs(os.path.dirname(os.path.join(root, name)), exist_ok=True)
        pq.write_table(
            pa.table({"x": pa.array(xs, pa.int32()), "f": fs, "s": pa.array(ss, pa.string())}), os.path.join(root, name)
        )
        adds.append({"add": {"path": name.replace(" ", "%20"), "partitionValues": {"k": "2" if k else None},
                             "size": 1, "modificationTime": 0, "dataChange": True}})  # fmt: skip
    actions = [{"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
               {"metaData": {"id": "t", "format": {"provider": "parquet", "options": {}}, "schemaString": json.dumps(schema),
                             "partitionColumns": ["k"], "configuration": {}}}, *adds]  # fmt: skip
    with open(os.path.join(root, "_delta_log", f"{0:020d}.json"), "w") as f:
        f.write("".join(json.dumps(a) + "\n" for a in actions))

    def ids(filters) -> list:
        frame = spark_dask.read_delta(root, filters=filters, via="files").compute(scheduler="sync")
        return sorted(frame.x.dropna().astype(int).tolist()) + [None] * int(frame.x.isna().sum())

    assert ids([("x", "<", 2.5)]) == [1, 2]
    assert ids([("x", "==", 2.5)]) == []
    assert ids([("x", "not in", [1])]) == [2, 3, 5, 6]
    assert ids([("x", "not in", [1, None])]) == []
    assert ids([("x", "in", [1, None])]) == [1]
    assert ids([("f", ">", 100)]) == [2, 3, 5, 6]  # NaN and 200.0
    assert ids([("f", "==", NAN)]) == [2, 5, 6]
    assert ids([("s", "!=", "a")]) == [3]
    assert ids([[("s", "not in", ["a"])], [("k", "==", 1.5)]]) == [3]
    assert ids([("k", "not in", [1])]) == [5, 6, None]  # the null partition matches nothing
