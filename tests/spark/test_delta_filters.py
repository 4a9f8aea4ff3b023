"""``read_delta(filters=...)`` through the file reader gives Spark's rows, for seeded random
filters, on a table Spark wrote with deletion vectors and column mapping (``name``), read
in a New York session (``spark.sql.session.timeZone=America/New_York``).

Every op (``== != < <= > >= in not in``), values of every kind beside every column type
(ints, floats with NaN, -0.0 and infinities, floats on integer columns, decimals with more
scale than the column, strings, dates, timestamps with and without a zone, dates beside
timestamps, strings cast to the column's type, None), null-holding columns, partition
columns (an INT and a TIMESTAMP whose values one commit wrote in UTC and another in the
session's zone) and data columns (statistics skip files), AND and OR groups. Each filter
is translated to Spark SQL here, independently of spark_dask (a literal of the value's
Spark type: ``2.5D``, ``CAST('NaN' AS DOUBLE)``, ``1.234BD``, ``TIMESTAMP'...'``), and
Spark evaluates all of them in one job (one boolean column per filter); the file reader
reads each filter's rows in this process (the file skipping, then the workers' per-file
read with its row filter, on every file kept; every tenth filter through ``read_delta``
itself too). The row ids must be the same. A few filters with naive datetimes also go
through ``via="spark"``'s condition (``read.spark_condition``), in Spark.

Spark's own default ANSI mode: off on Spark 3.5 (.venv35), on on Spark 4.0 (.venv40, as on
Databricks 17.3 LTS), where a string beside a number, an ``in`` list holding a string and
an integer beside a FLOAT compare otherwise (spark_dask/delta/compare.py); the file
reader reads the session's mode. ``SPARK_DASK_FILTER_ANSI=true|false`` sets it instead
(Spark 3.5 with ANSI mode on, Spark 4.0 with it off). Where Spark's ANSI mode fails the
query (a string that is no value of the type it is cast to), the file reader must
refuse before reading (:func:`test_what_ansi_mode_fails_is_refused`); its string casts
are Spark's ``try_cast`` (:func:`test_string_casts_are_sparks_ansi_casts`).

CI runs 300 cases from seed 53 on Spark 3.5 and 300 from seed 54 on Spark 4.0
(tests/run-all.sh); a longer run::

    SPARK_DASK_FILTER_CASES=5000 SPARK_DASK_FILTER_SEED=7 \\
        .venv35/bin/python -m pytest tests/spark/test_delta_filters.py

On a difference the failure names the seed, the case, the filter, its Spark SQL and the
rows each side has that the other has not.
"""

from __future__ import annotations

import math
import os
import random
from datetime import date, datetime, timezone
from decimal import Decimal

import pytest

import spark_dask
from spark_dask.delta import ansi as ansis
from spark_dask.delta import compare, features, files, literals, log, prune, read
from spark_dask.delta import schema as schemas
from tests.support import delta_tables

pytestmark = [pytest.mark.core, pytest.mark.spark, pytest.mark.timeout(600)]

CASES = int(os.environ.get("SPARK_DASK_FILTER_CASES", "300"))
SEED = int(os.environ.get("SPARK_DASK_FILTER_SEED", "53"))
ANSI = os.environ.get("SPARK_DASK_FILTER_ANSI")  # spark.sql.ansi.enabled, when not Spark's default
ZONE = "America/New_York"
OPS = ["==", "!=", "<", "<=", ">", ">=", "in", "not in"]
NAN = float("nan")
INF = float("inf")

# column -> (SQL type, SQL values its rows take, one picked per row by a hash of the id)
COLUMNS = {
    "i": ("INT", ["NULL", "-2147483648", "-3", "-1", "0", "1", "2", "3", "5", "2147483647"]),
    "l": ("BIGINT", ["NULL", "-9223372036854775808", "-5", "0", "2", "9007199254740992", "9007199254740993",
                     "9007199254740995", "9223372036854775807"]),
    "f": ("FLOAT", ["NULL", "'NaN'", "'-Infinity'", "'Infinity'", "-0.0", "0.0", "0.1", "1.5", "16777216",
                    "16777218", "-2.5"]),
    "d": ("DOUBLE", ["NULL", "'NaN'", "'-Infinity'", "'Infinity'", "-0.0", "0.0", "0.1", "0.30000000000000004",
                     "2.5", "1e300", "9007199254740992"]),
    "m": ("DECIMAL(12,2)", ["NULL", "-9999999999.99", "-1.50", "0.00", "0.10", "1.23", "2.50", "9999999999.99"]),
    "s": ("STRING", ["NULL", "''", "'a'", "'A'", "'ab'", "'b'", "'é'", "'東京'", "'it''s'", "'" + "z" * 40 + "'"]),
    "dt": ("DATE", ["NULL", "'0001-01-01'", "'1970-01-01'", "'2024-03-10'", "'2024-03-11'", "'2024-11-03'",
                    "'9999-12-31'"]),
    "ts": ("TIMESTAMP", ["NULL", "'2024-03-10 01:59:59.999999'", "'2024-03-10 03:00:00'", "'2024-11-03 01:30:00'",
                         "'2024-03-10 00:00:00'", "'1970-01-01 00:00:00'", "'2024-03-10 05:00:00.5+00:00'"]),
    "ntz": ("TIMESTAMP_NTZ", ["NULL", "'2024-03-10 02:30:00'", "'2024-03-10 00:00:00'", "'2024-11-03 01:30:00'",
                              "'1970-01-01 00:00:00.000001'"]),
    "b": ("BOOLEAN", ["NULL", "TRUE", "FALSE"]),
}  # fmt: skip
PARTITIONS = {
    "p_int": ("INT", ["1", "NULL"]),
    "p_ts": ("TIMESTAMP", ["'2024-03-10 01:30:00'", "'2024-11-03 01:30:00'", "NULL"]),
}
RENAMED = {"s": "str"}  # RENAME COLUMN under column mapping: the logical name moves, the data stays
KINDS = {**{RENAMED.get(c, c): t for c, (t, _) in COLUMNS.items()}, **{c: t for c, (t, _) in PARTITIONS.items()}}


def _select(first: int, last: int) -> str:
    picks = []
    for name, (sql_type, values) in {**COLUMNS, **PARTITIONS}.items():
        array = ", ".join(f"CAST({v} AS {sql_type})" for v in values)
        picks.append(f"element_at(array({array}), CAST(pmod(hash(id, '{name}'), {len(values)}) + 1 AS INT)) AS {name}")
    return f"SELECT /*+ REPARTITION(1) */ id, {', '.join(picks)} FROM range({first}, {last}, 1, 2)"


@pytest.fixture(scope="module")
def spark(delta_spark):
    """The Delta session this module shares with test_delta_read.py and
    test_delta_stores.py (tests/conftest.py), in New York time and writing the year 0001
    as it is (``NO_REBASE``) while this module runs (ANSI mode as ``ANSI`` sets it, else
    Spark's default); its confs as they were after it."""
    confs = {"spark.sql.session.timeZone": ZONE, **delta_tables.NO_REBASE}
    if ANSI:
        confs["spark.sql.ansi.enabled"] = ANSI
    before = {k: delta_spark.conf.get(k, None) for k in confs}
    for k, v in confs.items():
        delta_spark.conf.set(k, v)
    yield delta_spark
    for k, v in before.items():
        if v is None:
            delta_spark.conf.unset(k)
        else:
            delta_spark.conf.set(k, v)


@pytest.fixture(scope="module")
def table(spark, tmp_path_factory) -> str:
    return filters_table(spark, str(tmp_path_factory.mktemp("filters") / "t"))


def filters_table(spark, path: str) -> str:
    """The table the filters are tried on, written at ``path`` (returned): two commits
    (timestamp partition values in UTC, then in the session's zone as older writers put
    them), a DELETE through deletion vectors, a column renamed. Also read by name through
    Unity Catalog's vending (tests/spark/test_delta_unity.py)."""
    t = f"delta.`{path}`"
    spark.sql(f"""CREATE TABLE {t} USING delta PARTITIONED BY (p_int, p_ts)
        TBLPROPERTIES ('delta.enableDeletionVectors' = 'true', 'delta.columnMapping.mode' = 'name')
        AS {_select(0, 200)}""")
    spark.conf.set("spark.databricks.delta.write.utcTimestampPartitionValues", "false")
    try:
        spark.sql(f"INSERT INTO {t} {_select(200, 400)}")
    finally:
        spark.conf.unset("spark.databricks.delta.write.utcTimestampPartitionValues")
    spark.sql(f"DELETE FROM {t} WHERE id % 10 = 3")
    for old, new in RENAMED.items():
        spark.sql(f"ALTER TABLE {t} RENAME COLUMN {old} TO {new}")
    return path


# --------------------------------------------------------------------- random filters
def _values(rng: random.Random, column: str):
    """A filter value for ``column``: of its type, of a type Spark widens it to or from,
    or None."""
    kind = KINDS[column]
    if rng.random() < 0.06:
        return None
    if kind in ("INT", "BIGINT"):
        return rng.choice([
            rng.randint(-6, 6), rng.choice([-(2**31), 2**31 - 1, 2**53, 2**53 + 1, 2**53 + 3, 2**63 - 1, -(2**63)]),
            rng.randint(-6, 6) + 0.5, rng.choice([NAN, INF, -INF, 2.0**53, 0.1, 1e19]),
            Decimal(rng.choice(["1.5", "2", "-0.01", "2.000", "3"])), str(rng.randint(-3, 3)),
        ])  # fmt: skip
    if kind in ("FLOAT", "DOUBLE"):
        return rng.choice([
            rng.choice([NAN, INF, -INF, -0.0, 0.0, 0.1, 1.5, 2.5, 16777217.0, 0.30000000000000004, 1e300, 2.0**53]),
            rng.choice([0, 1, 16777217, 2**53 + 1, -3]), Decimal(rng.choice(["0.1", "1.5", "-2.50"])),
            rng.choice(["0.1", "2.5", "NaN", "-0.0"]),
        ])  # fmt: skip
    if kind.startswith("DECIMAL"):
        return rng.choice([
            Decimal(rng.choice(["1.234", "1.23", "0.1", "2.5", "-1.5", "9999999999.995", "0", "-1.505"])),
            rng.choice([0, 1, 2, -2, 10**10]), rng.choice([0.1, 2.5, 1.23, NAN, INF, -INF]), rng.choice(["1.23", "0.1"]),
        ])  # fmt: skip
    if kind == "STRING":
        return rng.choice(["", "a", "A", "ab", "aa", "b", "é", "東京", "it's", "z" * 40, "z" * 41, "zz"])
    if kind == "BOOLEAN":
        return rng.choice([True, False])
    days = [
        date(1970, 1, 1),
        date(2024, 3, 10),
        date(2024, 3, 11),
        date(2024, 11, 3),
        date(1, 1, 1),
        date(9999, 12, 31),
    ]
    times = [datetime(2024, 3, 10, 2, 30), datetime(2024, 3, 10, 1, 59, 59, 999999), datetime(2024, 3, 10, 3, 0),
             datetime(2024, 11, 3, 1, 30), datetime(2024, 3, 10, 0, 0), datetime(1970, 1, 1, 0, 0, 0, 1),
             datetime(2024, 3, 10, 1, 30), datetime(2024, 3, 10, 5, 0, 0, 500000)]  # fmt: skip
    pick = rng.choice([rng.choice(days), rng.choice(times)])
    if kind == "TIMESTAMP_NTZ":
        return pick
    if rng.random() < 0.3 and isinstance(pick, datetime):
        return pick.replace(tzinfo=timezone.utc)
    if rng.random() < 0.2:
        return pick.isoformat(sep=" ") if isinstance(pick, datetime) else pick.isoformat()
    return pick


def _term(rng: random.Random) -> tuple:
    column = rng.choice(sorted(KINDS))
    op = rng.choice(OPS)
    if op in ("in", "not in"):
        return column, op, [_values(rng, column) for _ in range(rng.randint(1, 3))]
    return column, op, _values(rng, column)


def random_filters(rng: random.Random):
    """A conjunction, or a disjunction of conjunctions."""
    groups = [[_term(rng) for _ in range(rng.choice([1, 1, 2]))] for _ in range(rng.choice([1, 1, 1, 2, 3]))]
    return groups[0] if len(groups) == 1 else groups


# --------------------------------------------------------------------- Spark's side
def sql_literal(value, column_kind: str) -> str:
    """The Spark SQL literal of a Python value: its own Spark type (not the column's)."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"CAST('{value!r}' AS DOUBLE)" if math.isnan(value) or math.isinf(value) else f"{value!r}D"
    if isinstance(value, Decimal):
        return f"{value}BD"
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if isinstance(value, datetime):
        text = value.replace(tzinfo=None).isoformat(sep=" ")
        if value.tzinfo is not None:
            return f"TIMESTAMP'{text}+00:00'"
        return f"TIMESTAMP_NTZ'{text}'" if column_kind == "TIMESTAMP_NTZ" else f"TIMESTAMP'{text}'"
    if isinstance(value, date):
        return f"DATE'{value.isoformat()}'"
    raise TypeError(value)


def sql_term(column: str, op: str, value) -> str:
    kind = KINDS[column]
    if op in ("in", "not in"):
        return f"`{column}` {op.upper()} ({', '.join(sql_literal(v, kind) for v in value)})"
    return f"`{column}` {'=' if op == '==' else op} {sql_literal(value, kind)}"


def sql_condition(filters) -> str:
    groups = [filters] if isinstance(filters[0], tuple) else filters
    return " OR ".join("(" + " AND ".join(sql_term(*t) for t in g) + ")" for g in groups)


def spark_answers(spark, path: str, conditions: list[str]) -> list[set[int]]:
    """Per condition, the ids of the rows where Spark finds it true: one job."""
    columns = ", ".join(f"({c}) AS c{k}" for k, c in enumerate(conditions))
    rows = spark.sql(f"SELECT id, {columns} FROM delta.`{path}`").collect()
    return [{r["id"] for r in rows if r[f"c{k}"] is True} for k in range(len(conditions))]


# --------------------------------------------------------------------- the test
def refused(filters, ansi: bool) -> bool:
    """Whether the file reader must refuse the filter. ANSI mode off: an ``in`` list
    holding a string beside a column of a type whose strings are not plain (Spark
    compares that list as strings; for integers and dates the file reader does too).
    ANSI mode on: an ``in`` list that Spark compares as a DECIMAL holding a string
    (:func:`decimal_list_with_string`: Spark rounds the string to the DECIMAL's scale)."""
    groups = [filters] if isinstance(filters[0], tuple) else filters
    terms = [(c, value) for g in groups for c, op, value in g if op in ("in", "not in")]
    if ansi:
        return any(decimal_list_with_string(KINDS[c], value) for c, value in terms)
    plain = ("STRING", "INT", "BIGINT", "DATE")
    return any(KINDS[c] not in plain and any(isinstance(v, str) for v in value) for c, value in terms)


def decimal_list_with_string(kind: str, values) -> bool:
    """Whether Spark's ANSI mode compares ``column IN (values)`` as a DECIMAL with a
    string among the values: its ``InConversion`` folds the column's type and the values'
    in order, and beside an integer column a string makes BIGINT, a Decimal then DECIMAL,
    a string after a Decimal or any float DOUBLE for good (AnsiTypeCoercion.scala)."""
    if kind not in ("INT", "BIGINT"):
        return False  # a DECIMAL beside a string or a float is DOUBLE
    state, strings = "integer", False
    for v in values:
        if isinstance(v, float) or (isinstance(v, str) and state == "decimal"):
            return False
        strings = strings or isinstance(v, str)
        state = "decimal" if isinstance(v, Decimal) else state
    return strings and state == "decimal"


def files_answer(spark, path: str, filters) -> set[int]:
    """The ids ``read_delta(..., via="files")`` returns, computed in this process."""
    frame = spark_dask.read_delta(path, filters=filters, columns=["id"], via="files", spark=spark)
    return set(frame.compute(scheduler="sync")["id"].tolist())


class FileReader:
    """What ``read_delta`` runs per filter, without Dask's graph around it (20 times
    cheaper): the file skipping on the driver (``prune.keep``) and the per-file read
    with its row filter (``files.read_file``) on each file kept, one snapshot for all.
    Every tenth case also goes through ``read_delta`` itself, which must agree."""

    def __init__(self, path: str, ansi: bool):
        import fsspec

        self.ansi = ansi
        fs = fsspec.filesystem("file")
        listing = log.list_log(fs, path)
        self.snapshot = log.replay(fs, path, log.latest_version(listing), listing)
        self.path = path
        self.schema = schemas.table_schema(self.snapshot.metadata)
        self.mode = features.column_mapping_mode(self.snapshot.metadata)
        self.fields = {f["name"]: f for f in self.schema["fields"]}

    def answer(self, filters) -> set[int]:
        dnf = prune.normalize(filters, self.schema["fields"], ZONE, self.ansi)
        kept = [r for r in self.snapshot.files if prune.keep(r, dnf, self.fields, self.mode, ZONE)]
        plan = files.plan(self.path, self.schema, self.mode, ZONE, ["id"], dnf, {}, "pandas")
        return {i for task in kept for i in files.read_file(task, plan)["id"].tolist()}


def test_filters_give_sparks_rows(spark, table):
    rng = random.Random(SEED)
    cases = [random_filters(rng) for _ in range(CASES)]
    conditions = [sql_condition(f) for f in cases]
    want = spark_answers(spark, table, conditions)
    # a few through Spark's own filter (its data skipping), which must agree with the projection
    for k in range(0, CASES, max(1, CASES // 2)):
        filtered = {r["id"] for r in spark.read.format("delta").load(table).where(conditions[k]).select("id").collect()}
        assert filtered == want[k], (SEED, k, conditions[k])
    # via="spark"'s condition (read.spark_condition) on a few filters with a naive datetime,
    # which py4j alone would read in this process's zone (UTC), not the session's
    naive = [k for k, f in enumerate(cases) if "datetime.datetime(" in repr(f) and "tzinfo" not in repr(f)]
    for k in naive[:3]:
        dnf = prune.normalize(cases[k], [{"name": n} for n in KINDS])
        condition = read.spark_condition(dnf, ZONE, ntz=[c for c, kind in KINDS.items() if kind == "TIMESTAMP_NTZ"])
        through = {r["id"] for r in spark.read.format("delta").load(table).where(condition).select("id").collect()}
        assert through == want[k], (SEED, k, cases[k], conditions[k])
    rows = {r["id"]: r.asDict() for r in spark.read.format("delta").load(table).collect()}
    differ = []
    ansi = read.session_ansi(spark)
    assert ansi is (ANSI == "true" if ANSI else spark.version >= "4"), (ansi, spark.version, ANSI)
    reader, refusals = FileReader(table, ansi), 0
    refusal = "casts it to DECIMAL" if ansi else "Spark compares such a list as strings"
    for k, filters in enumerate(cases):
        if refused(filters, ansi):
            with pytest.raises(spark_dask.PlanError, match=refusal):
                reader.answer(filters)
            refusals += 1
            continue
        got = reader.answer(filters)
        if k % 10 == 0:
            assert files_answer(spark, table, filters) == got, (SEED, k, filters)
        if got != want[k]:
            extra = [rows[i] for i in sorted(got - want[k])[:3]]
            missing = [rows[i] for i in sorted(want[k] - got)[:3]]
            differ.append(f"seed {SEED} case {k}: {filters!r}\n  Spark: {conditions[k]}\n"
                          f"  {len(got)} rows vs Spark's {len(want[k])}; only the file reader's: {extra}; "
                          f"only Spark's: {missing}")  # fmt: skip
    assert not differ, f"{len(differ)} of {CASES} filters differ from Spark:\n" + "\n".join(differ[:10])
    assert refusals < CASES // 5, refusals
    assert sum(bool(w) for w in want) > CASES // 4 and sum(not w for w in want) > CASES // 10  # both kinds tried


# --------------------------------------------------------------------- Spark's ANSI mode
# Strings cast as Spark's ANSI cast does (Cast.scala, UTF8String.toLongExact,
# Double.parseDouble, DateTimeUtils.stringToDate/stringToTimestamp): what ``try_cast``
# gives (its ANSI cast, null where that fails), whatever the session's mode.
STRINGS = ["7", " 7 ", "+7", "-0", "07", "1.5", "1.", ".5", "1e3", "1_000", "0x10", "9223372036854775807",
           "9223372036854775808", "-9223372036854775808", "", " ", "abc", "\t7\n", "\u00a07", "\uff17", "1.5d", "1.5F",
           "NaN", "nan", "-nan", "-NaN", "Infinity", "inf", "-Infinity", "+inf", "INF", "-.5e-3", "1e400", "0x1p3",
           "1e", "+", "-", "1 2", "\x017", "7\x7f", "2024", "2024-03", "2024-03-10", "2024-3-5", "2024-03-10T01:00",
           "2024-03-10 xyz", "+2024-03-10", " 2024-03-10 ", "2024-02-30", "2024-03-10 25:00", "2024-03-10 01:30:00",
           "2024-03-10 02:30:00", "2024-03-10 01:30:00+05:00", "2024-03-10T01:30Z", "2024-03-10 01:30:00Z",
           "2024-03-10 01:30:00 UTC", "2024-03-10T01:30:00.5+01:00", "2024-03-10 01:30:00.1234567", "12345-01-01",
           "today", "01:30", "true", "TRUE", " yes ", "t", "1", "0", "on", "n", "\u00a0yes"]  # fmt: skip
CASTS = {"long": "try_cast(s AS BIGINT)", "double": "try_cast(s AS DOUBLE)", "date": "unix_date(try_cast(s AS DATE))",
         "timestamp": "unix_micros(try_cast(s AS TIMESTAMP))", "boolean": "try_cast(s AS BOOLEAN)",
         "timestamp_ntz": "unix_micros(CAST(try_cast(s AS TIMESTAMP_NTZ) AS TIMESTAMP))"}  # fmt: skip


def test_string_casts_are_sparks_ansi_casts(spark):
    """Each string filter value cast to each type the way Spark's ANSI mode casts it: the
    same value as Spark's ``try_cast``; refused as Spark refusing it (CAST_INVALID_INPUT)
    only where ``try_cast`` gives null; or refused as something the file reader cannot
    tell (never for a plain number, date or time)."""
    frame = spark.createDataFrame(list(enumerate(STRINGS)), "i INT, s STRING")
    with delta_tables._spark_conf(spark, {"spark.sql.session.timeZone": "UTC"}):  # an NTZ's micros: its UTC time's
        rows = frame.selectExpr("i", *[f"{e} AS `{k}`" for k, e in CASTS.items()]).collect()
    unknown, wrong = [], []
    for row in sorted(rows):
        text = STRINGS[row["i"]]
        for kind in CASTS:
            want = row[kind]
            try:
                got = ansis.ansi_literals(kind, [text], "UTC", "c")[0][1]
            except spark_dask.PlanError as e:
                if "CAST_INVALID_INPUT" not in str(e):
                    unknown.append((text, kind))
                elif want is not None:
                    wrong.append((text, kind, want, "refused"))
                continue
            if kind == "date":
                got = (got - date(1970, 1, 1)).days
            if not (got == want or (isinstance(got, float) and math.isnan(got) and math.isnan(want))):
                wrong.append((text, kind, want, got))
    assert not wrong, wrong
    times = {"2024-03-10", "2024-03-10 01:30:00", "2024-03-10 01:30:00Z"}
    plain = {"long": {"7", "-9223372036854775808"}, "double": {"7", "1.5", "NaN", "-Infinity", "1e400"},
             "boolean": {"true", " yes "}, "date": times, "timestamp": times, "timestamp_ntz": times}  # fmt: skip
    assert not [(text, kind) for text, kind in unknown if text in plain[kind]], unknown


LEGACY_CASTS = {"byte": "CAST(s AS TINYINT)", "integer": "CAST(s AS INT)", "long": "CAST(s AS BIGINT)",
                "date": "unix_date(CAST(s AS DATE))"}  # fmt: skip


def test_string_casts_with_ansi_off_are_spark_35s(spark):
    """Issue 68, point 2: with ANSI mode off (Spark 3.5's default) a string beside an
    integer or DATE column is cast to the column's type, NULL where it is none
    (``CAST('1.5' AS INT)`` = 1, ``CAST('2024' AS DATE)`` = 2024-01-01, ``'abc'`` NULL: no
    row matches); the file reader refused them. Each of the strings against Spark's own
    cast; refused only for a year Python's dates do not hold."""
    frame = spark.createDataFrame(list(enumerate(STRINGS)), "i INT, s STRING")
    with delta_tables._spark_conf(spark, {"spark.sql.ansi.enabled": "false", "spark.sql.session.timeZone": "UTC"}):
        rows = frame.selectExpr("i", *[f"{e} AS `{k}`" for k, e in LEGACY_CASTS.items()]).collect()
    wrong = []
    for row in sorted(rows):
        text = STRINGS[row["i"]]
        for kind in LEGACY_CASTS:
            want = row[kind]
            try:
                literal_kind, got = literals.literal(text, kind, "UTC", "c")
            except spark_dask.PlanError as e:
                if "a year outside 1 to 9999" not in str(e):
                    wrong.append((text, kind, want, "refused"))
                continue
            if kind == "date" and got is not None:
                got = (got - date(1970, 1, 1)).days
            if got != want:
                wrong.append((text, kind, want, got))
    assert not wrong, wrong
    field = {"name": "i", "type": "integer"}
    assert compare.term(field, "==", "1.5", "UTC", ansi=False) == compare.term(field, "==", 1, "UTC", ansi=False)


ANSI_FAILURES = [("i", "==", "1.5"), ("l", "in", [1, "x"]), ("f", "<", "abc"), ("m", ">=", "1,5"),
                 ("dt", "==", "2024-02-30"), ("b", "!=", "maybe"), ("i", "not in", ["2", "2.0"])]  # fmt: skip


def test_what_ansi_mode_fails_is_refused(spark, table):
    """With ANSI mode on, a string that is no value of the type Spark casts it to fails
    Spark's query at run time (CAST_INVALID_INPUT): the file reader refuses it before
    reading anything, with one line naming the column and the value."""
    ansi = read.session_ansi(spark)
    if not ansi:
        pytest.skip("ANSI mode is off in this session (Spark 3.5's default): Spark's cast gives NULL there")
    reader = FileReader(table, ansi)
    for filters in ANSI_FAILURES:
        with pytest.raises(Exception, match="CAST_INVALID_INPUT"):
            spark.sql(f"SELECT id FROM delta.`{table}` WHERE {sql_condition([filters])}").collect()
        with pytest.raises(spark_dask.PlanError, match="Spark refuses it too") as refusal:
            reader.answer([filters])
        message = str(refusal.value)
        assert "\n" not in message and message.startswith("spark-dask: ") and repr(filters[0]) in message, message
        with pytest.raises(spark_dask.PlanError, match="Spark refuses it too"):
            files_answer(spark, table, [filters])
