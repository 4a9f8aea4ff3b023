"""What the object-store tests share (S3 with moto: :mod:`.s3`, Azure with Azurite:
:mod:`.azure`, GCS with gcp-storage-emulator: :mod:`.gcs`): an emulator's process
(:class:`Emulator`), and Delta tables put on a store and read back against Spark's read
(tests/spark/test_delta_stores.py, test_delta_azure.py, test_delta_gcs.py)."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from typing import ClassVar

import pandas as pd
from distributed.utils import open_port

from tests.support.processes import port_open, wait_until

START_TIMEOUT = 30  # seconds for an emulator to answer


def port_and_log(log_dir: str | None, prefix: str) -> tuple[int, str]:
    """A free port of 127.0.0.1, and the log file ``<log_dir or /tmp>/<prefix>-<port>.log``."""
    port = open_port("127.0.0.1")
    return port, os.path.join(log_dir or "/tmp", f"{prefix}-{port}.log")


def spawn(cmd: list[str], log: str, **popen) -> subprocess.Popen:
    """``cmd`` in a process of its own: stdout and stderr to the file ``log``, no stdin."""
    with open(log, "wb") as out:
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, **popen)


@dataclass
class Emulator:
    """A store emulator's ``endpoint``, its process ``proc`` and the process's ``log``: the
    start-up wait, :meth:`stop`, and a context manager that stops it."""

    endpoint: str
    proc: subprocess.Popen
    log: str
    name: ClassVar[str] = "the emulator"  # in errors

    def wait_started(self, address: str | None = None, timeout: float = START_TIMEOUT) -> None:
        """Wait up to ``timeout`` s for ``address`` (default: the endpoint) to accept a
        connection; raise, naming the log, if it does not or the process exited."""
        proc = self.proc
        if not wait_until(lambda: proc.poll() is not None or port_open(address or self.endpoint), timeout=timeout):
            raise RuntimeError(f"{self.name} did not answer on {self.endpoint} in {timeout} s (log {self.log})")
        if proc.poll() is not None:
            raise RuntimeError(f"{self.name} exited ({proc.returncode}): log {self.log}")

    def setup(self) -> None:
        """What the store needs once it answers (the subclass's: a bucket, a user)."""

    def ready(self, address: str | None = None):
        """:meth:`wait_started`, then :meth:`setup`; on any failure :meth:`stop` and raise.
        Returns the server."""
        try:
            self.wait_started(address)
            self.setup()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, timeout: float = 10) -> None:
        """Terminate the process, kill it if it is still there after ``timeout`` s, reap it."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def publish(fs, local: str, key: str) -> list[str]:
    """Put the files of the table at ``local`` that the store lacks under ``key`` (bucket
    or container, and prefix): data files and deletion vectors first, the log's files last
    (a commit is visible once its ``_delta_log`` entry is). Returns the keys put."""
    have = set(fs.find(key)) if fs.exists(key) else set()
    files = sorted(
        (os.path.relpath(os.path.join(d, n), local) for d, _, names in os.walk(local) for n in names),
        key=lambda rel: (rel.startswith("_delta_log"), rel),
    )
    put = []
    for rel in files:
        target = f"{key}/{rel}"
        if target not in have:
            fs.put_file(os.path.join(local, rel), target)
            put.append(target)
    return put


def ordered(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows by ``id``, indexed from 0."""
    return frame.sort_values("id").reset_index(drop=True)


def sparks(spark, url: str, **options) -> pd.DataFrame:
    """Spark's read of the Delta table at ``url`` (reader ``options``), :func:`ordered`."""
    return ordered(spark.read.format("delta").options(**options).load(url).toPandas())


def plain(frame: pd.DataFrame) -> pd.DataFrame:
    """Python values, a null as None (Dask's ``<NA>``, Spark's NaN or None)."""
    return frame.astype(object).where(frame.notna(), None)


def assert_same(ddf, want: pd.DataFrame, what: str) -> None:
    """``ddf`` computed has ``want``'s columns and, :func:`ordered` and :func:`plain`, its values."""
    got = ordered(ddf.compute())
    assert list(got.columns) == list(want.columns), f"{what}: columns {list(got.columns)}, want {list(want.columns)}"
    pd.testing.assert_frame_equal(plain(got), plain(want), obj=what)


def deletion_vectors_on(spark, server, key: str, url: str, tmp_path):
    """Spark's table with deletion vectors (:func:`.delta_tables.write_dv`), published under
    ``key``: ``read_delta(url)`` with the server's ``storage_options`` has Spark's rows at
    the latest version (2) and at version 1; after Spark's DELETE (version 3) reaches the
    store, a new read in this process has it. Returns that read."""
    import spark_dask
    from tests.support import delta_tables

    table = delta_tables.write_dv(spark, str(tmp_path))
    fs = server.filesystem()
    put = publish(fs, table.path, key)
    assert any("deletion_vector" in p for p in put), put  # the table has deletion vectors

    first = spark_dask.read_delta(url, storage_options=server.storage_options, via="files")
    assert_same(first, sparks(spark, table.path), "the latest version (2)")
    assert_same(
        spark_dask.read_delta(url, version=1, storage_options=server.storage_options, via="files"),
        sparks(spark, table.path, versionAsOf=1),
        "version 1",
    )

    spark.sql(f"DELETE FROM delta.`{table.path}` WHERE id < 40")  # version 3: deletion vectors replaced
    put = publish(fs, table.path, key)
    assert f"{key}/_delta_log/{3:020d}.json" in put, put
    want = sparks(spark, table.path)
    second = spark_dask.read_delta(url, storage_options=server.storage_options, via="files")
    assert_same(second, want, "after Spark's DELETE (version 3)")
    sizes = (len(second), len(want), len(first))
    assert sizes[0] == sizes[1] < sizes[2], f"rows read, Spark's, before the DELETE: {sizes}"
    return second


__all__ = [
    "START_TIMEOUT",
    "Emulator",
    "assert_same",
    "deletion_vectors_on",
    "ordered",
    "plain",
    "port_and_log",
    "publish",
    "sparks",
    "spawn",
]
