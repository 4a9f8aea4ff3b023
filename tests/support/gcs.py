"""A Google Cloud Storage JSON API server for the tests: PyPI's ``gcp-storage-emulator``
(the test-core extra), in memory, in a process of its own on a free port of 127.0.0.1.

The emulator checks no credentials at all: a request without an ``Authorization`` header
or with any bearer token gets the same answer, and it answers no request with 401 or 403.
So the tests reach it as gcsfs's ``token="anon"`` and cannot see a store refuse a reader.

gcsfs (2026.10) by default asks the Storage Control gRPC API for a bucket's layout before
each operation, which the emulator does not serve (a 60 s timeout each time, then the plain
JSON API): ``GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT=false`` (:data:`ENV`), read when gcsfs is
imported, keeps it to the JSON API; it must reach the Dask workers' environment too
(``spark_dask.start(env=ENV)``).

    with GcsServer.start(log_dir) as server:
        fs = server.filesystem()          # gcsfs, anonymous
        server.storage_options            # for read_delta(..., storage_options=...)
        server.url("t")                   # gs://spark-dask/t
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

from tests.support.stores import Emulator, port_and_log, spawn

BUCKET = "spark-dask"
ENV = {"GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false"}
os.environ.update(ENV)  # before gcsfs is imported in this process


def emulator() -> list[str]:
    """The command that runs the emulator, or skip (under CI: fail) without it or gcsfs."""
    import importlib.util

    import pytest

    missing = [m for m in ("gcp_storage_emulator", "gcsfs") if importlib.util.find_spec(m) is None]
    if not missing:
        return [sys.executable, "-m", "gcp_storage_emulator"]
    reason = f"pip install -e '.[test-core]' (missing {', '.join(missing)})"
    if os.environ.get("CI"):
        pytest.fail(f"CI must install the test-core extra: {reason}", pytrace=False)
    pytest.skip(reason, allow_module_level=True)


@dataclass
class GcsServer(Emulator):
    """A running gcp-storage-emulator: its endpoint, the process, its log."""

    name = "the GCS emulator"

    bucket: str = BUCKET

    @classmethod
    def start(cls, log_dir: str | None = None) -> GcsServer:
        """Start the emulator (in memory) with the bucket made."""
        port, log = port_and_log(log_dir, "gcs-emulator")
        proc = spawn(
            [*emulator(), "start", "--host", "127.0.0.1", "--port", str(port), "--in-memory"]
            + ["--default-bucket", BUCKET, "--quiet"],
            log,
            start_new_session=True,
        )
        return cls(f"http://127.0.0.1:{port}", proc, log).ready()

    def setup(self) -> None:
        """Check that the bucket is there."""
        if not self.filesystem().exists(BUCKET):
            raise RuntimeError(f"the GCS emulator on {self.endpoint} has no bucket {BUCKET} (log {self.log})")

    @property
    def storage_options(self) -> dict:
        """fsspec (gcsfs) options: this endpoint, anonymous (the emulator checks nothing)."""
        return {"endpoint_url": self.endpoint, "token": "anon"}

    @property
    def endpoint_options(self) -> dict:
        """This endpoint only, no ``token``: what a reader of vended OAuth tokens passes."""
        return {"endpoint_url": self.endpoint}

    def filesystem(self):
        """A fresh gcsfs filesystem on the server (not fsspec's cached instance)."""
        import gcsfs

        return gcsfs.GCSFileSystem(skip_instance_cache=True, **self.storage_options)

    def url(self, *parts: str) -> str:
        return "gs://" + "/".join([self.bucket, *parts])


__all__ = ["BUCKET", "ENV", "GcsServer", "emulator"]
