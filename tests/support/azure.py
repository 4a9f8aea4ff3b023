"""A real Azure Blob Storage API server for the tests: Azurite, Microsoft's emulator (npm's
``azurite``, pinned in tests/support/azurite/package.json, installed there by ``npm ci``:
tests/run-all.sh), its blob service in a process of its own on a free port of 127.0.0.1.

Azurite checks Shared Key signatures against its one well-known account
(``devstoreaccount1``; Azure's documented development key): a request signed with another
key is refused (403, ``AuthorizationFailure``), as by Azure.

    with AzuriteServer.start(log_dir) as server:
        fs = server.filesystem()          # adlfs, with the account's key
        server.storage_options            # for read_delta(..., storage_options=...)
        server.url("t")                   # abfs://spark-dask/t
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass

from distributed.utils import open_port

from tests.support.paths import ROOT
from tests.support.processes import port_open, wait_until

AZURITE_DIR = os.path.join(ROOT, "tests", "support", "azurite")
ACCOUNT = "devstoreaccount1"
# Azurite's (and Azure's storage emulator's) published development key: no secret
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
CONTAINER = "spark-dask"
START_TIMEOUT = 30  # seconds for the server to answer


def azurite_blob() -> list[str]:
    """``[node, .../azurite-blob]``, or skip (under CI: fail) without Node.js or `npm ci`."""
    import pytest

    node = shutil.which("node")
    script = os.path.join(AZURITE_DIR, "node_modules", "azurite", "dist", "src", "blob", "main.js")
    if node and os.path.exists(script):
        return [node, script]
    if os.environ.get("CI"):
        pytest.fail(f"CI must install Node.js and run `npm ci` in {AZURITE_DIR} (tests/run-all.sh)", pytrace=False)
    pytest.skip(f"Azurite not installed: install Node.js >= 18 (bash .ci/install-node) and `npm ci` in {AZURITE_DIR}")


@dataclass
class AzuriteServer:
    """A running Azurite blob service: its endpoint, the process, its data directory."""

    endpoint: str
    proc: subprocess.Popen
    location: str
    log: str
    container: str = CONTAINER

    @classmethod
    def start(cls, log_dir: str | None = None) -> AzuriteServer:
        """Start the blob service (data in a fresh directory) and make the container."""
        cmd = azurite_blob()
        port = open_port("127.0.0.1")
        location = tempfile.mkdtemp(prefix="azurite-", dir=log_dir)
        log = os.path.join(log_dir or "/tmp", f"azurite-{port}.log")
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [*cmd, "--blobHost", "127.0.0.1", "--blobPort", str(port), "--location", location]
                + ["--skipApiVersionCheck", "--disableProductStyleUrl", "--disableTelemetry", "--loose", "--silent"],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        endpoint = f"http://127.0.0.1:{port}/{ACCOUNT}"
        server = cls(endpoint, proc, location, log)
        try:
            if not wait_until(lambda: proc.poll() is not None or port_open(f"127.0.0.1:{port}"), timeout=START_TIMEOUT):
                raise RuntimeError(f"Azurite did not answer on {endpoint} in {START_TIMEOUT} s (log {log})")
            if proc.poll() is not None:
                raise RuntimeError(f"Azurite exited ({proc.returncode}): log {log}")
            server.filesystem().mkdir(CONTAINER)
        except BaseException:
            server.stop()
            raise
        return server

    def stop(self, timeout: float = 10) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout)
        shutil.rmtree(self.location, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def connection_string(self, key: str = KEY) -> str:
        return f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={key};BlobEndpoint={self.endpoint};"

    @property
    def storage_options(self) -> dict:
        """fsspec (adlfs) options: the account, its key and this endpoint."""
        return self.options()

    def options(self, key: str = KEY) -> dict:
        return {"account_name": ACCOUNT, "connection_string": self.connection_string(key)}

    def filesystem(self, key: str = KEY):
        """A fresh adlfs filesystem on the server (not fsspec's cached instance)."""
        import adlfs

        return adlfs.AzureBlobFileSystem(skip_instance_cache=True, **self.options(key))

    def url(self, *parts: str) -> str:
        return "abfs://" + "/".join([self.container, *parts])


__all__ = ["ACCOUNT", "AZURITE_DIR", "CONTAINER", "KEY", "AzuriteServer", "azurite_blob"]
