"""Spark's ANSI mode in read_delta's filters (spark_dask/delta/compare.py), without Spark:
the rules Spark 4.0 (ANSI mode on by default, Databricks 17.3 LTS) compares with, each
as Spark 4.0.5 and 3.5.5 analysed it (the plans noted beside), and the refusals. Spark's
own answers for the same rules: tests/spark/test_delta_filters.py, on .venv40 and .venv35."""

from __future__ import annotations

from datetime import date, datetime, timezone
from decimal import Decimal

import pytest

import spark_dask
from spark_dask.delta import ansi as ansis
from spark_dask.delta import compare, prune
from spark_dask.delta import read as delta_read

NY = "America/New_York"


def rows(kind: str, values, op: str, value, ansi, tz: str = "UTC") -> list:
    """The values of a column of type ``kind`` that ``(column, op, value)`` keeps."""
    match = compare.term({"name": "c", "type": kind}, op, value, tz, ansi)
    return [v for v in values if compare.holds(match, compare.column_value(v, kind))]


def test_the_mode_is_the_sessions_setting_else_its_lines_default():
    assert ansis.ansi_mode((4, 0), None) is True and ansis.ansi_mode((3, 5), None) is False
    assert ansis.ansi_mode((4, 1), "false") is False and ansis.ansi_mode((3, 5), "true") is True
    assert ansis.ansi_mode(None, None) is None and ansis.ansi_mode(None, "True") is True
    assert delta_read.session_ansi(None) is None  # no session in the unit tests


def test_an_integer_beside_a_float_column_compares_as_double():
    # (f = 16777217): cast(f as double) = cast(16777217 as double) with ANSI mode on,
    # f = cast(16777217 as float) without
    assert rows("float", [16777216.0], "==", 16777217, ansi=False) == [16777216.0]
    assert rows("float", [16777216.0], "==", 16777217, ansi=True) == []
    assert rows("float", [16777216.0, 16777218.0], "<", 16777217, ansi=True) == [16777216.0]


def test_a_string_beside_a_number_is_cast_to_bigint_or_double():
    # (f = '0.1'): cast(f as double) = cast('0.1' as double): 0.1f is not 0.1
    assert rows("float", [0.1], "==", "0.1", ansi=False) == [0.1]
    assert rows("float", [0.1], "==", "0.1", ansi=True) == []
    assert rows("float", [0.1], ">", "0.1", ansi=True) == [0.1]
    # (i = '2'): cast(i as bigint) = cast('2' as bigint)
    assert rows("integer", [1, 2, 3], "==", " 2 ", ansi=True) == [2]
    assert rows("integer", [1, 2, 3], "<", "3000000000", ansi=True) == [1, 2, 3]  # a BIGINT: no overflow
    assert rows("decimal(12,2)", [Decimal("1.23")], "==", "1.23", ansi=True) == [Decimal("1.23")]  # DOUBLE


def test_an_in_list_holding_a_string_is_not_compared_as_strings():
    # (i IN (2, '3')): cast(i as bigint) IN (2, 3); without ANSI mode: cast(i as string) IN ('2', '3')
    assert rows("integer", [1, 2, 3], "in", [1, "02", "3"], ansi=False) == [1, 3]
    assert rows("integer", [1, 2, 3], "in", [1, "02", "3"], ansi=True) == [1, 2, 3]
    # (dt IN (DATE'2024-11-03', '2024-03-10 01:30:00')): cast('2024-03-10 01:30:00' as date)
    days = [date(2024, 3, 10), date(2024, 11, 3), date(2024, 3, 11)]
    assert rows("date", days, "not in", [date(2024, 11, 3), "2024-03-10 01:30:00"], ansi=True) == [date(2024, 3, 11)]
    assert rows("date", days, "not in", [date(2024, 11, 3), "2024-03-10 01:30:00"], ansi=False) == [
        date(2024, 3, 10),
        date(2024, 3, 11),
    ]
    # (f IN (0.1D, '0.5')): DOUBLE; (ts IN ('2024-03-10', DATE'2024-03-10')): TIMESTAMP
    assert rows("float", [0.5, 0.1], "in", [0.1, "0.5"], ansi=True) == [0.5]
    stamps = [datetime(2024, 3, 10, 5, tzinfo=timezone.utc), datetime(2024, 3, 10, tzinfo=timezone.utc)]
    assert rows("timestamp", stamps, "in", ["2024-03-10", date(2024, 3, 10)], ansi=True, tz=NY) == stamps[:1]


def test_an_in_list_folds_its_types_in_order():
    # i IN ('3', 1.5BD): DECIMAL(21,1) (BIGINT, then the DECIMAL); i IN (1.5BD, '3'): DOUBLE
    assert ansis.wider_type(ansis.wider_type("integer", "string"), "decimal(2,1)") == "decimal(21,1)"
    assert ansis.wider_type(ansis.wider_type("integer", "decimal(2,1)"), "string") == "double"
    assert rows("integer", [1, 3], "in", [Decimal("1.5"), "3"], ansi=True) == [3]
    with pytest.raises(spark_dask.PlanError, match=r"casts it to DECIMAL\(21,1\)"):
        rows("integer", [1, 3], "in", ["3", Decimal("1.5")], ansi=True)  # Spark rounds the string: not told here


@pytest.mark.parametrize(
    "kind, value, target",
    [("integer", "1.5", "BIGINT"), ("long", "9223372036854775808", "BIGINT"), ("integer", "1_000", "BIGINT"),
     ("float", "abc", "DOUBLE"), ("decimal(12,2)", "1,5", "DOUBLE"), ("date", "2024-02-30", "DATE"),
     ("timestamp", "yesterday", "TIMESTAMP"), ("boolean", "maybe", "BOOLEAN")],
)  # fmt: skip
def test_a_string_spark_cannot_cast_is_refused_before_reading(kind, value, target):
    with pytest.raises(spark_dask.PlanError) as refusal:
        compare.term({"name": "c", "type": kind}, "==", value, "UTC", ansi=True)
    message = str(refusal.value)
    assert message.startswith(f"spark-dask: filter value {value!r} of column 'c' ({kind}) is not a {target}, "), message
    assert "\n" not in message and "Spark refuses it too" in message and "CAST_INVALID_INPUT" in message
    with pytest.raises(spark_dask.PlanError, match="Spark refuses it too"):
        compare.term({"name": "c", "type": kind}, "in", [value], "UTC", ansi=True)


@pytest.mark.parametrize(
    "kind, value",
    [("double", "0x1p3"), ("date", "2024"), ("timestamp", "2024-03-10T01:30Z"), ("boolean", "\u00a0yes")],
)
def test_a_string_the_file_reader_cannot_tell_is_refused_with_the_spark_hint(kind, value):
    with pytest.raises(spark_dask.PlanError, match='use via="spark"') as refusal:
        compare.term({"name": "c", "type": kind}, "==", value, "UTC", ansi=True)
    assert "CAST_INVALID_INPUT" not in str(refusal.value)


def test_no_common_type_is_refused():
    with pytest.raises(spark_dask.PlanError, match="no common type"):
        compare.term({"name": "c", "type": "integer"}, "==", True, "UTC", ansi=True)


def test_without_a_session_only_what_both_modes_agree_on_is_read():
    """No session (``ansi=None``): a term both modes answer alike is read; one they
    answer otherwise is refused with the hint, not guessed."""
    assert rows("integer", [1, 2, 3], "<", 2.5, ansi=None) == [1, 2]
    assert rows("integer", [1, 2, 3], "in", ["2", 3], ansi=None) == [2, 3]  # as strings and as BIGINT alike
    for kind, op, value in [("float", "==", 16777217), ("float", ">", "0.1"), ("integer", "in", ["02"])]:
        with pytest.raises(spark_dask.PlanError, match=r"no Spark session says which: pass spark="):
            compare.term({"name": "c", "type": kind}, op, value, "UTC", None)
    with pytest.raises(spark_dask.PlanError, match="needs a list of values"):  # refused by both: as before
        compare.term({"name": "c", "type": "integer"}, "in", 1, "UTC", None)


def test_prune_hands_the_mode_down():
    fields = [{"name": "f", "type": "float"}]
    assert prune.normalize([("f", "==", 16777217)], fields, "UTC", ansi=True)[0][0][2] == compare.Match()
    assert prune.normalize([("f", "==", 16777217)], fields, "UTC")[0][0][2].points == (16777216.0,)
