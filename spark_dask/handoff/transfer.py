"""What runs on the executors' machines when data moves between Spark and Dask.

* In Spark tasks: :func:`spark_batch_writer` (classic Spark, over the JVM's Arrow
  batches) or :func:`spark_writer` (``mapInArrow``, Spark Connect) writes each Spark
  partition as an Arrow IPC file on the machine's local disk (or sends it to a Dask
  worker when the machine has none); :func:`spark_reader` (``mapInArrow``) reads the
  files the Dask workers wrote: memory mapped when local (Spark places each read task on
  its file's executor host), else streamed batch by batch from a worker of the file's
  machine over one connection per task (:func:`pulled_batches`).
* In Dask workers: :func:`load_partition` loads one file (memory mapped) as a pandas or
  cudf partition; :func:`write_partition` writes one Dask partition; the worker plugin
  made by :func:`worker_plugin` serves and removes the files.

Each transfer's directory is made with mode 0700 and its files 0600 (:func:`private_dir`,
:func:`private_file`), whoever writes them (a Spark task or a Dask worker; Spark's JVM
writes none): Spark's local directories, where they go, can be open to every local user
(in local mode ``/tmp/blockmgr-<uuid>``, made with the umask's mode).

Standard library at import; pyarrow and ``distributed`` only inside the functions that
use them (every executor has them: the workers need them). Shipped by value
(:data:`spark_dask.handoff.SHIPPED`), so executors and workers need not have spark_dask.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import stat
import time
from collections.abc import Iterator
from contextlib import suppress

from spark_dask.errors import HandoffError
from spark_dask.handoff.arrow_types import frame_to_arrow, infer_object_column, table_to_pandas, with_inferred_types
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
STREAM = "spark_dask_handoff_stream"  # a file's record batches, one message each
# The event a worker logs when it streamed a file to a Spark task on another machine (the
# driver's transfer registry says so once per transfer, spark_dask.handoff.driver).
PULLED = "spark-dask-handoff-pulled"
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


def spark_host() -> str | None:
    """The host Spark names this machine's executor by (the barrier task's facts, which
    spark-dask gives the workers it starts: ``SPARK_DASK_FACTS``), where a read task is
    placed; None in a worker spark-dask did not start."""
    try:
        return json.loads(os.environ.get("SPARK_DASK_FACTS") or "{}").get("host")
    except ValueError:
        return None


def host_info() -> dict:
    """Run on every Dask worker before a transfer: its machine, its handoff root and its
    executor's host as Spark names it."""
    return {"hostname": hostname(), "root": local_root(), "spark_host": spark_host()}


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


class Links:
    """A Spark task's connections to the Dask workers it streams files from (one per
    worker, kept for the task's next files) and the event loop they run on; closed by
    :meth:`close` when the task ends."""

    def __init__(self, spec: dict):
        self.spec = spec
        self.loop: asyncio.AbstractEventLoop | None = None
        self.comms: dict = {}

    def run(self, coro, what: str):
        """Run ``coro`` on the task's loop, at most :data:`RPC_TIMEOUT` seconds."""
        if self.loop is None:
            self.loop = asyncio.new_event_loop()
        try:
            return self.loop.run_until_complete(asyncio.wait_for(coro, RPC_TIMEOUT))
        except asyncio.TimeoutError:
            raise HandoffError(f"spark-dask: {what} did not answer within {RPC_TIMEOUT:g}s") from None

    def comm(self, address: str):
        """The open connection to the worker at ``address`` (made on first use)."""
        if address not in self.comms:
            from distributed.comm import connect

            args = _security_args(self.spec.get("tls"))
            self.comms[address] = self.run(connect(address, **args), f"Dask worker {address}")
        return self.comms[address]

    def drop(self, address: str) -> None:
        """Close the connection to ``address`` (after an error, or at the task's end)."""
        comm = self.comms.pop(address, None)
        if comm is not None:
            comm.abort()

    def close(self) -> None:
        for address in list(self.comms):
            self.drop(address)
        if self.loop is not None:
            self.loop.close()
            self.loop = None


def _stream(links: Links, address: str, path: str):
    """The record batches of ``path`` from the worker at ``address``, as they arrive."""
    comm = links.comm(address)
    links.run(comm.write({"op": STREAM, "path": path, "reply": True}), f"Dask worker {address}")
    while True:
        msg = links.run(comm.read(), f"Dask worker {address}")
        if msg.get("status") == "uncaught-error":
            raise HandoffError(f"spark-dask: Dask worker {address} could not send {path}: {msg.get('text')}")
        if "done" in msg:
            return
        yield msg["batch"]


def _addresses(links: Links, part: dict) -> Iterator[str]:
    """The workers of the file's machine: the transfer's spec names them, once per
    machine (``workers``: :func:`~spark_dask.handoff.files.host_workers`; no scheduler
    call per file); the scheduler's are asked for only when none of those answers (a
    worker of that machine restarted since)."""
    listed = list((links.spec.get("workers") or {}).get(part["hostname"]) or [])

    async def now():
        from distributed.core import rpc

        async with rpc(links.spec["scheduler"], connection_args=_security_args(links.spec.get("tls"))) as s:
            return await _find_workers(s, part["ip"], time.monotonic() + 120.0)

    yield from listed
    yield from (a for a in links.run(now(), "the Dask scheduler") if a not in listed)


def pulled_batches(links: Links, part: dict):
    """The record batches of a partition file on another machine, streamed from a Dask
    worker there, one batch in memory at a time (a Spark task Spark ran away from the
    file's host). A worker that fails before the first batch is passed over for the
    next; one that fails after it fails the task (Spark retries it)."""
    errors = []
    for address in _addresses(links, part):
        sent = False
        try:
            for batch in _stream(links, address, part["path"]):
                sent = True
                yield batch
            return
        except Exception as e:  # the next worker of that machine may answer (re-raised once a batch went)
            links.drop(address)
            if sent:
                raise
            errors.append(f"{address}: {type(e).__name__}: {e}")
    raise HandoffError(
        f"spark-dask: partition file {part['path']} on {part['hostname']} ({part['ip']}) could not be read: no Dask "
        "worker of that machine answered" + (f" ({'; '.join(errors)})" if errors else "")
    )


def private_dir(path: str) -> str:
    """Make the transfer directory ``path`` (mode 0700: no other local user lists or
    reads its files; its parent too where missing), or check the one there: this user's
    directory, no link, set to mode 0700; ``path``. Another user's is a
    :class:`~spark_dask.errors.HandoffError`."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with suppress(FileExistsError):
        os.mkdir(path, 0o700)
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
        raise HandoffError(
            f"spark-dask: the transfer directory {path} is not a directory of this user (another user's, a link or a "
            "file): another local user made it, to read or replace the transfer's data; nothing was written there. "
            "Call to_dask or to_spark again: a new transfer has a directory of a new random name"
        )
    if stat.S_IMODE(info.st_mode) != 0o700:
        os.chmod(path, 0o700)
    return path


def private_file(path: str) -> str:
    """Make ``path`` a new empty file of mode 0600 (``O_EXCL | O_NOFOLLOW``; a leftover
    of an earlier attempt is removed first); ``path``."""
    with suppress(FileNotFoundError):
        os.unlink(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    os.fchmod(fd, 0o600)  # whatever the umask
    os.close(fd)
    return path


def _write_ipc(path: str, batches, schema) -> int:
    import pyarrow as pa

    tmp = private_file(f"{path}.{os.getpid()}.tmp")  # opened again by Arrow: its mode stays
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
    row = {"partition": partition, "attempt": attempt, "hostname": me, "path": None, "rows": 0, "bytes": 0, "ip": None}
    if me in hosts:
        directory = private_dir(os.path.join(hosts[me]["root"], spec["dir"]))
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
        [
            ("partition", pa.int32()),
            ("attempt", pa.int32()),
            ("hostname", pa.string()),
            ("path", pa.string()),
            ("rows", pa.int64()),
            ("bytes", pa.int64()),
            ("ip", pa.string()),
        ]
    )


async def _push(spec: dict, address: str, name: str, data: bytes) -> dict:
    from distributed.core import rpc
    from distributed.protocol import to_serialize

    async with rpc(address, connection_args=_security_args(spec.get("tls"))) as w:
        return await _call(w, PUT, f"Dask worker {address}", dirname=spec["dir"], name=name, data=to_serialize(data))


def _local(part: dict, in_spark: bool):
    """A memory-mapped Arrow IPC file reader for a partition whose file is on this
    machine; None when it is on another."""
    import pyarrow as pa

    if part["hostname"] == hostname():
        if os.path.exists(part["path"]):
            return pa.ipc.open_file(pa.memory_map(part["path"], "r"))
        if in_spark:
            raise HandoffError(
                f"spark-dask: the transfer file {part['path']} is gone: the Dask cluster that wrote it closed "
                "(a DataFrame of to_spark(ddf) reads the cluster's files, so it can be computed only while the "
                "cluster runs: write it to a table inside the cluster's with-block, or pass checkpoint=True to keep "
                "its rows in Spark), or the rows Spark kept of a to_spark(..., checkpoint=True) DataFrame were "
                "dropped from its cache (unpersist(), spark.catalog.clearCache())"
            )
    return None


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
    """Dask task: one Spark partition from its Arrow IPC file (memory mapped; pulled
    from a worker of the file's machine when the task runs elsewhere)."""
    import pyarrow as pa

    reader = _local(part, in_spark=False)
    if reader is None:
        reader = pa.ipc.open_file(pa.BufferReader(_pull_from_worker(part)))
    table = reader.read_all()
    if backend == "cudf":
        import cudf

        return cudf.DataFrame.from_arrow(table)
    return table_to_pandas(table)


# ------------------------------------------------------------------------ Dask -> Spark
def write_partition(
    frame, index: int, dirname: str, schema_bytes: bytes, batch_rows: int | None = None, infer: tuple = ()
) -> dict:
    """Dask task: one partition as an Arrow IPC file (Spark's Arrow types) on this
    machine, in record batches of at most ``batch_rows`` rows (None: as the data is).
    The ``object`` columns ``infer`` (indices) get the Spark type of their values
    (:func:`~spark_dask.handoff.arrow_types.infer_object_column`), reported as ``types``.

    Batches of a few MB rather than one per partition: a partition written as one 64 MB
    batch took several times longer (the figures: docs/benchmarks.md, "Moving data between Spark and Dask", "Dask → Spark")."""
    import pyarrow as pa

    schema = pa.ipc.read_schema(pa.py_buffer(schema_bytes))
    out = {"partition": index, "hostname": hostname(), "path": None, "rows": int(len(frame)), "bytes": 0, "ip": None}
    out["types"] = {str(i): infer_object_column(frame.iloc[:, i], schema.field(i).name) for i in infer if len(frame)}
    if not len(frame):
        return out
    schema = with_inferred_types(schema, {int(i): t for i, t in out["types"].items()})
    table = frame_to_arrow(frame, schema)
    directory = private_dir(os.path.join(local_root(), dirname))
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

        schema = pa.ipc.read_schema(pa.py_buffer(spec["schema"]))
        links = Links(spec)
        try:
            for batch in batches:
                for i in batch.column(0).to_pylist():
                    part = spec["parts"][i]
                    reader = _local(part, in_spark=True)
                    if reader is None:
                        read = pulled_batches(links, part)
                    else:
                        read = (reader.get_batch(j) for j in range(reader.num_record_batches))
                    for record_batch in read:
                        yield conformed(record_batch, schema, part["path"])
        finally:
            links.close()

    return fn


def conformed(batch, schema, path: str):
    """A record batch of a Dask → Spark file as ``schema``: a partition whose ``object``
    column held no value of a part of its type (a null, an empty list) wrote that part
    as Arrow ``null``, cast here to the type the other partitions gave it."""
    import pyarrow as pa

    if batch.schema.equals(schema):
        return batch
    try:
        return pa.Table.from_batches([batch]).cast(schema).combine_chunks().to_batches()[0]
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, IndexError):
        raise HandoffError(f"spark-dask: partition file {path} has schema {batch.schema}, not {schema}") from None


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
                path = os.path.join(private_dir(os.path.join(local_root(), dirname)), name)
                tmp = private_file(f"{path}.{os.getpid()}.tmp")
                with open(tmp, "wb") as f:
                    f.write(data)
                os.replace(tmp, path)
                return {"path": path, "hostname": hostname()}

            def get(path: str):
                if not in_transfer_dir(path):
                    raise ValueError(f"not a transfer file: {path}")
                with open(path, "rb") as f:
                    return to_serialize(f.read())

            async def stream(comm, path: str):
                """The file's record batches to a Spark task on another machine, one
                message each, then ``{"done": ...}`` as the reply."""
                import pyarrow as pa

                if not in_transfer_dir(path):
                    raise ValueError(f"not a transfer file: {path}")
                reader = pa.ipc.open_file(pa.memory_map(path, "r"))
                sent = 0
                for j in range(reader.num_record_batches):
                    batch = reader.get_batch(j)
                    sent += batch.nbytes
                    await comm.write({"batch": to_serialize(batch)})
                worker.log_event(PULLED, {"path": path, "bytes": sent, "to": comm.peer_address, "from": worker.address})
                return {"done": reader.num_record_batches, "bytes": sent}

            def remove(dirs):
                return remove_dirs(dirs)

            worker.handlers[PUT] = put
            worker.handlers[GET] = get
            worker.handlers[STREAM] = stream
            worker.handlers[REMOVE] = remove

    return HandoffFiles()
