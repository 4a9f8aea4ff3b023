"""``to_dask`` and ``to_spark``: data between Spark and Dask without the driver or storage.

Spark → Dask: a Spark job (ordinary tasks in the slots the gang leaves free; on classic
Spark over the Arrow batches the JVM makes, ``toArrowBatchRdd``, on Spark Connect a
``mapInArrow``) writes each partition as an Arrow IPC file on its machine's local disk
(``SPARK_LOCAL_DIRS``) and returns only (host, path, rows, bytes); one Dask task per
file, restricted to a worker of that machine, loads it memory mapped. The loading
tasks' results are the Dask data; the files back them (a lost worker's partitions are
loaded again from them) until the scheduler forgets the loading keys, or the cluster
closes, when the workers remove them.

Dask → Spark: each Dask partition is written as an Arrow IPC file on its worker's
machine; the Spark DataFrame is a ``mapInArrow`` over one partition per file, each
preferring its file's executor host (classic Spark; ``spark.range(n)`` on Spark
Connect), that reads them (memory mapped on the same machine, streamed from a worker of
the file's machine over the cluster's TLS comms otherwise) whenever Spark computes it;
the files stay until the cluster closes. With ``checkpoint=True`` one scan fills Spark's cache with
the rows instead, and the files are removed at once.

See ``docs/handoff.md``.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from contextlib import contextmanager, suppress
from typing import NamedTuple

from spark_dask import registry
from spark_dask.cluster import SparkCluster
from spark_dask.errors import HandoffError, HandoffTypeError, PlanError
from spark_dask.gangs import transfer_room
from spark_dask.handoff import arrow_types, files, transfer
from spark_dask.handoff.files import (
    NO_BYTE_LIMIT,
    byte_limit_is_redundant,
    host_workers,
    load_key,
    ordered_parts,
    read_parts,
    transfer_dir_name,
    transfer_dirs,
)
from spark_dask.handoff.registry import TransferFiles, transfer_files
from spark_dask.spark import compat, frames, jobs
from spark_dask.spark.compat import task_profiles_supported
from spark_dask.spark.jobtags import tagged
from spark_dask.spark.pyspark_warnings import pandas3_warning_off
from spark_dask.spark.session import application_id, conf, is_stopped
from spark_dask.spark.shipping import by_value

logger = logging.getLogger("spark_dask")
# The Dask tasks' functions, sent by value inside the graphs (spark_dask.spark.shipping)
_LOAD_PARTITION = by_value(transfer.load_partition)
_WRITE_PARTITION = by_value(transfer.write_partition)

__all__ = ["HandoffError", "HandoffTypeError", "to_dask", "to_spark"]


# ---------------------------------------------------------------------------- checks
def _cluster_and_client(client):
    """(SparkCluster, its parts, Client) of the running spark-dask cluster, or a clear error."""
    from distributed import Client

    if client is None:
        try:
            client = Client.current()
        except ValueError:
            raise HandoffError(
                "spark-dask: no running Dask cluster: start one first, e.g. "
                "`with spark_dask.start(spark) as client: ddf = spark_dask.to_dask(df)`"
            ) from None
    if client.asynchronous:
        raise HandoffError("spark-dask: to_dask/to_spark are blocking calls; use a synchronous Client")
    cluster = client.cluster if isinstance(getattr(client, "cluster", None), SparkCluster) else None
    if cluster is None:
        address = getattr(client.scheduler, "address", None)
        cluster = next((c for c in registry.live() if c.scheduler_address == address), None)
    if cluster is None:
        if client.status in ("closed", "closing"):
            raise HandoffError(
                "spark-dask: the Dask client is closed; start a new cluster with spark_dask.start(spark)"
            )
        raise HandoffError(
            "spark-dask: the Dask client is not connected to a spark-dask cluster (a SparkCluster started "
            "in this process): to_dask/to_spark move data between the Spark executors and the Dask workers "
            "that spark-dask started on them"
        )
    if cluster.status.name != "running" or cluster.scheduler is None or client.status != "running":
        raise HandoffError(
            f"spark-dask: the Dask cluster {cluster.tag} is {cluster.status.name} (client {client.status}); "
            "start a new one with spark_dask.start(spark)"
        )
    return cluster, registry.parts_of(cluster), client


def _check_session(spark, cluster, what: str) -> None:
    if is_stopped(spark):
        raise HandoffError(f"spark-dask: {what}'s SparkSession is stopped")
    if spark is cluster.spark:
        return
    mine, theirs = application_id(spark), application_id(cluster.spark)
    if mine is None or mine != theirs:
        raise HandoffError(
            f"spark-dask: {what} belongs to another Spark application ({mine}) than the Dask cluster "
            f"{cluster.tag} ({theirs}): its data is on other executors. Use the session the cluster was "
            "started with (cluster.spark)"
        )


class Opening(NamedTuple):
    """What a transfer begins with, in either direction (:func:`_open_transfer`)."""

    cpu_only: bool  # its Spark job's tasks take the CPU-only profile
    transfers: TransferFiles  # the cluster's transfers (the workers remove the files)
    hosts: dict  # the workers' hosts (files.host_table)
    tid: str  # the transfer's id
    dirname: str  # its directory's name on every host


def _open_transfer(cluster, parts, client, direction: str) -> Opening:
    """The slot question (refused at once when the gangs leave the transfer no task slot),
    the cluster's transfers, the workers' hosts, and a new transfer registered there."""
    spark = cluster.spark
    cpu_only, refusal = transfer_room(parts, spark, cluster.tag, task_profiles_supported(spark), direction)
    if refusal is not None:
        raise HandoffError(refusal)
    transfers = transfer_files(cluster, client, parts)
    hosts = _hosts(client)
    tid = uuid.uuid4().hex[:12]
    dirname = transfer_dir_name(cluster.tag, tid)
    transfers.add(tid, transfer_dirs(hosts, dirname))
    return Opening(cpu_only, transfers, hosts, tid, dirname)


def _arrow_confs(spark) -> tuple[str, bool]:
    """The session's time zone and whether Arrow's large string and binary types are on."""
    tz = conf(spark, "spark.sql.session.timeZone", "UTC", sql=True)
    large = conf(spark, "spark.sql.execution.arrow.useLargeVarTypes", "false", sql=True).lower() == "true"
    return tz, large


# Rows per Arrow batch that Spark's JVM makes for a transfer: about this many bytes
# (estimated from the schema), at least Spark's default 10,000 rows. A partition of up
# to this size is one batch, so its file is one chunk per column, which the Dask worker
# loads without a copy (the frame's columns map the file: the data is held once on the
# host); a larger one is several batches, concatenated when loaded. 64 MiB: Spark's own
# bound on a batch it sends to Python (spark.sql.execution.arrow.maxBytesPerBatch), a
# byte[] of that size on the executor's heap while the task writes it.
BATCH_BYTES = 64 * 2**20
# ... and that the Dask workers write for to_spark (see transfer.write_partition)
WRITE_BATCH_BYTES = 4 * 2**20


def batch_rows(schema, target: int = BATCH_BYTES) -> int:
    """Rows per Arrow batch for about ``target`` bytes, from the schema's widths
    (variable-length and nested columns counted as 32 bytes a value).

    >>> import pyarrow as pa
    >>> batch_rows(pa.schema([("a", pa.int64()), ("b", pa.float64())]))
    4194304
    >>> batch_rows(pa.schema([("s", pa.string())] * 1000), target=16 * 2**20)
    10000
    """
    width = sum(32 if (n := files.value_bytes(field.type)) is None else n for field in schema)
    return max(10_000, target // max(width, 1))


def _collect(df, spec: dict, schema, tz: str, large: bool, cpu_only: bool, tag: str, description: str) -> list[dict]:
    """Run the Spark → Dask transfer's Spark job (tagged); the tasks' report rows.

    Classic Spark: the JVM turns the rows into Arrow batches, the Python tasks write
    them (:func:`spark_dask.spark.frames.jvm_arrow_rdd`). Spark Connect: ``mapInArrow``."""
    spark = df.sparkSession
    profile = jobs.cpu_profile(spark) if cpu_only else None
    rows = batch_rows(schema)
    # the session's batch size is the transfer's while the job is made and runs: Spark 3.x's
    # toArrowBatchRdd() and mapInArrow (Spark Connect) read it, Spark 4's toArrowBatchRdd
    # takes it as an argument
    with _transfer_confs(spark, records=rows):
        rdd = frames.jvm_arrow_rdd(df, tz, large, rows)
        if rdd is not None:
            rdd = rdd.mapPartitions(transfer.spark_batch_writer(spec))
            if profile is not None:
                rdd = rdd.withResources(profile)
            with tagged(spark, tag, description):  # the JVM's batches: no byte limit to lift
                return rdd.collect()
        return jobs.map_collect(
            _positional(df),
            transfer.RESULT_DDL,
            transfer.spark_writer(spec),
            cpu_only,
            tag,
            description,
            confs=_transfer_confs(spark, schema, rows),
        )


_MAX_RECORDS = "spark.sql.execution.arrow.maxRecordsPerBatch"
_MAX_BYTES = "spark.sql.execution.arrow.maxBytesPerBatch"
_CODEC = "spark.sql.execution.arrow.compression.codec"  # Spark >= 4.1
_confs_lock = threading.Lock()
_confs_set: dict = {}  # (session, key) -> [transfers running, the session's own value or None]


def transfer_confs(spark, schema=None, records: int | None = None) -> dict[str, str]:
    """The session confs a transfer's Spark job runs with, for rows of Arrow ``schema``
    (None: a job whose batches Python does not receive through ``mapInArrow``):

    - ``records`` (when given): the rows of an Arrow batch the JVM makes
      (``maxRecordsPerBatch``; :func:`batch_rows`: a partition of up to
      :data:`BATCH_BYTES` is one batch, a file the Dask worker loads without a copy);

    - when Spark's byte limit on the Arrow batches it sends to Python need not end a
      batch of these rows, the limit is Int.MaxValue, where Spark (>= 4.0) stops
      estimating the batch's size after every row (the estimate's cost is measured in
      docs/benchmarks.md, "Moving data between Spark and Dask"). It need not when every
      column has a fixed width and either the session's ``maxRecordsPerBatch`` rows stay
      under the session's ``maxBytesPerBatch`` (the batches are the same), or ``records``,
      the transfer's own batch size, stays under twice :data:`BATCH_BYTES` (counted with
      the validity bytes :func:`batch_rows` leaves out): a partition is then one batch, as
      the classic path's ``toArrowBatchRdd`` makes it, which has no byte limit;
    - where the session compresses Arrow batches between the JVM and Python
      (``spark.sql.execution.arrow.compression.codec``, Spark >= 4.1; Spark's
      ``ArrowBatchIterator`` reads it), ``none``: the task would decompress each batch
      at once to write it to a file on the same machine."""
    out = {}
    if records is not None and files.spark_bytes(conf(spark, _MAX_RECORDS, "10000", sql=True)) != records:
        out[_MAX_RECORDS] = str(records)
    if schema is not None and compat.arrow_batches_bounded_by_bytes(spark):
        limit = files.spark_bytes(conf(spark, _MAX_BYTES, "64m", sql=True))
        # a batch of the transfer's own size may exceed the session's limit; an already
        # lifted limit stays (byte_limit_is_redundant is False at NO_BYTE_LIMIT)
        bound = limit if records is None or limit is None else max(limit, 2 * BATCH_BYTES)
        if records is None:
            records = files.spark_bytes(conf(spark, _MAX_RECORDS, "10000", sql=True))
        if records is not None and bound is not None and byte_limit_is_redundant(schema, records, bound):
            out[_MAX_BYTES] = str(NO_BYTE_LIMIT)
    if (conf(spark, _CODEC, "none", sql=True) or "none").lower() != "none":
        out[_CODEC] = "none"
    return out


@contextmanager
def _transfer_confs(spark, schema=None, records: int | None = None):
    """While a transfer's Spark job runs: the session set to :func:`transfer_confs`,
    each key put back after the job (the last of concurrent transfers restores it;
    unset when the session had not set it)."""
    session = application_id(spark) or id(spark)
    done = []
    with _confs_lock:
        for key, value in transfer_confs(spark, schema, records).items():
            entry = _confs_set.get((session, key))
            if entry is None:
                try:
                    previous = spark.conf.get(key, None)
                    spark.conf.set(key, value)
                except Exception as e:  # noqa: BLE001 - a platform that does not let sessions set it
                    logger.debug("spark-dask: could not set %s for the transfer: %s", key, e)
                    continue
                _confs_set[(session, key)] = [1, previous]
            else:
                entry[0] += 1
            done.append(key)
    try:
        yield
    finally:
        with _confs_lock:
            for key in done:
                entry = _confs_set[(session, key)]
                entry[0] -= 1
                if entry[0] == 0:
                    del _confs_set[(session, key)]
                    with suppress(Exception):
                        if entry[1] is None:
                            spark.conf.unset(key)
                        else:
                            spark.conf.set(key, entry[1])


def _spec_tls(cluster, tls: bool) -> dict | None:
    sec = cluster.security
    if not tls or sec is None:
        return None
    return {"ca": sec.tls_ca_file, "cert": sec.tls_client_cert, "key": sec.tls_client_key}


def _hosts(client) -> dict:
    infos = client.run(transfer.host_info)
    if not infos:
        raise HandoffError(
            "spark-dask: the Dask cluster has no workers right now; wait for them (client.wait_for_workers)"
        )
    return files.host_table(infos)


def _backend(backend: str | None, cluster) -> str:
    if backend is None:
        return "cudf" if cluster is not None and cluster.gang_plan.kind == "cuda" else "pandas"
    if backend not in ("pandas", "cudf"):
        raise PlanError(f"spark-dask: backend must be 'pandas' or 'cudf', got {backend!r}")
    if backend == "cudf":
        try:
            import cudf  # noqa: F401
            import dask_cudf  # noqa: F401
        except ImportError as e:
            raise PlanError(
                f"spark-dask: backend='cudf' needs cudf and dask-cudf in this Python process too ({e}): "
                "pip install 'spark-dask[cuda12]'"
            ) from None
    return backend


def read_backend(backend: str | None = None, client=None) -> str:
    """The backend of a Dask DataFrame read onto the current Dask cluster (not only a
    spark-dask one: ``spark_dask.read_delta`` reads files on any): ``backend`` checked,
    or by default ``cudf`` on a spark-dask cluster of dask-cuda workers or when Dask's
    ``dataframe.backend`` is ``cudf``, else ``pandas``."""
    import dask

    try:
        cluster, _, _ = _cluster_and_client(client)
    except HandoffError:
        cluster = None
    if backend is None and cluster is None:
        backend = "cudf" if dask.config.get("dataframe.backend", "pandas") == "cudf" else "pandas"
    return _backend(backend, cluster)


# ---------------------------------------------------------------------------- to_dask
def to_dask(df, *, client=None, npartitions: int | None = None, backend: str | None = None):
    """A Spark DataFrame as a Dask DataFrame on the running spark-dask cluster.

    The data goes from the Spark executors to the Dask workers on the same machines
    through local Arrow IPC files: not through the driver, not through storage.

    Parameters
    ----------
    df : pyspark.sql.DataFrame
        Classic or Spark Connect, of the application the cluster runs in.
    client : distributed.Client, optional
        Default: the current client (``spark_dask.start(...)``'s).
    npartitions : int, optional
        Default: one Dask partition per non-empty Spark partition. Otherwise Spark
        coalesces (fewer) or repartitions (more) first.
    backend : {"pandas", "cudf"}, optional
        Default: ``cudf`` on dask-cuda workers, else ``pandas``.

    Returns
    -------
    dask.dataframe.DataFrame
        Its ``meta`` comes from the Spark schema (nothing is computed for it); the
        partitions are loading in the background when this returns. Types: see
        ``docs/handoff.md``.
    """
    import dask.dataframe as dd

    spark = spark_session_of(df)
    cluster, parts, client = _cluster_and_client(client)
    _check_session(spark, cluster, "the DataFrame")
    if npartitions is not None and (
        isinstance(npartitions, bool) or not isinstance(npartitions, int) or npartitions < 1
    ):
        raise PlanError(f"spark-dask: npartitions must be a positive integer, got {npartitions!r}")
    backend = _backend(backend, cluster)
    tz, large = _arrow_confs(spark)
    schema = arrow_types.spark_to_arrow_schema(df.schema.jsonValue(), tz, large)
    meta = arrow_types.empty_frame(schema, backend)
    cpu_only, transfers, hosts, tid, dirname = _open_transfer(cluster, parts, client, "to_dask")
    spec = {
        "schema": schema.serialize().to_pybytes(),
        "hosts": hosts,
        "dir": dirname,
        "scheduler": cluster.scheduler_address,
        "tls": _spec_tls(cluster, parts.options.tls),
    }
    if npartitions is not None:
        df = _repartition(df, npartitions)
    t0 = time.monotonic()
    try:
        rows = _collect(
            df,
            spec,
            schema,
            tz,
            large,
            cpu_only,
            f"{cluster.tag}-to-dask-{tid}",
            f"spark-dask: to_dask -> {cluster.tag}",
        )
        loaded = ordered_parts(rows)
        parts.handoff_bytes += sum(p["bytes"] for p in loaded)
        futures = _load(client, transfers, tid, loaded, backend)
    except BaseException:
        transfers.remove_now(tid)
        raise
    logger.debug(
        "spark-dask: to_dask %s: %d partitions, %d rows, %d bytes written in %.2fs",
        tid,
        len(loaded),
        sum(p["rows"] for p in loaded),
        sum(p["bytes"] for p in loaded),
        time.monotonic() - t0,
    )
    if not futures:
        transfers.remove_now(tid)
        return dd.from_pandas(meta, npartitions=1)
    return dd.from_delayed(futures, meta=meta, verify_meta=False)


def spark_session_of(df):
    """The SparkSession of ``df``, a Spark DataFrame (classic or Spark Connect); a
    HandoffTypeError for anything else (a pandas or Dask frame)."""
    kind = type(df)
    if kind.__module__.split(".")[0] != "pyspark" or not hasattr(df, "sparkSession"):
        what = f"{kind.__module__.split('.')[0]}.{kind.__qualname__}"
        raise HandoffTypeError(
            f"spark-dask: to_dask moves a Spark DataFrame, got {what}: a pandas frame becomes a Dask one with "
            "dask.dataframe.from_pandas(pdf, npartitions=...) (no Spark needed), or a Spark one with "
            "spark.createDataFrame(pdf)"
        )
    return df.sparkSession


def _load(client, transfers: TransferFiles, tid: str, parts: list[dict], backend: str) -> list:
    """One Dask task per written file, on a worker of its machine, loading it: the
    futures, in partition order (their keys registered: the files stay while they are
    held)."""
    transfers.add(tid, {(p["hostname"], _parent(p["path"])) for p in parts})
    keys = [load_key(tid, i) for i in range(len(parts))]
    transfers.add(tid, (), keys)
    return [
        client.submit(
            _LOAD_PARTITION,
            p,
            backend,
            key=key,
            workers=[p["ip"]],
            allow_other_workers=True,
            pure=False,
        )
        for key, p in zip(keys, parts)
    ]


def _parent(path: str) -> str:
    return os.path.dirname(path)


def _positional(df):
    """The DataFrame with the columns renamed ``_c0, _c1, ...``: ``mapInArrow`` selects
    each column by name, which fails for names with dots (pyspark's ``self[col]``
    reads ``a.b`` as a field of ``a``). The writer puts the real names back."""
    return df.toDF(*[f"_c{i}" for i in range(len(df.columns))])


def _repartition(df, n: int):
    if compat.jvm_reachable(df.sparkSession):  # Spark Connect has no df.rdd
        with suppress(Exception):
            if n <= df.rdd.getNumPartitions():
                return df.coalesce(n)
    return df.repartition(n)


# ---------------------------------------------------------------------------- to_spark
def to_spark(ddf, spark=None, *, client=None, schema=None, checkpoint: bool = False):
    """A Dask DataFrame as a Spark DataFrame.

    Each Dask partition is written as an Arrow IPC file on its worker's machine (the
    Dask side is computed once, here); the Spark DataFrame reads the files (memory
    mapped on the same machine, over the cluster's TLS comms otherwise). Nothing goes
    through the driver or storage. A named index is kept as the first column(s), as
    ``reset_index()`` would (``ddf.groupby("k").x.mean().to_frame()`` keeps ``k``); an
    unnamed one (the default) is not carried. A named Series moves as one column.

    ``checkpoint=False`` (default): the DataFrame reads the files whenever Spark
    computes it, like a DataFrame of ``spark.read``; they stay until the Dask cluster
    closes, after which the DataFrame cannot be computed (write it to a table, or
    pass ``checkpoint=True``, to use the rows after that). Nothing is held in Spark's
    executors' memory. ``checkpoint=True``: the rows are kept in Spark's cache on the
    executors (``persist()``, memory and disk, filled by one scan: slower than the
    default, see the benchmarks page) and the files are removed at once; the DataFrame outlives the
    Dask cluster, until its rows are dropped from the cache (``unpersist()``,
    ``spark.catalog.clearCache()``), after which it cannot be computed.

    Parameters
    ----------
    ddf : dask.dataframe.DataFrame or dask.dataframe.Series
        pandas- or cudf-backed; a Series needs a name (its column's).
    spark : SparkSession, optional
        Default: the cluster's session.
    schema : StructType or DDL string, optional
        The Spark schema to produce (column order as in ``ddf``, a named index
        first), instead of the one derived from the dtypes (``docs/handoff.md``; an
        ``object`` column gets the type Spark's own inference gives its values: bytes
        ``binary``, dicts maps, lists arrays, ``Decimal`` ``decimal(38,18)``, dates
        ``date``), e.g. to restore non-nullable fields or to say what an ``object``
        column holds.
    """
    from dask import delayed

    ddf = frame_for_spark(ddf)
    cluster, parts, client = _cluster_and_client(client)
    spark = spark if spark is not None else cluster.spark
    _check_session(spark, cluster, "the SparkSession")
    infer = ()
    if schema is None:
        spark_schema = arrow_types.spark_schema_for_frame(ddf._meta)
        if type(ddf._meta).__module__.split(".")[0] != "cudf":  # cudf's object columns are strings
            infer = tuple(i for i, t in enumerate(ddf._meta.dtypes) if t == object)  # noqa: E721 - typed by values
    else:
        spark_schema = frames.schema_json(spark, schema)
        if len(spark_schema["fields"]) != len(ddf.columns):
            raise HandoffTypeError(
                f"spark-dask: schema has {len(spark_schema['fields'])} fields, the Dask DataFrame {len(ddf.columns)} columns"
            )
    tz, large = _arrow_confs(spark)
    arrow_schema = arrow_types.spark_to_arrow_schema(spark_schema, tz, large)
    struct = frames.struct_type(spark_schema)
    cpu_only, transfers, hosts, tid, dirname = _open_transfer(cluster, parts, client, "to_spark")
    schema_bytes = arrow_schema.serialize().to_pybytes()
    try:
        write = delayed(_WRITE_PARTITION, pure=False)
        rows = batch_rows(arrow_schema, WRITE_BATCH_BYTES)
        tasks = [
            write(part, i, dirname, schema_bytes, rows, infer)
            for i, part in enumerate(ddf.to_delayed(optimize_graph=True))
        ]
        written = client.gather(client.compute(tasks))
        parts.handoff_bytes += sum(w["bytes"] for w in written)
        transfers.add(tid, {(w["hostname"], _parent(w["path"])) for w in written if w["path"]})
        if infer:
            spark_schema = arrow_types.merged_object_types(spark_schema, written, infer)
            arrow_schema = arrow_types.spark_to_arrow_schema(spark_schema, tz, large)
            struct, schema_bytes = frames.struct_type(spark_schema), arrow_schema.serialize().to_pybytes()
        parts_spec = read_parts(written, hosts)
        if not parts_spec:
            transfers.remove_now(tid)
            return spark.createDataFrame([], struct)
        spec = {
            "schema": schema_bytes,
            "parts": parts_spec,
            "workers": host_workers(hosts),
            "scheduler": cluster.scheduler_address,
            "tls": _spec_tls(cluster, parts.options.tls),
        }
        ids = frames.preferred_host_ids(spark, [p["spark_host"] for p in parts_spec])
        out = _read_job(
            spark,
            ids,
            struct,
            transfer.spark_reader(spec),
            cpu_only,
            f"{cluster.tag}-to-spark-{tid}",
            f"spark-dask: to_spark <- {cluster.tag}",
            checkpoint,
        )
    except BaseException:
        transfers.remove_now(tid)
        raise
    if checkpoint:
        transfers.remove_now(tid)
    return out


def frame_for_spark(ddf):
    """The Dask DataFrame whose columns ``to_spark`` moves: a named Series as a
    one-column frame (``to_frame()``), a named index as the first column
    (``reset_index()``; Spark has no index, and the key of a ``groupby`` result lives
    there); an unnamed index (the default, or one named ``None``) is dropped.

    Raises HandoffTypeError, before anything is computed, for what has no Spark columns."""
    import dask.dataframe as dd

    if isinstance(ddf, dd.Series):
        if ddf.name is None:
            raise HandoffTypeError(
                "spark-dask: to_spark got a Dask Series without a name, and a Spark column needs one: "
                "name it, e.g. to_spark(series.to_frame('value'))"
            )
        ddf = ddf.to_frame()
    elif not isinstance(ddf, dd.DataFrame):
        raise HandoffTypeError(
            f"spark-dask: to_spark moves a Dask DataFrame or a named Dask Series, got {type(ddf).__module__.split('.')[0]}."
            f"{type(ddf).__qualname__} (a pandas frame becomes a Dask one with dask.dataframe.from_pandas)"
        )
    name = ddf.index.name
    if name is None:
        return ddf
    if name in ddf.columns:
        raise HandoffTypeError(
            f"spark-dask: the index is named {name!r} like a column, and to_spark keeps a named index as a "
            f"column: rename it (ddf.rename_axis('other')) or drop it (ddf.reset_index(drop=True)) first"
        )
    return ddf.reset_index()


def _read_job(spark, ids, struct, fn, cpu_only: bool, tag: str, description: str, checkpoint: bool = False):
    """The Spark job that reads the files: ``ids`` (:func:`~spark_dask.spark.frames.preferred_host_ids`) → ``mapInArrow``
    → kept in Spark's cache (``persist()``: columnar, memory and disk) by one scan, or
    the lazy DataFrame itself (``checkpoint=False``).

    ``persist()`` rather than ``localCheckpoint(eager=True)``, which stores every row as
    one serialized object and was slower both to fill and to scan, whatever the storage
    level (docs/benchmarks.md, "Moving data between Spark and Dask", "Keeping the rows")."""
    profile = jobs.cpu_profile(spark) if cpu_only else None
    new_api = compat.map_in_arrow_takes_profile(spark)
    kwargs = {"profile": profile} if profile is not None and new_api else {}
    with pandas3_warning_off():  # a transfer's mapInArrow: Arrow, not pandas
        out = ids.mapInArrow(fn, struct, **kwargs)
    if profile is not None and not new_api:
        # Spark 3.x: the profile goes on the RDD; the rows come back as a DataFrame
        out = spark.createDataFrame(out.rdd.withResources(profile), struct)
    if not checkpoint:
        return out
    kept = out.persist()  # MEMORY_AND_DISK: spilled to the executors' disks when memory is short
    try:
        with tagged(spark, tag, description), _transfer_confs(spark):
            # fills the cache in one stage, the transfer's (its CPU-only profile): a count()
            # would add a shuffle stage of the default profile, which waits for a GPU
            # beside a gang that holds them all
            kept.write.format("noop").mode("overwrite").save()
    except BaseException:
        with suppress(Exception):
            kept.unpersist()
        raise
    return kept
