"""Data files written in Spark's legacy hybrid calendar, read as Spark reads them.

Spark 2.4 and earlier wrote dates and timestamps in the hybrid calendar of
``java.util.GregorianCalendar`` (Julian before 1582-10-15, Gregorian from then on);
Spark 3 computes in the proleptic Gregorian calendar, and a session writing with
``spark.sql.parquet.datetimeRebaseModeInWrite`` or ``int96RebaseModeInWrite`` set to
``LEGACY`` still writes the hybrid one. Reading such a file, Spark moves each value to
the proleptic Gregorian day (and time) of the same year, month and day: the day number
of 1000-06-15 in the file is not the one of 1000-06-15 read plainly.

Which files (``DataSourceUtils.datetimeRebaseSpec`` and ``int96RebaseSpec`` in
apache/spark ``sql/core/.../execution/datasources/DataSourceUtils.scala``): a file
whose footer has ``org.apache.spark.version`` is rebased when that version is below
``3.0.0`` (dates and INT64 timestamps) or ``3.1.0`` (INT96 timestamps), compared as
strings, or when the footer has ``org.apache.spark.legacyDateTime`` (dates, INT64
timestamps) or ``org.apache.spark.legacyINT96`` (INT96 timestamps). A file without
the version (another writer) is read by Spark as its session's
``spark.sql.parquet.datetimeRebaseModeInRead`` and ``int96RebaseModeInRead`` say
(Spark 3.5's default ``EXCEPTION`` fails on a date before 1582-10-15 or a timestamp
before 1900, Spark 4's ``CORRECTED`` reads it as it is), and here as it is.
``TIMESTAMP_NTZ`` values are never rebased (``ParquetVectorUpdaterFactory``).

How (``RebaseDateTime`` in apache/spark ``sql/api/.../catalyst/util/RebaseDateTime.scala``):

* dates (``rebaseJulianToGregorianDays``): pure calendar arithmetic, done here
  exactly (:func:`rebase_days`);
* timestamps (``rebaseJulianToGregorianMicros``): the hybrid calendar's local time in
  a time zone (the footer's ``org.apache.spark.timeZone``, else the reading JVM's
  default zone) taken as the same local time of the proleptic calendar, through
  ``java.util.TimeZone`` one way and ``java.time`` the other. For a zone of one fixed
  offset both agree, and this is calendar arithmetic again (:func:`rebase_micros`,
  :func:`java_offset`). For a zone with a history (``America/New_York``) they differ
  before 1900 (``java.util.TimeZone`` keeps none of a zone's changes before 1900: New
  York's local mean time, -4:56:02, is -5:00 to it), which only Java's own tables
  reproduce: a file whose timestamps fall before 1900 there is refused
  (:class:`~spark_dask.errors.DeltaError`, naming ``via="spark"``); one whose
  timestamps are all later reads as it is (Spark leaves every value from 1900-01-01
  00:00 UTC on as it is, ``lastSwitchJulianTs``).

tests/spark/test_delta_legacy.py checks the arithmetic against Spark's own
``RebaseDateTime`` (through py4j, before the common era too) and the reader against
Spark's read of files written in each of these ways. Shipped by value to the Dask
workers with the file reader (pyarrow and numpy there).
"""

from __future__ import annotations

import json
import re
from typing import NamedTuple

from spark_dask.errors import DeltaError

VERSION = "org.apache.spark.version"
LEGACY_DATETIME = "org.apache.spark.legacyDateTime"
LEGACY_INT96 = "org.apache.spark.legacyINT96"
TIME_ZONE = "org.apache.spark.timeZone"

EPOCH_JDN = 2440588  # the Julian day number of 1970-01-01
GREGORIAN_START = -141427  # 1582-10-15, the hybrid calendar's first Gregorian day
DAY_US = 86_400_000_000
# Spark leaves every timestamp from 1900-01-01 00:00 UTC on as it is (lastSwitchJulianTs,
# the latest change of any zone in its tables); a day more, to be safe
SAFE_FROM_US = (-2_208_988_800 + 86_400) * 1_000_000

DATE, TIMESTAMP, INT96 = "date", "timestamp", "int96"

# java.util.TimeZone ids of offset 0 at all times (tzdb's UTC and GMT links)
UTC_IDS = frozenset(
    {"UTC", "GMT", "UCT", "Universal", "Zulu", "Greenwich", "GMT0"}
    | {f"Etc/{z}" for z in ("UTC", "GMT", "UCT", "Universal", "Zulu", "Greenwich", "GMT0", "GMT+0", "GMT-0")}
)
ETC_GMT = re.compile(r"^Etc/GMT(?:\+(\d|1[0-2])|-(\d|1[0-4]))$")  # tzdb's: GMT+12 to GMT-14
CUSTOM = re.compile(r"^GMT([+-])(?:(\d{1,2})(?::(\d{2}))?|(\d{2})(\d{2}))$")
OFFSET = re.compile(r"^(?:UTC|UT)?(?:Z|[+-]\d{1,2}(?::?\d{2}(?::?\d{2})?)?)$")


class Legacy(NamedTuple):
    """How Spark reads one file: whether its dates and INT64 timestamps (``dates``) and
    its INT96 timestamps (``int96``) are rebased, in which time zone (None: the
    reading JVM's default), and the writer's version."""

    dates: bool
    int96: bool
    zone: str | None
    version: str

    def why(self, kind: str) -> str:
        """Why a value of ``kind`` is in the hybrid calendar, for a message."""
        minimum = "3.1.0" if kind == INT96 else "3.0.0"
        if self.version < minimum:
            return f"written by Spark {self.version}"
        mode = "int96RebaseModeInWrite" if kind == INT96 else "datetimeRebaseModeInWrite"
        return f"written with spark.sql.parquet.{mode}=LEGACY"


def legacy(metadata) -> Legacy | None:
    """How Spark reads a file of this footer key-value metadata (pyarrow's bytes), or
    None where it reads every value as it is.

    >>> legacy({b"org.apache.spark.version": b"3.5.5"}) is None
    True
    >>> legacy({b"org.apache.spark.version": b"2.4.8"})
    Legacy(dates=True, int96=True, zone=None, version='2.4.8')
    >>> legacy({b"org.apache.spark.version": b"3.0.3"})  # Spark 3.0 wrote INT96 in the hybrid calendar
    Legacy(dates=False, int96=True, zone=None, version='3.0.3')
    >>> legacy({b"org.apache.spark.version": b"3.5.5", b"org.apache.spark.legacyDateTime": b"", b"org.apache.spark.timeZone": b"UTC"})
    Legacy(dates=True, int96=False, zone='UTC', version='3.5.5')
    >>> legacy({b"org.apache.spark.legacyDateTime": b""}) is None  # no version: not Spark's rule
    True
    """
    found = {k.decode("utf-8", "replace"): v.decode("utf-8", "replace") for k, v in (metadata or {}).items()}
    version = found.get(VERSION)
    if version is None:
        return None
    dates = version < "3.0.0" or LEGACY_DATETIME in found  # as Spark compares them: as strings
    int96 = version < "3.1.0" or LEGACY_INT96 in found
    if not (dates or int96):
        return None
    return Legacy(dates, int96, found.get(TIME_ZONE), version)


# ---------------------------------------------------------------------- arithmetic
def julian_day_number(year, month, day):
    """The Julian day number of a date of the Julian calendar (astronomical years: 0 is
    1 BC); integers or numpy arrays.

    >>> julian_day_number(1582, 10, 4) - EPOCH_JDN, julian_day_number(1969, 12, 19) - EPOCH_JDN
    (-141428, 0)
    """
    a = (14 - month) // 12
    y = year + 4800 - a
    m = month + 12 * a - 3
    return day + (153 * m + 2) // 5 + 365 * y + y // 4 - 32083


def julian_date(jdn):
    """The Julian calendar's (year, month, day) of a Julian day number (floor division
    throughout, so any day, before the common era too).

    >>> julian_date(2299160), julian_date(1721424), julian_date(1721423)
    ((1582, 10, 4), (1, 1, 1), (0, 12, 31))
    """
    e = 4 * (jdn + 1401) + 3
    h = 5 * ((e % 1461) // 4) + 2
    day = (h % 153) // 5 + 1
    month = (h // 153 + 2) % 12 + 1
    year = e // 1461 - 4716 + (14 - month) // 12
    return year, month, day


def gregorian_days(year, month, day):
    """Days since 1970-01-01 of a date of the proleptic Gregorian calendar (astronomical
    years); integers or numpy arrays.

    >>> gregorian_days(1970, 1, 1), gregorian_days(1582, 10, 15), gregorian_days(1, 1, 1), gregorian_days(0, 12, 30)
    (0, -141427, -719162, -719164)
    """
    year = year - (month <= 2)
    era = year // 400
    of_era = year - era * 400
    of_year = (153 * ((month + 9) % 12) + 2) // 5 + day - 1
    return era * 146097 + of_era * 365 + of_era // 4 - of_era // 100 + of_year - 719468


def rebase_days(days):
    """Days of the hybrid calendar as Spark reads them (``rebaseJulianToGregorianDays``):
    a day before 1582-10-15 is the Julian calendar's year, month and day, and becomes
    the proleptic Gregorian day of that year and month plus the day less one (so the
    Julian 1000-02-29 is the Gregorian 1000-03-01); from 1582-10-15 on, nothing changes.
    A numpy int64 array of as many.

    >>> rebase_days([-141428, -141427, 0, -719164, -354221]).tolist()  # 1582-10-04, -15, 1970-01-01, 0001-01-01, 1000-02-29
    [-141438, -141427, 0, -719162, -354226]
    """
    import numpy as np

    days = np.asarray(days, dtype=np.int64)
    out = days.copy()
    old = days < GREGORIAN_START
    if old.any():
        year, month, day = julian_date(days[old] + EPOCH_JDN)
        out[old] = gregorian_days(year, month, 1) + day - 1
    return out


def rebase_micros(micros, offset: int):
    """Microseconds since the epoch of the hybrid calendar, local time at a fixed UTC
    ``offset`` (seconds), as Spark reads them (``rebaseJulianToGregorianMicros``): the
    local date rebased (:func:`rebase_days`), the time of day kept. A numpy int64
    array of as many.

    >>> rebase_micros([-12_219_292_800_000_001, -12_219_292_800_000_000], 0).tolist()  # 1582-10-04 23:59:59.999999, 1582-10-15
    [-12220156800000001, -12219292800000000]
    >>> rebase_micros([-12_219_292_800_000_000], 3600).tolist()  # 1582-10-15 01:00 at +01:00
    [-12219292800000000]
    """
    import numpy as np

    micros = np.asarray(micros, dtype=np.int64)
    local_days = (micros + offset * 1_000_000) // DAY_US
    return micros + (rebase_days(local_days) - local_days) * DAY_US


def java_offset(zone: str | None) -> int | None:
    """The UTC offset (seconds) in which Spark rebases timestamps for a time zone id
    (``TimeZone.getTimeZone(id)`` of Java, the same in Spark's own tables), where it is
    one fixed offset at all times; None for a zone with a history (or none named).
    Ids Java does not know (a bare offset as ``+01:00``, ``Z``) are GMT to it.

    >>> [java_offset(z) for z in ("UTC", "Etc/GMT+5", "GMT+05:30", "GMT-0800", "+01:00", "Z")]
    [0, -18000, 19800, -28800, 0, 0]
    >>> [java_offset(z) for z in ("America/New_York", "PST", "GMT+19", None)]
    [None, None, None, None]
    """
    if zone is None:
        return None
    if zone in UTC_IDS or OFFSET.match(zone):
        return 0
    if m := ETC_GMT.match(zone):  # the sign is POSIX's: Etc/GMT+5 is UTC-05:00
        west, east = m.groups()
        return -int(west) * 3600 if west else int(east) * 3600
    if m := CUSTOM.match(zone):
        sign, hours, minutes, hhmm_h, hhmm_m = m.groups()
        seconds = int(hours or hhmm_h) * 3600 + int(minutes or hhmm_m or 0) * 60
        if int(minutes or hhmm_m or 0) > 59 or seconds > 18 * 3600:
            return None
        return -seconds if sign == "-" else seconds
    return None


# ---------------------------------------------------------------------- Arrow
def leaf_kinds(parquet_schema, arrow_schema) -> dict[str, list]:
    """For each top-level column of a file (by its name in the file), the kind of each
    of its Parquet leaf columns (``DATE``, ``TIMESTAMP``, ``INT96`` or None), depth
    first as Arrow nests them."""
    kinds = [_kind(parquet_schema.column(i)) for i in range(len(parquet_schema))]
    out, start = {}, 0
    for field in arrow_schema:
        count = _leaves(field.type)
        out[field.name] = kinds[start : start + count]
        start += count
    return out


def _kind(column):
    if column.physical_type == "INT96":
        return INT96
    logical = json.loads(column.logical_type.to_json())
    if column.physical_type == "INT32" and logical.get("Type") == "Date":
        return DATE
    if (
        column.physical_type == "INT64"
        and logical.get("Type") == "Timestamp"
        and logical.get("isAdjustedToUTC")  # TIMESTAMP_NTZ is never rebased
        and logical.get("timeUnit") in ("milliseconds", "microseconds")
    ):
        return TIMESTAMP
    return None


def _leaves(arrow_type) -> int:
    import pyarrow as pa

    if pa.types.is_struct(arrow_type):
        return sum(_leaves(arrow_type.field(i).type) for i in range(arrow_type.num_fields))
    if pa.types.is_map(arrow_type):
        return _leaves(arrow_type.key_type) + _leaves(arrow_type.item_type)
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type) or pa.types.is_fixed_size_list(arrow_type):
        return _leaves(arrow_type.value_type)
    return 1


def in_gregorian(data, parquet_file, names: dict, root: str, path: str):
    """A table read from ``parquet_file`` (columns under their names in the file) with
    its dates and timestamps as Spark reads them: rebased where the file is in the
    hybrid calendar, unchanged otherwise. ``names`` gives each column's name in the
    table, ``root`` and ``path`` the table and the file, for the refusal of a timestamp
    that Java's time-zone tables decide (see the module's text)."""
    import pyarrow as pa

    found = legacy(parquet_file.metadata.metadata)
    if found is None:
        return data
    kinds = leaf_kinds(parquet_file.schema, parquet_file.schema_arrow)
    columns = []
    for name, column in zip(data.column_names, data.columns):
        rebased = [found.dates if k in (DATE, TIMESTAMP) else found.int96 if k == INT96 else False for k in kinds[name]]
        if any(rebased):
            where = (root, names.get(name, name), path)
            column = pa.chunked_array(
                [_rebased(chunk, kinds[name], rebased, 0, found, where)[0] for chunk in column.chunks], type=column.type
            )
        columns.append(column)
    return pa.Table.from_arrays(columns, schema=data.schema)


def _rebased(array, kinds, rebased, start: int, found: Legacy, where):
    """``array`` (whose leaves are ``kinds[start:]``) with its rebased leaves rebased, and
    the index of the leaf after it."""
    import pyarrow as pa

    arrow_type = array.type
    count = _leaves(arrow_type)
    if not any(rebased[start : start + count]):
        return array, start + count
    mask = array.is_null() if array.null_count else None
    if pa.types.is_struct(arrow_type):
        children, at = [], start
        for i in range(arrow_type.num_fields):
            child, at = _rebased(array.field(i), kinds, rebased, at, found, where)
            children.append(child)
        return pa.StructArray.from_arrays(children, fields=list(arrow_type), mask=mask), at
    if pa.types.is_map(arrow_type):
        keys, at = _rebased(array.keys, kinds, rebased, start, found, where)
        items, at = _rebased(array.items, kinds, rebased, at, found, where)
        return pa.MapArray.from_arrays(array.offsets, keys, items, type=arrow_type, mask=mask), at
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        values, at = _rebased(array.values, kinds, rebased, start, found, where)
        lists = pa.ListArray if pa.types.is_list(arrow_type) else pa.LargeListArray
        return lists.from_arrays(array.offsets, values, type=arrow_type, mask=mask), at
    return _rebased_leaf(array, kinds[start], found, where), start + 1


def _rebased_leaf(array, kind: str, found: Legacy, where):
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if kind == DATE:
        days = pc.fill_null(array.cast(pa.int32()), 0).to_numpy()
        return _same_nulls(rebase_days(days).astype(np.int32), array, pa.int32()).cast(array.type)
    micros_type = pa.timestamp("us", array.type.tz)
    micros = pc.fill_null(array.cast(micros_type).cast(pa.int64()), 0).to_numpy()
    offset = java_offset(found.zone)
    if offset is None:
        old = np.flatnonzero((micros < SAFE_FROM_US) & ~_nulls(array))
        if len(old):
            _refuse(found, kind, where)
        return array
    return _same_nulls(rebase_micros(micros, offset), array, pa.int64()).cast(micros_type).cast(array.type)


def _nulls(array):
    import numpy as np

    if not array.null_count:
        return np.zeros(len(array), dtype=bool)
    return array.is_null().to_numpy(zero_copy_only=False)


def _same_nulls(values, like, arrow_type):
    import pyarrow as pa

    return pa.array(values, type=arrow_type, mask=_nulls(like) if like.null_count else None)


def _refuse(found: Legacy, kind: str, where) -> None:
    root, column, path = where
    zone = f"the time zone {found.zone!r}" if found.zone else "its JVM's default time zone, as the file names none"
    raise DeltaError(
        f"spark-dask: cannot read the Delta table {root} from its files: column {column!r} of {path} holds "
        f"timestamps before 1900 in Spark's legacy hybrid calendar ({found.why(kind)}); Spark rebases them by "
        f"Java's rules for {zone}, which the file reader reproduces for UTC and fixed offsets only. "
        'Read it through Spark instead: spark_dask.read_delta(..., via="spark")'
    )


__all__ = [
    "DATE",
    "INT96",
    "TIMESTAMP",
    "Legacy",
    "gregorian_days",
    "in_gregorian",
    "java_offset",
    "julian_date",
    "julian_day_number",
    "leaf_kinds",
    "legacy",
    "rebase_days",
    "rebase_micros",
]
