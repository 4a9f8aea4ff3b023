"""spark_dask.read_delta on data files written in Spark's legacy hybrid calendar (Julian
before 1582-10-15): Spark 2.4, old Databricks runtimes, and sessions writing with
``spark.sql.parquet.datetimeRebaseModeInWrite`` / ``int96RebaseModeInWrite`` set to
``LEGACY``. Spark rebases such files' dates and timestamps to the proleptic Gregorian
calendar as it reads them; the file reader must give the same values
(spark_dask/delta/calendar.py), or refuse where it cannot (a timestamp before 1900
rebased in a time zone with a history, which needs Java's time-zone tables).

One table, written here by Spark 3.5.5 with Delta Lake 3.3.2 in eight commits, each
under other rebase modes, timestamp types and session time zones (:data:`COMMITS`), then
a DELETE: a version read from the files equals Spark's own read of it (handed over with
``to_dask``); the last commit's file is refused, in one line, until the DELETE leaves
only modern timestamps live in it. The calendar arithmetic itself is checked against
Spark's own functions (``RebaseDateTime``, through py4j) over the whole range of dates.
"""

from __future__ import annotations

import contextlib
import random

import dask
import pyarrow as pa
import pytest

import spark_dask
from tests.support.spark import runtime_conf

pytestmark = [pytest.mark.core, pytest.mark.spark, pytest.mark.timeout(600)]

DATES = [
    "0001-01-01", "0100-03-01", "1000-06-15", "1500-02-28", "1500-03-01", "1582-10-04", "1582-10-15",
    "1970-01-01", "2024-02-29", "9999-12-31", None,
]  # fmt: skip
# beside each date, a timestamp (in the writing session's time zone)
OLD_TIMES = [
    "0001-01-01 12:00:00", "1000-06-15 12:34:56.789012", "1500-02-28 23:30:00", "1582-10-04 23:59:59.999999",
    "1582-10-15 00:00:00", "1883-11-18 12:00:00", "1899-12-31 23:59:59.999999", "1900-01-01 00:00:00",
    "2024-02-29 12:00:00.5", "9999-12-31 23:59:59.999999", None,
]  # fmt: skip
NEW_TIMES = [
    "1900-01-02 00:00:00", "1901-12-13 20:45:52", "1950-06-01 00:00:00.000001", "1970-01-01 00:00:00",
    "2000-02-29 00:00:00", "2024-02-29 12:00:00.5", "2024-11-03 01:30:00", "2038-01-19 03:14:08",
    "2100-03-01 00:00:00", "9999-12-31 23:59:59.999999", None,
]  # fmt: skip

LEGACY = "LEGACY"
CORRECTED = "CORRECTED"
NEW_YORK = "America/New_York"
# (session time zone, datetimeRebaseModeInWrite, int96RebaseModeInWrite, outputTimestampType,
# timestamps): one commit each, from version 0
COMMITS = [
    ("UTC", LEGACY, LEGACY, "INT96", OLD_TIMES),  # Spark 3.5's default timestamp type, both rebased
    ("UTC", LEGACY, LEGACY, "TIMESTAMP_MICROS", OLD_TIMES),  # INT64 timestamps: the datetime rule
    ("UTC", LEGACY, CORRECTED, "INT96", OLD_TIMES),  # dates rebased, INT96 not
    ("UTC", CORRECTED, LEGACY, "INT96", OLD_TIMES),  # INT96 rebased, dates not (as Spark 3.0 wrote)
    ("GMT-08:00", LEGACY, LEGACY, "INT96", OLD_TIMES),  # a fixed offset
    ("+01:00", LEGACY, LEGACY, "TIMESTAMP_MICROS", OLD_TIMES),  # an id Java's TimeZone takes for GMT
    (NEW_YORK, LEGACY, LEGACY, "TIMESTAMP_MILLIS", NEW_TIMES),  # New York: old dates, modern times only
    (NEW_YORK, LEGACY, LEGACY, "INT96", OLD_TIMES),  # New York and old times: refused
]
REFUSED = len(COMMITS) - 1  # the version whose last file is refused
READABLE = REFUSED - 1  # the version read from the files
# then a DELETE of the refused file's rows before 1900 (a deletion vector): the latest version


@contextlib.contextmanager
def session_conf(spark, conf: dict):
    """``conf`` set on the session within, then as it was: the session is shared with
    other modules, which must find it as it was made."""
    before = {k: spark.conf.get(k, None) for k in conf}
    for k, v in conf.items():
        spark.conf.set(k, v)
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)


def literal(kind: str, value) -> str:
    return f"CAST(NULL AS {kind})" if value is None else f"{kind}'{value}'"


def rows_sql(first_id: int, times) -> str:
    """The rows of one commit: each date beside one of ``times`` (in the session time
    zone), in top-level, nested and TIMESTAMP_NTZ columns."""
    values = ", ".join(
        f"({first_id + i}, {literal('DATE', d)}, {literal('TIMESTAMP', t)})"
        for i, (d, t) in enumerate(zip(DATES, times))
    )
    return (
        "SELECT id, d, t, named_struct('d', d, 't', t) AS s, array(d, DATE'1000-06-15', d) AS ds, "
        "map('t', t) AS m, CAST(t AS TIMESTAMP_NTZ) AS n "
        f"FROM VALUES {values} AS v(id, d, t)"
    )


@pytest.fixture(scope="module")
def spark(delta_spark):
    """The Delta session of tests/conftest.py, shared with the other Delta modules."""
    return delta_spark


@pytest.fixture(scope="module")
def table(spark, tmp_path_factory):
    """The table's path: :data:`COMMITS`, each a file of its own rebase modes, timestamp
    type and session time zone, then a DELETE; column mapping on (the files' column
    names are not the table's) and deletion vectors."""
    path = str(tmp_path_factory.mktemp("legacy") / "table")
    as_made = runtime_conf(spark)
    for version, (zone, datetime_mode, int96_mode, kind, times) in enumerate(COMMITS):
        conf = {
            "spark.sql.session.timeZone": zone,
            "spark.sql.parquet.datetimeRebaseModeInWrite": datetime_mode,
            "spark.sql.parquet.int96RebaseModeInWrite": int96_mode,
            "spark.sql.parquet.outputTimestampType": kind,
            "spark.databricks.delta.properties.defaults.columnMapping.mode": "name",
            "spark.databricks.delta.properties.defaults.enableDeletionVectors": "true",
        }
        with session_conf(spark, conf):
            rows = spark.sql(rows_sql(100 * version, times)).coalesce(1)
            rows.write.format("delta").mode("append").save(path)
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id >= {100 * REFUSED} AND t < TIMESTAMP'1900-01-02 00:00:00Z'")
    assert runtime_conf(spark) == as_made
    return path


@pytest.fixture(scope="module")
def client(spark, table):
    with spark_dask.start(spark, n_workers=1, progress=False, memory_limit="2GiB") as c:
        yield c


def spark_read(spark, path: str, version=None):
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    return reader.load(path)


def rows(ddf):
    """A Dask frame's rows as one Arrow table in ``id`` order, its partitions joined as
    Arrow (pandas 2 would turn a wrong date of the year 0 into a Python date, and fail)."""
    parts = dask.compute(*ddf.to_delayed())
    return pa.concat_tables([pa.Table.from_pandas(p, preserve_index=False) for p in parts]).sort_by("id")


def assert_same(got, want, what: str) -> None:
    """Dask frames of the same rows, columns and dtypes, exactly."""
    assert got.dtypes.astype(str).tolist() == want.dtypes.astype(str).tolist(), what
    got, want = rows(got), rows(want)
    assert got.schema == want.schema, what
    for column in got.column_names:
        mine, theirs = (t.column(column).combine_chunks() for t in (got, want))
        assert mine.equals(theirs), f"{what}, column {column}:\n{mine.to_string()}\n!=\n{theirs.to_string()}"


def test_legacy_files_read_as_spark_reads_them(spark, table, client):
    """The version before the last (every file but the last: dates, INT96 and INT64
    micros and millis timestamps, before and after 1582 and 1900, nested and null, each
    rebase rule alone, files of fixed offsets, a New York file of old dates and modern
    timestamps) equals Spark's read. The reading session's time zone plays no part in
    the rebase (the file's does); UTC here, as pandas 2 cannot show a time before 1677
    in New York's."""
    with session_conf(spark, {"spark.sql.session.timeZone": "UTC"}):
        want = spark_dask.to_dask(spark_read(spark, table, READABLE))
        got = spark_dask.read_delta(table, version=READABLE, via="files")
        assert_same(got, want, f"version {READABLE}")


def test_old_timestamps_rebased_in_a_zone_with_history_are_refused(spark, table, client):
    """The last commit's file holds timestamps before 1900 that Spark rebases in New
    York's time (Java's time-zone tables): refused when read, in one line naming the
    table, the column and the way out; its dates alone read right."""
    with pytest.raises(spark_dask.DeltaError) as error:
        spark_dask.read_delta(table, version=REFUSED, via="files").compute()
    message = str(error.value)
    assert message.startswith(f"spark-dask: cannot read the Delta table {table} from its files: "), message
    assert "column 't'" in message and NEW_YORK in message and 'via="spark"' in message, message
    assert "\n" not in message, message
    dates = ["id", "d", "ds"]
    got = spark_dask.read_delta(table, version=REFUSED, columns=dates, via="files")
    want = spark_dask.to_dask(spark_read(spark, table, REFUSED).select(*dates))
    assert_same(got, want, f"the dates of version {REFUSED}")


def test_deleted_old_timestamps_do_not_refuse(spark, table, client):
    """Once a DELETE left only modern timestamps live in that file (its old ones behind
    a deletion vector), the latest version reads from the files as Spark reads it."""
    with session_conf(spark, {"spark.sql.session.timeZone": "UTC"}):
        want = spark_dask.to_dask(spark_read(spark, table))
        got = spark_dask.read_delta(table, via="files")
        assert_same(got, want, "the latest version")


def test_calendar_arithmetic_is_sparks(spark):
    """spark_dask/delta/calendar.py's rebase of days and of microseconds equals Spark's
    own (RebaseDateTime through py4j), before the common era too, where the files above
    cannot reach."""
    from spark_dask.delta import calendar

    rebase = spark._jvm.org.apache.spark.sql.catalyst.util.RebaseDateTime
    rng = random.Random(66)
    switch = -141427  # 1582-10-15
    days = list(range(switch - 40, switch + 3))
    for year in range(-1200, 1600, 100):  # the days around each century's Julian 29 February
        base = int(calendar.julian_day_number(year, 3, 1) - calendar.EPOCH_JDN)
        days += range(base - 3, base + 3)
    days += [rng.randint(-3_000_000, switch) for _ in range(1500)]
    days += [rng.randint(-(2**31), -3_000_000) for _ in range(100)]
    got = calendar.rebase_days(days).tolist()
    want = [rebase.rebaseJulianToGregorianDays(d) for d in days]
    assert got == want, [(d, g, w) for d, g, w in zip(days, got, want) if g != w][:5]

    day = 86_400_000_000
    micros = [d * day + rng.randint(0, day - 1) for d in days[::3] if d > -(2**62) // day]
    micros += [rng.randint(-(2**62), 0) for _ in range(50)]
    for zone in ("UTC", "Etc/UTC", "GMT", "Etc/GMT+5", "Etc/GMT-14", "GMT+05:30", "GMT-0800", "+01:00", "Z"):
        offset = calendar.java_offset(zone)
        got = calendar.rebase_micros(micros, offset).tolist()
        want = [rebase.rebaseJulianToGregorianMicros(zone, m) for m in micros]
        assert got == want, (zone, [(m, g, w) for m, g, w in zip(micros, got, want) if g != w][:5])
