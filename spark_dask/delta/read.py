"""``spark_dask.read_delta``: a Delta table as a Dask DataFrame, read right.

Two paths. ``via="files"``: the driver replays the Delta log (:mod:`.log`) and checks
the table's features (:mod:`.features`); each live data file becomes one Dask
partition, read on a worker with its deletion vector applied (:mod:`.files`).
A table name's files are found and opened with the credentials Unity Catalog vends
for it (:mod:`.vending`). ``via="spark"``: Spark reads the table (row filters and column
masks, any feature), and ``to_dask`` moves the rows. ``via="auto"``: the files where
the catalog vends them and their features allow, else through Spark with one warning
saying why.
"""

from __future__ import annotations

import logging
import re
import warnings
from datetime import date, datetime

from spark_dask import errors
from spark_dask.delta import (
    ansi,
    calendar,
    compare,
    dv,
    features,
    files,
    lineage,
    literals,
    log,
    prune,
    stores,
    unity,
    vending,
)
from spark_dask.delta import schema as schemas
from spark_dask.delta.sources import file_source, is_table_name, spark_source
from spark_dask.errors import DeltaError, PlanError
from spark_dask.events import outside_package
from spark_dask.handoff import arrow_types
from spark_dask.handoff import driver as handoff
from spark_dask.spark import frames
from spark_dask.spark.compat import current_catalog, spark_version
from spark_dask.spark.conf import conf
from spark_dask.spark.pyspark_warnings import query_errors_quiet
from spark_dask.spark.session import active_session
from spark_dask.spark.shipping import by_value, ship_by_value

logger = logging.getLogger("spark_dask")

# What the file reader runs on the Dask workers (any Dask cluster: they need not have
# spark_dask), pickled by value; numpy is every Dask DataFrame worker's.
SHIPPED = (errors, arrow_types, dv, schemas, calendar, literals, ansi, compare, prune, files, stores)
SHIPPED_NEEDS = ("numpy",)

VIAS = ("auto", "files", "spark")


def read_delta(
    source: str,
    *,
    version: int | None = None,
    timestamp=None,
    columns: list[str] | None = None,
    filters=None,
    storage_options: dict | None = None,
    via: str = "auto",
    catalog=None,
    spark=None,
    client=None,
    backend: str | None = None,
):
    """A Delta table as a Dask DataFrame: deletion vectors applied, column mapping
    read, types as Spark reads them.

    Parameters
    ----------
    source : str
        A table path or URI (``/dbfs/...``, ``s3://...``, ``abfss://...``: any
        fsspec URL) or a table name (``catalog.schema.table``): its files read with the
        credentials Unity Catalog vends for it, where it does (``catalog``), else
        through Spark.
    version : int, optional
        Time travel: the table as of this version (Spark's ``versionAsOf``).
    timestamp : str or datetime, optional
        Time travel: the newest version committed at or before it (Spark's
        ``timestampAsOf``; a time without a zone is in the session time zone, UTC
        without a session). Not together with ``version``.
    columns : list of str, optional
        The columns to read (all by default).
    filters : list, optional
        ``[(column, op, value), ...]`` (AND) or a list of such lists (OR), as
        ``dask.dataframe.read_parquet`` takes them: files whose partition values or
        statistics rule every row out are not read, and the rows are filtered.
    storage_options : dict, optional
        fsspec options for the table's storage (credentials, endpoint).
    via : {"auto", "files", "spark"}
        ``files``: read the data files on the Dask workers; a table feature the file
        reader does not implement is refused (:class:`~spark_dask.DeltaError`).
        ``spark``: read through Spark and hand the rows over (``to_dask``; needs a
        running spark-dask cluster). ``auto``: the files when the catalog vends
        credentials for a name and the table's features allow, else through Spark
        (with a warning saying why; a name without a catalog configured, silently).
    catalog : str, databricks.sdk.WorkspaceClient or False, optional
        The Unity Catalog that vends a name's credentials: a workspace client (any of
        the databricks-sdk's authentications), a URL (a workspace or an open-source
        Unity Catalog server; its token as the SDK finds it), or ``False`` (names
        through Spark). Default: ``DATABRICKS_HOST`` with its token, else the notebook
        context on Databricks, else a ``~/.databrickscfg`` profile. Its token stays
        on the driver: the workers get the vended credentials only, renewed before
        they expire.
    spark : SparkSession, optional
        For ``via="spark"`` (default: the active session); for ``files``, its time zone.
    client : distributed.Client, optional
        Default: the current client.
    backend : {"pandas", "cudf"}, optional
        Default: ``cudf`` on dask-cuda workers, else ``pandas``.

    Returns
    -------
    dask.dataframe.DataFrame
        With ``via="files"``, one partition per data file (``npartitions`` is the
        number of files read).
    """
    _check_arguments(source, version, timestamp, columns, via)
    if via == "spark":
        return read_with_spark(source, version, timestamp, columns, filters, spark, client, backend)
    import fsspec

    storage_options = stores.StorageOptions(storage_options or {})  # its repr hides the credentials
    session = _session(spark)  # None without one: UTC, no ANSI mode, a name as written
    key = lineage.table_key(source, session)
    files_at, readers_options = file_source(source), storage_options
    if is_table_name(source):
        vended = vended_table(source, key, catalog, storage_options, client, strict=via == "files")
        if vended is None:
            return read_with_spark(source, version, timestamp, columns, filters, spark, client, backend)
        files_at, storage_options, readers_options = vended.location, vended.options, vended.lease
    tz = _time_zone(session)
    with stores.access(source, "the driver"):  # gcsfs refuses missing credentials as the filesystem is made
        fs, root = fsspec.core.url_to_fs(files_at, **storage_options)
        root = root.rstrip("/")
        snapshot = _snapshot(fs, root, version, timestamp, tz, source)
    why = features.refusal(snapshot.protocol, snapshot.metadata) or features.filter_refusal(
        schemas.table_schema(snapshot.metadata)["fields"], filters
    )
    if why and via == "auto":
        warnings.warn(f"spark-dask: reading {source} through Spark: {why}", UserWarning, **outside_package())
        return read_with_spark(source, version, timestamp, columns, filters, spark, client, backend)
    features.check(why, source)
    location = files_at.rstrip("/") if "://" in files_at else root  # what the workers open
    ddf = read_files(
        snapshot, location, columns, filters, readers_options, tz, client, backend, ansi=session_ansi(session)
    )
    return lineage.remember(ddf, key, snapshot.version)


def vended_table(source: str, key: str, catalog, storage_options, client, strict: bool):
    """The table named ``source`` (``key``: :func:`lineage.table_key`, qualified with the
    session's catalog and schema) with the credentials Unity Catalog vends for it
    (:func:`spark_dask.delta.vending.open_table`), or None: read it through Spark (with
    one warning saying why, where a catalog was asked). ``strict`` (``via="files"``):
    a :class:`DeltaError` instead."""
    found, why = unity.connect(catalog)
    missing = ""
    full_name = key[len("table:") :]
    if found is not None and full_name.count(".") != 2:
        found, why = None, "a name of fewer than three parts needs a Spark session's current catalog and schema"
    if found is not None:
        try:
            return vending.open_table(found, full_name, storage_options, _client(client))
        except DeltaError as e:  # the catalog's refusal (unity.refusal), or the table's
            why, missing = str(e), getattr(e, "missing", "")
    if strict:
        raise DeltaError(vending_refusal_message(source, why or NO_CATALOG, missing))
    if why:
        warnings.warn(f"spark-dask: reading {source} through Spark: {why}", UserWarning, **outside_package())
    return None


NO_CATALOG = (
    "no Unity Catalog is configured (DATABRICKS_HOST and DATABRICKS_TOKEN, a ~/.databrickscfg profile, the "
    "notebook context on Databricks, or read_delta(..., catalog=URL or WorkspaceClient))"
)


def vending_refusal_message(source: str, why: str, missing: str) -> str:
    """The one line of a ``via="files"`` read of a name the catalog gave no files for.

    >>> vending_refusal_message("m.s.t", "Unity Catalog refused credentials for m.s.t (...)", "EXTERNAL USE SCHEMA on m.s")
    "spark-dask: via='files' cannot read m.s.t: Unity Catalog refused credentials for m.s.t (...). Ask for EXTERNAL USE SCHEMA on m.s, or read it with via='auto' or 'spark'"
    """
    ask = f"Ask for {missing}, or read" if missing else "Read"
    return f"spark-dask: via='files' cannot read {source}: {why}. {ask} it with via='auto' or 'spark'"


def _session(spark):
    """``spark``, else the active session, else None (no pyspark, or no session)."""
    try:
        return active_session(spark)
    except (ImportError, PlanError):
        return None


def _client(client):
    if client is not None:
        return client
    from distributed import default_client

    try:
        return default_client()
    except ValueError:
        raise PlanError(
            "spark-dask: read_delta of a Unity Catalog name needs a Dask client for the renewal of its credentials: "
            "start one first (spark_dask.start(spark))"
        ) from None


def _check_arguments(source, version, timestamp, columns, via) -> None:
    if not isinstance(source, str) or not source:
        raise PlanError(f"spark-dask: read_delta needs a table path or name, got {source!r}")
    if via not in VIAS:
        raise PlanError(f"spark-dask: via must be one of {', '.join(VIAS)}, got {via!r}")
    if version is not None and timestamp is not None:
        raise PlanError("spark-dask: pass version or timestamp, not both")
    if version is not None and (isinstance(version, bool) or not isinstance(version, int) or version < 0):
        raise PlanError(f"spark-dask: version must be a non-negative integer, got {version!r}")
    if columns is not None and (isinstance(columns, str) or not all(isinstance(c, str) for c in columns)):
        raise PlanError(f"spark-dask: columns must be a list of column names, got {columns!r}")


def _time_zone(spark) -> str:
    spark = _session(spark)
    if spark is None:
        return "UTC"
    return conf(spark, "spark.sql.session.timeZone", "UTC", sql=True) or "UTC"


def session_ansi(spark) -> bool | None:
    """Whether ``spark`` (the active session when None) compares by Spark's ANSI rules
    (:func:`spark_dask.delta.ansi.ansi_mode`); None without a session."""
    spark = _session(spark)
    if spark is None:
        return None
    try:
        version = spark_version(spark)
    except Exception:  # noqa: BLE001 - a version that cannot be read: the conf may still say
        version = None
    return ansi.ansi_mode(version, conf(spark, "spark.sql.ansi.enabled", None, sql=True))


def timestamp_ms(value, tz: str) -> int:
    """A time-travel timestamp in ms since the epoch; one without a zone is in ``tz``.

    >>> timestamp_ms("1970-01-01 00:00:01", "UTC"), timestamp_ms("1970-01-01T01:00:00+01:00", "UTC")
    (1000, 0)
    >>> timestamp_ms("1970-01-01 01:00:00", "Europe/Paris")
    0
    """
    if isinstance(value, date) and not isinstance(value, datetime):
        value = datetime(value.year, value.month, value.day)
    if not isinstance(value, (str, datetime)):
        raise PlanError(f"spark-dask: timestamp must be a string or a datetime, got {value!r}")
    try:
        return int(schemas.local_time(value, tz).timestamp() * 1000)
    except ValueError:
        raise PlanError(f"spark-dask: timestamp {value!r} is not an ISO date or time (2024-05-01 12:00:00)") from None


def _snapshot(fs, root: str, version, timestamp, tz: str, source: str) -> log.Snapshot:
    listing = log.list_log(fs, root, source)
    latest = log.latest_version(listing)
    if timestamp is not None:
        head = log.replay(fs, root, latest, listing)
        times = log.commit_times(fs, root, listing, head.metadata)
        version = log.version_at(times, timestamp_ms(timestamp, tz), str(timestamp), tz, source)
        return head if version == latest else log.replay(fs, root, version, listing)
    if version is not None and version > latest:
        raise DeltaError(f"spark-dask: the Delta table {source} has no version {version} (its latest is {latest})")
    return log.replay(fs, root, latest if version is None else version, listing)


def read_files(
    snapshot: log.Snapshot, root: str, columns, filters, storage_options, tz: str, client, backend, ansi=False
):
    """The ``via="files"`` read of one snapshot: a partition per file that may match;
    ``ansi``: the session's ANSI mode (:func:`session_ansi`)."""
    import dask.dataframe as dd

    table_schema = schemas.table_schema(snapshot.metadata)
    fields = table_schema["fields"]
    names = [f["name"] for f in fields]
    missing = [c for c in columns or [] if c not in names]
    if missing:
        raise PlanError(f"spark-dask: no column {missing[0]!r} in the table (its columns: {', '.join(names)})")
    mode = features.column_mapping_mode(snapshot.metadata)
    dnf = prune.normalize(filters, fields, tz, ansi)
    by_name = {f["name"]: f for f in fields}
    tasks = [r for r in snapshot.files if prune.keep(r, dnf, by_name, mode, tz)]
    backend = handoff.read_backend(backend, client)
    plan = files.plan(root, table_schema, mode, tz, columns, dnf, storage_options, backend)
    meta = files.to_frame(files.logical_table(_empty(), {}, plan, files.target_schema(plan)), plan)
    logger.debug(
        "spark-dask: read_delta %s version %d: %d of %d files", root, snapshot.version, len(tasks), len(snapshot.files)
    )
    if not tasks:
        return dd.from_pandas(meta, npartitions=1)
    check_pyroaring(root, tasks)
    ship_by_value(*SHIPPED)
    return dd.from_map(
        by_value(stores.read_file), tasks, plan=plan, meta=meta, label="read-delta", enforce_metadata=False
    )


def check_pyroaring(root: str, tasks: list[dict]) -> None:
    """Refuse, before the graph is built, a read of files with deletion vectors where
    pyroaring, which decodes them on the workers, does not import (it failed there, when
    computed, with ``ModuleNotFoundError``); the workers' Python is the doctor's to check."""
    if not any(t.get("deletionVector") for t in tasks):
        return
    try:
        import pyroaring  # noqa: F401
    except ImportError:
        raise DeltaError(
            f"spark-dask: the Delta table {root} has deletion vectors, which the file reader decodes with pyroaring, "
            "and pyroaring does not import here: pip install 'spark-dask[delta]' (here and on every Dask worker: "
            "spark-dask doctor checks the executors), or read it with via='spark'"
        ) from None


def _empty():
    """A file of no rows and no columns: its logical table is the read's ``meta``."""
    import pyarrow as pa

    return pa.table({})


# Delta Lake's Spark connector per Spark line (Maven Central; examples/delta_lake.py
# keeps the same table for its Spark writer)
DELTA_CONNECTORS = {
    (3, 5): "io.delta:delta-spark_2.12:3.3.2",
    (4, 0): "io.delta:delta-spark_2.13:4.0.1",
    (4, 1): "io.delta:delta-spark_4.1_2.13:4.4.0",
    (4, 2): "io.delta:delta-spark_4.2_2.13:4.4.0",
}
NOT_FOUND = ("TABLE_OR_VIEW_NOT_FOUND", "REQUIRES_SINGLE_PART_NAMESPACE", "SCHEMA_NOT_FOUND", "CATALOG_NOT_FOUND")


def spark_read_problem(error: BaseException, source: str, version: tuple, catalog: str) -> str | None:
    """One line for Spark's failure to read ``source`` through its Delta connector
    (None: another failure, raised as Spark gave it): no connector in this Spark
    (``DATA_SOURCE_NOT_FOUND``), or no such table in the catalog asked.

    >>> spark_read_problem(Exception("[DATA_SOURCE_NOT_FOUND] Failed to find the data source: delta."), "/t", (3, 5, 5), "x")[:70]
    "spark-dask: this Spark 3.5 has no Delta Lake connector, so via='spark'"
    >>> spark_read_problem(Exception("[TABLE_OR_VIEW_NOT_FOUND] ..."), "db.t", (4, 1, 0), "spark_catalog")[:60]
    'spark-dask: no table db.t in the Spark catalog spark_catalog'
    >>> spark_read_problem(Exception("[REQUIRES_SINGLE_PART_NAMESPACE] ..."), "main.s.t", (4, 1, 0), "main")[:52]
    'spark-dask: no catalog main in this Spark session (S'
    """
    text = str(error)
    line = ".".join(map(str, version[:2]))
    if "DATA_SOURCE_NOT_FOUND" in text or "Failed to find data source: delta" in text:
        coordinate = DELTA_CONNECTORS.get(tuple(version[:2]))
        package = f"--packages {coordinate}" if coordinate else f"the Delta Lake connector released for Spark {line}"
        return (
            f"spark-dask: this Spark {line} has no Delta Lake connector, so via='spark' cannot read {source}: start "
            f"the Spark application with {package}, spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension "
            "and spark.sql.catalog.spark_catalog=org.apache.spark.sql.delta.catalog.DeltaCatalog (Databricks has "
            "it built in), or read a table path with via='files'"
        )
    found = next((c for c in NOT_FOUND if c in text), None)
    if found is None:
        return None
    if found in ("REQUIRES_SINGLE_PART_NAMESPACE", "CATALOG_NOT_FOUND"):
        return (
            f"spark-dask: no catalog {catalog} in this Spark session (Spark: {found}), so {source} is no table here: "
            f"check the name (catalog.schema.table), configure the catalog (spark.sql.catalog.{catalog}), or pass "
            "the table's path"
        )
    return (
        f"spark-dask: no table {source} in the Spark catalog {catalog} (Spark: {found}): check the name "
        "(catalog.schema.table, where the catalog is configured as spark.sql.catalog.<name>), or pass the "
        "table's path"
    )


def _catalog_asked(spark, source: str) -> str:
    parts = [p.strip("`") for p in re.findall(r"`[^`]+`|[^.]+", source)]
    if len(parts) == 3:
        return parts[0]
    return current_catalog(spark)


def read_with_spark(source: str, version, timestamp, columns, filters, spark, client, backend):
    """The ``via="spark"`` read: Spark's Delta reader, then ``to_dask``; a Spark without
    the connector, or a table name Spark does not find, in one line
    (:func:`spark_read_problem`)."""
    spark = active_session(spark)
    if version is None and timestamp is None:
        version = lineage.latest(spark, source)  # pinned: the frame's rows are of one known version
    try:
        with query_errors_quiet():
            df = _spark_frame(spark, source, version, timestamp)
    except Exception as e:
        problem = spark_read_problem(e, source, spark_version(spark), _catalog_asked(spark, source))
        if problem is None:
            raise
        raise DeltaError(problem) from None
    dnf = prune.normalize(filters, [{"name": n} for n in df.columns])
    if dnf:
        ntz = [f.name for f in df.schema.fields if f.dataType.typeName() == "timestamp_ntz"]
        df = df.where(spark_condition(dnf, _time_zone(spark), ntz=ntz))
    if columns is not None:
        df = df.select(*columns)
    ddf = handoff.to_dask(df, client=client, backend=backend)
    if timestamp is not None:
        return ddf  # the version Spark chose for the time is not known here: not remembered
    return lineage.remember(ddf, lineage.table_key(source, spark), version)


def _spark_frame(spark, source: str, version, timestamp):
    """Spark's DataFrame of the table (a name through the catalog, a path through the
    Delta data source), as of ``version`` or ``timestamp``."""
    if is_table_name(source):
        clause = f" VERSION AS OF {int(version)}" if version is not None else ""
        if timestamp is not None:
            clause = f" TIMESTAMP AS OF '{_sql_timestamp(timestamp)}'"
        return spark.sql(f"SELECT * FROM {source}{clause}")
    reader = spark.read.format("delta")
    source = spark_source(source)
    if version is not None:
        reader = reader.option("versionAsOf", int(version))
    if timestamp is not None:
        reader = reader.option("timestampAsOf", _sql_timestamp(timestamp))
    return reader.load(source)


def _sql_timestamp(value) -> str:
    return value.isoformat(sep=" ") if isinstance(value, (datetime, date)) else str(value)


def spark_condition(dnf, tz: str = "UTC", ntz=()):
    """The Spark Column of filters in disjunctive normal form; a datetime without a zone
    in ``tz``, the session's, or a TIMESTAMP_NTZ beside the columns ``ntz``, as the file
    reader takes it (py4j would take it in this process's zone:
    :func:`spark_dask.delta.compare.spark_value`)."""

    def value(name, v):
        return compare.spark_value(v, tz, ntz=name in ntz)

    return prune.fold(
        dnf, frames.column, value, lambda column, name, values: column.isin([value(name, v) for v in values])
    )


__all__ = [
    "VIAS",
    "is_table_name",
    "read_delta",
    "read_files",
    "read_with_spark",
    "session_ansi",
    "spark_condition",
    "timestamp_ms",
]
