"""Which version of which Delta table a Dask DataFrame was read from, so that
``write_delta(..., mode="overwrite")`` of that table from it cannot drop a commit made
since without a word.

Spark's own read-then-overwrite of one table is safe by construction: a Delta
DataFrame is not pinned to a version (unless ``versionAsOf`` pins it); the overwrite's
transaction runs the read again at the version it starts from, and Delta's conflict
detection fails it when a commit lands during the write (tests/spark/test_delta_write.py
runs that sequence on Spark 3.5 and Delta 3.3.2). A Dask DataFrame from
``read_delta`` holds the rows of one version (the files are read as it computes, the
version was fixed at the call), so an overwrite from it after a newer commit would
replace that commit's changes. Here:

* :func:`remember` records, per read, the expression that holds the rows and the
  table's key and version; :func:`versions_read` finds them again in any DataFrame
  derived from it (its expression graph, ``ddf.expr.walk()``);
* :func:`check_newer` is the overwrite's check before Spark's writer starts (the
  table's latest version, from ``DESCRIBE HISTORY``, must be the one read), and
  :func:`check_replaced` the one after it commits, for a commit that landed between
  the check and the writer's transaction (milliseconds): the first commit after the
  version read must be the overwrite itself.
"""

from __future__ import annotations

import os
import re
from collections import OrderedDict

from spark_dask.delta.sources import is_table_name, spark_source
from spark_dask.errors import DeltaError
from spark_dask.spark.compat import current_catalog
from spark_dask.spark.pyspark_warnings import query_errors_quiet

# expression name -> (table key, version): the reads of this process, newest last
READS: OrderedDict[str, tuple[str, int]] = OrderedDict()
KEEP = 10_000  # reads remembered (a few hundred bytes each)
# the operations of DESCRIBE HISTORY that replace a table's rows as a whole
OVERWRITES = ("WRITE", "CREATE OR REPLACE TABLE AS SELECT", "REPLACE TABLE AS SELECT", "CREATE OR REPLACE TABLE")


def remember(ddf, key: str, version: int | None):
    """Record that ``ddf`` holds the rows of version ``version`` of the table ``key``
    (:func:`table_key`); ``ddf`` is returned. Nothing for a frame without an expression
    (a legacy Dask DataFrame) or an unknown version."""
    expr = getattr(ddf, "expr", None)
    if expr is not None and version is not None:
        READS[expr._name] = (key, int(version))
        while len(READS) > KEEP:
            READS.popitem(last=False)
    return ddf


def versions_read(ddf) -> dict[str, int]:
    """The tables ``ddf`` was computed from, each with the oldest version of it read."""
    expr = getattr(ddf, "expr", None)
    found: dict[str, int] = {}
    if expr is None or not READS:
        return found
    for node in expr.walk():
        hit = READS.get(node._name)
        if hit is not None:
            key, version = hit
            found[key] = min(found.get(key, version), version)
    return found


def table_key(source: str, spark=None) -> str:
    """One name for a table however it is written: a name qualified with the session's
    current catalog and schema, lower case; a path as Spark finds it (``/dbfs/x`` is
    ``dbfs:/x``, ``s3a://`` is ``s3://``, a local path absolute, no trailing ``/``).

    >>> table_key("/dbfs/mnt/t/"), table_key("dbfs:/mnt/t"), table_key("s3a://b/t"), table_key("file:/tmp/x")
    ('path:dbfs:/mnt/t', 'path:dbfs:/mnt/t', 'path:s3://b/t', 'path:/tmp/x')
    """
    if is_table_name(source):
        parts = [p.strip("`").lower() for p in re.findall(r"`[^`]+`|[^.]+", source)]
        if len(parts) < 3 and spark is not None:
            parts = [current_catalog(spark).lower(), spark.catalog.currentDatabase().lower()][: 3 - len(parts)] + parts
        return "table:" + ".".join(parts)
    location = spark_source(source)
    location = re.sub(r"^s3[an]://", "s3://", location)
    if location.startswith("file:"):
        location = "/" + location[len("file:") :].lstrip("/")
    if "://" not in location and not location.startswith("dbfs:"):
        location = os.path.abspath(location)
    return "path:" + (location.rstrip("/") or "/")


def _reference(target: str) -> str:
    if is_table_name(target):
        return target
    return "delta.`" + spark_source(target).replace("`", "``") + "`"


def history(spark, target: str, after: int | None = None) -> list[dict]:
    """The table's commits (``DESCRIBE HISTORY``), oldest first, each a dict of
    ``version``, ``readVersion``, ``operation``, ``mode`` and ``isBlindAppend``; with
    ``after``, only the versions after it (else the latest one). ``[]`` where Spark
    cannot tell (no such table, not a Delta table)."""
    try:
        with query_errors_quiet():
            frame = spark.sql(f"DESCRIBE HISTORY {_reference(target)}" + ("" if after is not None else " LIMIT 1"))
            if after is not None:
                frame = frame.where(f"version > {int(after)}")
            columns = ("version", "readVersion", "operation", "operationParameters", "isBlindAppend")
            rows = frame.select(*columns).collect()
    except Exception:  # noqa: BLE001 - any analysis or Py4J error: Spark cannot tell
        return []
    commits = [
        {
            "version": r["version"],
            "readVersion": r["readVersion"],
            "operation": r["operation"],
            "mode": (r["operationParameters"] or {}).get("mode"),
            "isBlindAppend": r["isBlindAppend"],
        }
        for r in rows
    ]
    return sorted(commits, key=lambda c: c["version"])


def latest(spark, target: str) -> int | None:
    """The table's latest version as Spark sees it, or None where Spark cannot tell."""
    found = history(spark, target)
    return found[-1]["version"] if found else None


def check_newer(spark, target: str, read: int) -> None:
    """Refuse an overwrite of ``target`` from rows read at version ``read`` when the
    table has a newer commit (:class:`DeltaError` naming both versions)."""
    now = latest(spark, target)
    if now is not None and now > read:
        newer = f"version {now}" if now == read + 1 else f"versions {read + 1} to {now}"
        raise DeltaError(
            f"spark-dask: the Delta table {target} is at version {now}, newer than version {read} this DataFrame was "
            f"read at: overwriting it would replace the changes of {newer} (Spark's own read-then-overwrite would "
            "include them). Read the table again and redo the computation, or pass replace_newer=True to "
            "write_delta to replace them on purpose"
        )


def is_overwrite(commit: dict) -> bool:
    """Whether a commit of :func:`history` replaced the table's rows as a whole.

    >>> is_overwrite({"operation": "WRITE", "mode": "Overwrite", "isBlindAppend": False})
    True
    >>> is_overwrite({"operation": "WRITE", "mode": "Append", "isBlindAppend": True})
    False
    """
    if commit["isBlindAppend"] or commit["operation"] not in OVERWRITES:
        return False
    return commit["operation"] != "WRITE" or str(commit["mode"]).lower() == "overwrite"


def replaced(commits: list[dict]) -> int | None:
    """Of the commits after the version an overwrite's rows were read at (:func:`history`,
    oldest first), the one it replaced: the first, unless that is the overwrite itself.

    >>> w = {"operation": "WRITE", "mode": "Overwrite", "isBlindAppend": False}
    >>> a = {"operation": "WRITE", "mode": "Append", "isBlindAppend": True}
    >>> replaced([{**w, "version": 6, "readVersion": 5}])
    >>> replaced([{**a, "version": 6, "readVersion": 5}, {**w, "version": 7, "readVersion": 6}])
    6
    """
    if not commits or is_overwrite(commits[0]):
        return None
    return commits[0]["version"]


def check_replaced(spark, target: str, read: int) -> None:
    """After an overwrite from rows read at ``read`` committed: raise when another
    writer's commit landed before it (between :func:`check_newer` and the writer's
    transaction), naming the version that still holds its changes."""
    lost = replaced(history(spark, target, after=read))
    if lost is not None:
        raise DeltaError(
            f"spark-dask: write_delta overwrote the Delta table {target}, but another writer committed version {lost} "
            f"after version {read} this DataFrame was read at and just before the overwrite, whose commit replaced "
            f"its changes: they are still in the table's history (read_delta({target!r}, version={lost}), or "
            "RESTORE TABLE in Spark)"
        )


__all__ = [
    "KEEP",
    "OVERWRITES",
    "READS",
    "check_newer",
    "check_replaced",
    "history",
    "is_overwrite",
    "latest",
    "remember",
    "replaced",
    "table_key",
    "versions_read",
]
