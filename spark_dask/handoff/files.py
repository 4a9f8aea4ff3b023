"""Names and places of a hand-off's files, the same on the driver, in Spark tasks and in
Dask workers: the directory and file names of a transfer, the loading tasks' keys,
which worker of which host takes a partition, when to retry, and how many bytes Spark's
Arrow batches hold.

Standard library only at module level: shipped by value
(:data:`spark_dask.handoff.SHIPPED`) with :mod:`spark_dask.handoff.transfer`.
"""

from __future__ import annotations

import os

DIR_PREFIX = "spark-dask-handoff-"
LOAD_KEY_PREFIX = "spark-to-dask-"


def transfer_dir_name(cluster_tag: str, transfer_id: str) -> str:
    """The directory (under a host's handoff root) that holds one transfer's files."""
    return f"{DIR_PREFIX}{cluster_tag}-{transfer_id}"


def is_transfer_dir(path: str) -> bool:
    """Whether ``path`` names a transfer directory (the only thing removals touch)."""
    return os.path.basename(os.path.normpath(path)).startswith(DIR_PREFIX)


def in_transfer_dir(path: str) -> bool:
    """Whether ``path`` is a file directly inside a transfer directory (what may be served)."""
    return is_transfer_dir(os.path.dirname(os.path.normpath(path))) and not os.path.basename(path).startswith(".")


def part_file_name(partition: int, attempt: int | None = None) -> str:
    """``part-00007.arrow``; a Spark task attempt writes ``part-00007-a1.arrow``."""
    return f"part-{partition:05d}" + ("" if attempt is None else f"-a{attempt}") + ".arrow"


def load_key(transfer_id: str, index: int) -> str:
    """The Dask key of the task that loads partition ``index`` of a Spark → Dask transfer."""
    return f"{LOAD_KEY_PREFIX}{transfer_id}-{index}"


def transfer_of_key(key) -> str | None:
    """The transfer id of a loading key, or None for any other key.

    >>> transfer_of_key("spark-to-dask-ab12-7")
    'ab12'
    >>> transfer_of_key(("x", 1)) is None
    True
    """
    if not isinstance(key, str) or not key.startswith(LOAD_KEY_PREFIX):
        return None
    return key[len(LOAD_KEY_PREFIX) :].rsplit("-", 1)[0]


def unloaded_keys(graph) -> list[str]:
    """The loading keys (:func:`load_key`) a Dask task graph refers to but does not
    hold: a Dask DataFrame of ``to_dask`` computed without the cluster that holds its
    partitions (a local scheduler after the cluster closed). Its partitions are futures:
    dask with ``dask._task_spec`` makes them aliases of the futures' keys (``dependencies``), older
    dask puts the Future objects themselves in the graph.

    >>> from types import SimpleNamespace as Node
    >>> unloaded_keys({"x": Node(dependencies={"spark-to-dask-ab12-0"}), "y": Node(dependencies={"x"})})
    ['spark-to-dask-ab12-0']
    >>> unloaded_keys({"spark-to-dask-ab12-0": 1, "x": Node(dependencies={"spark-to-dask-ab12-0"})})
    []
    """
    out = set()
    for value in graph.values():
        refers = [value.key] if type(value).__name__ == "Future" else getattr(value, "dependencies", None) or ()
        out.update(k for k in refers if transfer_of_key(k) is not None and k not in graph)
    return sorted(out)


def worker_host(address: str) -> str:
    """The host part of a Dask worker address (what Dask's host restrictions match).

    >>> worker_host("tls://10.0.0.5:40123"), worker_host("tcp://[::1]:1")
    ('10.0.0.5', '::1')
    """
    rest = address.split("://", 1)[-1]
    host = rest.rsplit(":", 1)[0]
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host


def host_table(workers: dict[str, dict]) -> dict[str, dict]:
    """Group the Dask workers by the machine they run on.

    ``workers`` maps each worker address to ``{"hostname": ..., "root": ...,
    "spark_host": ...}`` (what :func:`spark_dask.handoff.transfer.host_info` returns on
    the worker). The result maps each hostname to ``{"ip": <address host>, "root":
    <handoff root>, "spark_host": <the executor host Spark names>, "workers": [...]}``:
    the files of that machine live under one root, the one of its first worker (by
    address), so every worker of the machine finds them. A Spark task whose hostname is
    a key here writes its partition there; others send it to a worker.

    >>> host_table({"tls://10.0.0.5:2": {"hostname": "a", "root": "/l/2", "spark_host": "10.0.0.5"},
    ...             "tls://10.0.0.5:1": {"hostname": "a", "root": "/l/1", "spark_host": "10.0.0.5"}})["a"]
    {'ip': '10.0.0.5', 'root': '/l/1', 'spark_host': '10.0.0.5', 'workers': ['tls://10.0.0.5:1', 'tls://10.0.0.5:2']}
    """
    out: dict[str, dict] = {}
    for address in sorted(workers):
        info = workers[address]
        entry = out.setdefault(
            info["hostname"],
            {"ip": worker_host(address), "root": info["root"], "spark_host": info.get("spark_host"), "workers": []},
        )
        entry["workers"].append(address)
        entry["spark_host"] = entry["spark_host"] or info.get("spark_host")
    return out


def read_parts(written: list[dict], hosts: dict[str, dict]) -> list[dict]:
    """The partition files a Dask → Spark transfer's read tasks get, in order: each
    with the executor host Spark should run its task on (``spark_host``, None when
    unknown). The Dask workers of each file's machine are the transfer's
    :func:`host_workers`, named once per machine: every read task gets the whole list
    of files, which would otherwise repeat them for each file.

    >>> read_parts([{"partition": 0, "hostname": "a", "path": "/l/p0"}, {"partition": 1, "hostname": "a", "path": None}],
    ...            {"a": {"spark_host": "10.0.0.5", "workers": ["tls://10.0.0.5:1"]}})
    [{'partition': 0, 'hostname': 'a', 'path': '/l/p0', 'spark_host': '10.0.0.5'}]
    """
    return [{**w, "spark_host": hosts.get(w["hostname"], {}).get("spark_host")} for w in written if w["path"]]


def host_workers(hosts: dict[str, dict]) -> dict[str, list[str]]:
    """The Dask workers of each machine (:func:`host_table`): where a Dask → Spark read
    task that Spark ran away from its file's machine streams the file from (no
    scheduler call per file).

    >>> host_workers({"a": {"spark_host": "10.0.0.5", "workers": ["tls://10.0.0.5:1"]}})
    {'a': ['tls://10.0.0.5:1']}
    """
    return {name: list(h.get("workers", [])) for name, h in hosts.items()}


def push_target(partition: int, hosts: dict[str, dict]) -> tuple[str, str]:
    """(hostname, worker address) that receives a partition written on a machine without
    a Dask worker: the workers in turn, by partition number.

    >>> push_target(3, {"a": {"workers": ["w1"]}, "b": {"workers": ["w2", "w3"]}})
    ('a', 'w1')
    """
    pairs = [(name, w) for name in sorted(hosts) for w in hosts[name]["workers"]]
    if not pairs:
        raise ValueError("no Dask worker to send the partition to")
    return pairs[partition % len(pairs)]


def ordered_parts(rows: list[dict]) -> list[dict]:
    """The transfer tasks' reports in partition order, one per partition (the first
    successful attempt Spark reported), empty partitions left out."""
    seen: dict[int, dict] = {}
    for r in rows:
        seen.setdefault(int(r["partition"]), r)
    return [seen[p] for p in sorted(seen) if int(seen[p]["rows"]) > 0]


def transfer_dirs(hosts: dict[str, dict], dirname: str) -> list[tuple[str, str]]:
    """Every (hostname, directory) a transfer may write to: one per machine with workers."""
    return sorted((name, os.path.join(h["root"], dirname)) for name, h in hosts.items())


def retry_wait(attempt: int) -> float:
    """Seconds to wait before looking again for a worker on a file's machine."""
    return min(0.2 * 2**attempt, 2.0)


# Spark >= 4.0 ends an Arrow batch it sends to Python when it reaches either
# spark.sql.execution.arrow.maxRecordsPerBatch rows or maxBytesPerBatch bytes; for the
# byte limit it estimates the batch's size after every row, unless the limit is exactly
# Int.MaxValue (pyspark 4.3.0: BatchedPythonArrowInput.writeSizedBatch; the limit came
# with SPARK-51316, default 256 MB, 64 MB since apache/spark#51277).
NO_BYTE_LIMIT = 2**31 - 1

_UNITS = {
    "": 1,
    "b": 1,
    "k": 2**10,
    "kb": 2**10,
    "m": 2**20,
    "mb": 2**20,
    "g": 2**30,
    "gb": 2**30,
    "t": 2**40,
    "tb": 2**40,
    "p": 2**50,
    "pb": 2**50,
}


def spark_bytes(text: str) -> int | None:
    """A Spark byte-size setting (binary units, as Spark reads them) in bytes; None when
    it is not one.

    >>> spark_bytes("67108864b"), spark_bytes("64m"), spark_bytes(" 1G "), spark_bytes("x")
    (67108864, 67108864, 1073741824, None)
    """
    s = str(text).strip().lower()
    digits = len(s) - len(s.lstrip("0123456789"))
    if digits == 0 or s[digits:] not in _UNITS:
        return None
    return int(s[:digits]) * _UNITS[s[digits:]]


def value_bytes(arrow_type) -> int | None:
    """Bytes one value of a fixed-width Arrow type takes (at least 1: a boolean's bit
    counted as a byte); None for variable-width and nested types.

    >>> import pyarrow as pa
    >>> value_bytes(pa.int64()), value_bytes(pa.bool_()), value_bytes(pa.decimal128(10, 2)), value_bytes(pa.string())
    (8, 1, 16, None)
    """
    try:
        return max(-(-arrow_type.bit_width // 8), 1)
    except ValueError:  # variable width or nested
        return None


def arrow_row_bytes(schema) -> int | None:
    """At most this many bytes a row takes in an Arrow batch of ``schema`` (a pyarrow
    schema): each column's value width plus a validity byte, plus one for the struct
    ``mapInArrow`` wraps the columns in; None when a column has no fixed width (strings,
    binary, nested).

    >>> import pyarrow as pa
    >>> arrow_row_bytes(pa.schema([("a", pa.int64()), ("b", pa.bool_()), ("d", pa.decimal128(10, 2))]))
    29
    >>> arrow_row_bytes(pa.schema([("a", pa.int64()), ("s", pa.string())])) is None
    True
    """
    total = 1
    for field in schema:
        width = value_bytes(field.type)
        if width is None:
            return None
        total += width + 1
    return total


def byte_limit_is_redundant(schema, max_records: int, max_bytes: int) -> bool:
    """Whether Spark's byte limit on the Arrow batches it sends to Python can never end
    a batch of ``schema``: every column has a fixed width and ``max_records`` rows stay
    under ``max_bytes``. Spark then need not estimate the size after every row.

    >>> import pyarrow as pa
    >>> s = pa.schema([("a", pa.int64())] * 8)
    >>> byte_limit_is_redundant(s, 10_000, 64 * 2**20), byte_limit_is_redundant(s, 0, 64 * 2**20)
    (True, False)
    >>> byte_limit_is_redundant(s, 10**6, 64 * 2**20), byte_limit_is_redundant(s, 10_000, NO_BYTE_LIMIT)
    (False, False)
    """
    row = arrow_row_bytes(schema)
    if row is None or max_records <= 0 or max_bytes >= NO_BYTE_LIMIT:
        return False
    return max_records * row < max_bytes
