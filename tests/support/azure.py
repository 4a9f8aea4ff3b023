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
        server.dfs_url("t")               # abfss://spark-dask@devstoreaccount1.dfs.core.windows.net/t
        server.endpoint_options           # the endpoint without a key (a vended SAS reads)
"""

from __future__ import annotations

import datetime
import os
import shutil
import tempfile
from dataclasses import dataclass

from tests.support.paths import ROOT
from tests.support.stores import Emulator, port_and_log, spawn

AZURITE_DIR = os.path.join(ROOT, "tests", "support", "azurite")
ACCOUNT = "devstoreaccount1"
# Azurite's (and Azure's storage emulator's) published development key: no secret
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
CONTAINER = "spark-dask"


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
class AzuriteServer(Emulator):
    """A running Azurite blob service: its endpoint, the process, its data directory."""

    name = "Azurite"

    location: str
    container: str = CONTAINER

    @classmethod
    def start(cls, log_dir: str | None = None) -> AzuriteServer:
        """Start the blob service (data in a fresh directory) and make the container."""
        cmd = azurite_blob()
        port, log = port_and_log(log_dir, "azurite")
        location = tempfile.mkdtemp(prefix="azurite-", dir=log_dir)
        proc = spawn(
            [*cmd, "--blobHost", "127.0.0.1", "--blobPort", str(port), "--location", location]
            + ["--skipApiVersionCheck", "--disableProductStyleUrl", "--disableTelemetry", "--loose", "--silent"],
            log,
            start_new_session=True,
        )
        return cls(f"http://127.0.0.1:{port}/{ACCOUNT}", proc, log, location).ready(f"127.0.0.1:{port}")

    def setup(self) -> None:
        """Make the container."""
        self.filesystem().mkdir(CONTAINER)

    def stop(self, timeout: float = 10) -> None:
        """Stop the process (:meth:`.Emulator.stop`) and remove the data directory."""
        super().stop(timeout)
        shutil.rmtree(self.location, ignore_errors=True)

    def connection_string(self, key: str = KEY) -> str:
        return f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={key};BlobEndpoint={self.endpoint};"

    @property
    def storage_options(self) -> dict:
        """fsspec (adlfs) options: the account, its key and this endpoint."""
        return self.options()

    def options(self, key: str = KEY) -> dict:
        return {"account_name": ACCOUNT, "connection_string": self.connection_string(key)}

    @property
    def endpoint_options(self) -> dict:
        """The account and this endpoint only, no credential: what a reader of vended SAS
        tokens passes (adlfs reaches an ``http://`` endpoint through a connection string
        only: its ``account_host`` is always https)."""
        return {"account_name": ACCOUNT, "connection_string": f"BlobEndpoint={self.endpoint};"}

    def container_sas(self, expiry: datetime.datetime, write: bool = False, container: str = CONTAINER) -> str:
        """A service SAS for ``container`` signed with the account's key: read and list
        (``write``: also write, create, add and delete) until ``expiry`` (Azurite checks
        the signature and the expiry, to the second)."""
        from azure.storage.blob import ContainerSasPermissions, generate_container_sas

        permission = ContainerSasPermissions(read=True, list=True, write=write, create=write, add=write, delete=write)
        return generate_container_sas(ACCOUNT, container, account_key=KEY, permission=permission, expiry=expiry)

    def filesystem(self, key: str = KEY):
        """A fresh adlfs filesystem on the server (not fsspec's cached instance)."""
        import adlfs

        return adlfs.AzureBlobFileSystem(skip_instance_cache=True, **self.options(key))

    def url(self, *parts: str) -> str:
        return "abfs://" + "/".join([self.container, *parts])

    def dfs_url(self, *parts: str) -> str:
        """Databricks' form of a location: ``abfss://container@account.dfs.core.windows.net/...``
        (adlfs reads it on this server too: the container from the URL, the endpoint from
        the options' connection string)."""
        return f"abfss://{self.container}@{ACCOUNT}.dfs.core.windows.net/" + "/".join(parts)


__all__ = ["ACCOUNT", "AZURITE_DIR", "CONTAINER", "KEY", "AzuriteServer", "azurite_blob"]
