"""What runs on the executors' machines when data moves between Spark and Dask.

* In Spark tasks: :func:`spark_batch_writer` (classic Spark, over the JVM's Arrow
  batches) or :func:`spark_writer` (``mapInArrow``, Spark Connect) writes each Spark
  partition as an Arrow IPC file on the machine's local disk (or sends it to a Dask
  worker when the machine has none); :func:`spark_reader` (``mapInArrow``) reads the files the Dask workers wrote (memory
  mapped when local, pulled from a worker of the file's machine otherwise).
* In Dask workers: :func:`load_partition` loads one file (memory mapped) as a pandas or
  cudf partition; :func:`write_partition` writes one Dask partition; the worker plugin
  made by :func:`worker_plugin` serves and removes the files.

Standard library at import; pyarrow and ``distributed`` only inside the functions that
use them (every executor has them: the workers need them). Shipped by value
(:data:`spark_dask.handoff.SHIPPED`), so executors and workers need not have spark_dask.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import time

from spark_dask.arrow_types import frame_to_arrow, table_to_pandas
from spark_dask.errors import HandoffError
from spark_dask.handoff.files import (
    in_transfer_dir,
    is_transfer_dir,
    part_file_name,
    push_target,
    retry_wait,
    worker_host,
)

RESULT_DDL = "partition int, attempt int, hostname string, path string, rows long, bytes long, ip string"
PUT, GET, REMOVE = "spark_dask_handoff_put", "spark_dask_handoff_get", "spark_dask_handoff_remove"
# Seconds one RPC of a transfer may take, connection and answer (a partition file of some
# hundred MB from another machine); distributed bounds only the connection (rpc's timeout).
RPC_TIMEOUT = 300.0


def hostname() -> str:
    """The key that tells whether two processes see the same local disk."""
    return socket.gethostname()


def local_root() -> str:
    """Where this machine's transfer files go: Spark's first local directory.

    Spark tasks get ``SPARK_LOCAL_DIRS`` from Spark (the executor's block manager
    directories, which Spark deletes when the executor stops); Dask workers started by
    spark-dask inherit it from their barrier task.
    """
    dirs = [d for d in (os.environ.get("SPARK_LOCAL_DIRS") or "").split(",") if d]
    for d in dirs:
        if os.path.isdir(d):
            return d
    import tempfile

    return tempfile.gettempdir()


def host_info() -> dict:
    """Run on every Dask worker before a transfer: its machine and its handoff root."""
    return {"hostname": hostname(), "root": local_root()}


def _security_args(tls: dict | None) -> dict:
    if not tls:
        return {}
    from distributed.security import Security

    sec = Security(
        tls_ca_file=tls["ca"], tls_client_cert=tls["cert"], tls_client_key=tls["key"], require_encryption=True
    )
    return sec.get_connection_args("client")


async def _call(remote, op: str, what: str, **kwargs):
    """``remote.<op>(**kwargs)`` (an rpc to ``what``, a Dask server), at most
    :data:`RPC_TIMEOUT` seconds: then a :class:`HandoffError` naming both."""
    try:
        return await asyncio.wait_for(getattr(remote, op)(**kwargs), RPC_TIMEOUT)
    except asyncio.TimeoutError:
        raise HandoffError(f"spark-dask: {what} did not answer the request {op} within {RPC_TIMEOUT:g}s") from None


async def _find_workers(scheduler_rpc, ip: str, deadline: float) -> list[str]:
    attempt = 0
    while True:
        ident = await _call(scheduler_rpc, "identity", "the Dask scheduler")
        found = sorted(a for a, w in ident.get("workers", {}).items() if w.get("host") == ip)
        if found or time.monotonic() >= deadline:
            return found
        await asyncio.sleep(retry_wait(attempt))
        attempt += 1


async def _pull(spec: dict, part: dict, wait: float = 120.0) -> bytes:
    """A file from a Dask worker on the file's machine, over the cluster's (TLS) comms."""
    from distributed.core import rpc

    args = _security_args(spec.get("tls"))
    deadline = time.monotonic() + wait
    async with rpc(spec["scheduler"], connection_args=args) as scheduler:
        while True:
            workers = await _find_workers(scheduler, part["ip"], deadline)
            errors = []
            for address in workers:
                try:
                    async with rpc(address, connection_args=args) as w:
                        return await _call(w, GET, f"Dask worker {address}", path=part["path"])
                except Exception as e:  # noqa: BLE001 - the next worker of the machine may answer
                    errors.append(f"{address}: {type(e).__name__}: {e}")
            if time.monotonic() >= deadline:
                raise HandoffError(
                    f"spark-dask: partition file {part['path']} on {part['hostname']} ({part['ip']}) could not be "
                    f"read: no Dask worker of that machine answered within {wait:g}s"
                    + (f" ({'; '.join(errors)})" if errors else "")
                )
            await asyncio.sleep(1.0)


def _write_ipc(path: str, batches, schema) -> int:
    import pyarrow as pa

    tmp = f"{path}.{os.getpid()}.tmp"
    rows = 0
    with pa.OSFile(tmp, "wb") as sink, pa.ipc.new_file(sink, schema) as writer:
        for batch in batches:
            if batch.num_rows:
                writer.write_batch(batch)
                rows += batch.num_rows
    if rows:
        os.replace(tmp, path)
    else:
        os.unlink(tmp)
    return rows


def _conform(batches, schema):
    """Spark's batches with the driver's schema: the real column names (the Spark job
    runs on positional names, see ``handoff._positional``) and, should Spark's types
    differ, cast to the expected ones."""
    import pyarrow as pa

    for batch in batches:
        if not batch.schema.equals(schema):
            arrays = [c if c.type == f.type else c.cast(f.type) for c, f in zip(batch.columns, schema)]
            batch = pa.RecordBatch.from_arrays(arrays, schema=schema)
        yield batch


# ------------------------------------------------------------------------ Spark -> Dask
def _write_spark_partition(spec: dict, schema, partition: int, attempt: int, batches) -> dict:
    """Write one Spark partition's record batches (already of the transfer's ``schema``)
    as an Arrow IPC file on this machine, or send it to a Dask worker when the machine
    has none; the report row (partition, attempt, hostname, path, rows, bytes, ip)."""
    import pyarrow as pa

    me = hostname()
    hosts = spec["hosts"]
    name = part_file_name(partition, attempt)
    row = {"partition": partition, "attempt": attempt, "hostname": me, "path": None, "rows": 0, "bytes": 0,
           "ip": None}  # fmt: skip
    if me in hosts:
        directory = os.path.join(hosts[me]["root"], spec["dir"])
        os.makedirs(directory, exist_ok=True)
        path = os.path.join(directory, name)
        row["rows"] = _write_ipc(path, batches, schema)
        if row["rows"]:
            row.update(path=path, bytes=os.path.getsize(path), ip=hosts[me]["ip"])
    else:
        sink = pa.BufferOutputStream()
        rows = 0
        with pa.ipc.new_file(sink, schema) as writer:
            for batch in batches:
                if batch.num_rows:
                    writer.write_batch(batch)
                    rows += batch.num_rows
        if rows:
            target, address = push_target(partition, hosts)
            data = sink.getvalue().to_pybytes()
            reply = asyncio.run(_push(spec, address, name, data))
            row.update(rows=rows, bytes=len(data), hostname=target, path=reply["path"], ip=hosts[target]["ip"])
    return row


def spark_writer(spec: dict):
    """``mapInArrow`` function of a Spark → Dask transfer (Spark Connect, or where the
    JVM's own Arrow batches are not available): one report row per partition."""

    def fn(batches):
        import pyarrow as pa
        from pyspark import TaskContext

        ctx = TaskContext.get()
        schema = pa.ipc.read_schema(pa.py_buffer(spec["schema"]))
        row = _write_spark_partition(spec, schema, ctx.partitionId(), ctx.attemptNumber(), _conform(batches, schema))
        yield pa.RecordBatch.from_pylist([row], schema=_result_schema())

    return fn


def _decode(messages, schema):
    """Arrow record batches from the IPC messages Spark's JVM made (``toArrowBatchRdd``):
    read without a copy; the first one is checked against the expected schema (its
    buffers must fit the types)."""
    import pyarrow as pa

    first = True
    for message in messages:
        batch = pa.ipc.read_record_batch(pa.py_buffer(message), schema)
        if first:
            try:
                batch.validate(full=True)
            except pa.ArrowInvalid as e:
                raise HandoffError(
                    f"spark-dask: Spark's Arrow batches do not match the expected schema {schema}: {e}"
                ) from None
            first = False
        yield batch


def spark_batch_writer(spec: dict):
    """``mapPartitions`` function of a Spark → Dask transfer over the RDD of Arrow IPC
    messages that Spark's JVM makes from the rows (classic Spark: ``toArrowBatchRdd``):
    the rows reach Python already as Arrow, and are written as they come. One report
    row (a dict) per partition."""

    def fn(messages):
        import pyarrow as pa
        from pyspark import TaskContext

        ctx = TaskContext.get()
        schema = pa.ipc.read_schema(pa.py_buffer(spec["schema"]))
        yield _write_spark_partition(spec, schema, ctx.partitionId(), ctx.attemptNumber(), _decode(messages, schema))

    return fn


def _result_schema():
    import pyarrow as pa

    return pa.schema(
        [("partition", pa.int32()), ("attempt", pa.int32()), ("hostname", pa.string()), ("path", pa.string()),
         ("rows", pa.int64()), ("bytes", pa.int64()), ("ip", pa.string())]
    )  # fmt: skip


async def _push(spec: dict, address: str, name: str, data: bytes) -> dict:
    from distributed.core import rpc
    from distributed.protocol import to_serialize

    async with rpc(address, connection_args=_security_args(spec.get("tls"))) as w:
        return await _call(w, PUT, f"Dask worker {address}", dirname=spec["dir"], name=name, data=to_serialize(data))


def _open(part: dict, spec: dict):
    """An Arrow IPC file reader for a partition: memory mapped when the file is on this
    machine, else pulled from a Dask worker of its machine."""
    import pyarrow as pa

    if part["hostname"] == hostname():
        if os.path.exists(part["path"]):
            return pa.ipc.open_file(pa.memory_map(part["path"], "r"))
        if spec.get("in_spark"):
            raise HandoffError(
                f"spark-dask: the transfer file {part['path']} is gone: the Dask cluster that wrote it closed "
                "(a DataFrame of to_spark(ddf) reads the cluster's files, so it can be computed only while the "
                "cluster runs: write it to a table inside the cluster's with-block, or pass checkpoint=True to keep "
                "its rows in Spark), or the rows Spark kept of a to_spark(..., checkpoint=True) DataFrame were "
                "dropped from its cache (unpersist(), spark.catalog.clearCache())"
            )
    data = asyncio.run(_pull(spec, part)) if spec.get("in_spark") else _pull_from_worker(part)
    return pa.ipc.open_file(pa.BufferReader(data))


def _pull_from_worker(part: dict) -> bytes:
    from distributed import get_worker
    from distributed.utils import sync

    worker = get_worker()

    async def go():
        deadline = time.monotonic() + 120
        while True:
            for address in await _find_workers(worker.scheduler, part["ip"], deadline):
                if address == worker.address:
                    continue
                try:
                    return await _call(worker.rpc(address), GET, f"Dask worker {address}", path=part["path"])
                except Exception:  # noqa: BLE001 - try the next worker of that machine
                    pass
            if time.monotonic() >= deadline:
                raise HandoffError(
                    f"spark-dask: the partition file {part['path']} is on {part['hostname']} ({part['ip']}), where "
                    "no Dask worker is left to read it: the data of this transfer is lost; call to_dask again"
                )
            await asyncio.sleep(1.0)

    return sync(worker.loop, go)


def load_partition(part: dict, backend: str = "pandas"):
    """Dask task: one Spark partition from its Arrow IPC file (memory mapped)."""
    table = _open(part, {}).read_all()
    if backend == "cudf":
        import cudf

        return cudf.DataFrame.from_arrow(table)
    return table_to_pandas(table)


# ------------------------------------------------------------------------ Dask -> Spark
def write_partition(frame, index: int, dirname: str, schema_bytes: bytes, batch_rows: int | None = None) -> dict:
    """Dask task: one partition as an Arrow IPC file (Spark's Arrow types) on this
    machine, in record batches of at most ``batch_rows`` rows (None: as the data is).

    Batches of a few MB rather than one per partition: a partition written as one 64 MB
    batch took several times longer (the figures: docs/benchmarks.md, "Moving data between Spark and Dask", "Dask → Spark")."""
    import pyarrow as pa

    schema = pa.ipc.read_schema(pa.py_buffer(schema_bytes))
    out = {"partition": index, "hostname": hostname(), "path": None, "rows": int(len(frame)), "bytes": 0, "ip": None}
    if not len(frame):
        return out
    table = frame_to_arrow(frame, schema)
    directory = os.path.join(local_root(), dirname)
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, part_file_name(index))
    _write_ipc(path, table.to_batches(max_chunksize=batch_rows), schema)
    try:
        from distributed import get_worker

        out["ip"] = worker_host(get_worker().address)
    except ValueError:  # not in a worker (tests)
        out["ip"] = "127.0.0.1"
    out.update(path=path, bytes=os.path.getsize(path))
    return out


def spark_reader(spec: dict):
    """``mapInArrow`` function of a Dask → Spark transfer over ``spark.range(n)``: each
    task yields the record batches of the partition files whose numbers it gets."""

    def fn(batches):
        import pyarrow as pa

        spec["in_spark"] = True
        schema = pa.ipc.read_schema(pa.py_buffer(spec["schema"]))
        for batch in batches:
            for i in batch.column(0).to_pylist():
                part = spec["parts"][i]
                reader = _open(part, spec)
                if not reader.schema.equals(schema):
                    raise HandoffError(
                        f"spark-dask: partition file {part['path']} has schema {reader.schema}, not {schema}"
                    )
                for j in range(reader.num_record_batches):
                    yield reader.get_batch(j)

    return fn


# ------------------------------------------------------------------------ worker side
def remove_dirs(dirs) -> int:
    """Remove the transfer directories ``(hostname, path)`` that exist on this machine;
    returns how many.

    Every worker gets the whole list: a path is removed wherever it exists, whatever
    hostname was recorded with it (the names hold the cluster tag and a random transfer
    id, so they cannot name another transfer's files); anything that is not a transfer
    directory is left alone.
    """
    n = 0
    for _host, path in dirs:
        if is_transfer_dir(path) and os.path.isdir(path):
            shutil.rmtree(path, ignore_errors=True)
            n += 1
    return n


def worker_plugin():
    """The Dask worker plugin serving transfer files (kept across worker restarts)."""
    from distributed.diagnostics.plugin import WorkerPlugin
    from distributed.protocol import to_serialize

    class HandoffFiles(WorkerPlugin):
        """Handlers that let Spark tasks send, fetch and remove transfer files over the
        cluster's own (TLS) comms."""

        name = "spark-dask-handoff"

        def setup(self, worker):
            def put(dirname: str, name: str, data):
                if not is_transfer_dir(dirname) or os.sep in dirname or os.sep in name or name.startswith("."):
                    raise ValueError(f"not a transfer file: {dirname}/{name}")
                directory = os.path.join(local_root(), dirname)
                os.makedirs(directory, exist_ok=True)
                path = os.path.join(directory, name)
                tmp = f"{path}.{os.getpid()}.tmp"
                with open(tmp, "wb") as f:
                    f.write(data)
                os.replace(tmp, path)
                return {"path": path, "hostname": hostname()}

            def get(path: str):
                if not in_transfer_dir(path):
                    raise ValueError(f"not a transfer file: {path}")
                with open(path, "rb") as f:
                    return to_serialize(f.read())

            def remove(dirs):
                return remove_dirs(dirs)

            worker.handlers[PUT] = put
            worker.handlers[GET] = get
            worker.handlers[REMOVE] = remove

    return HandoffFiles()
