"""The Node.js client and worker of ``examples/`` (``npm ci`` in their folders), and a
stand-in for a spark-dask cluster that ``spark_dask.connection.write_connection`` reads."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from distributed.core import Status
from distributed.security import Security

from tests.support.paths import ROOT

CLIENT_DIR = os.path.join(ROOT, "examples", "clients", "node")
WORKER_DIR = os.path.join(ROOT, "examples", "workers", "node")
NODE_MISSING = "Node.js part not run: install Node.js >= 18 (bash .ci/install-node) and `npm ci` in {}"


def node_script(directory: str, script: str) -> list[str] | None:
    """``[node, directory/script]``, or skip (under CI: fail) without Node.js or `npm ci`."""
    node = shutil.which("node")
    if node and os.path.isdir(os.path.join(directory, "node_modules")):
        return [node, os.path.join(directory, script)]
    if os.environ.get("CI"):
        pytest.fail(f"CI must install Node.js and run `npm ci` in {directory} (tests/run-all.sh)", pytrace=False)
    pytest.skip(NODE_MISSING.format(directory))


def start_node(conn: str, name: str, log) -> subprocess.Popen:
    """A Node.js worker (examples/workers/node) joining from the connection files in ``conn``."""
    cmd = node_script(WORKER_DIR, "worker.mjs") + [conn, "--name", name, "--nthreads", "2"]
    with open(log, "wb") as out:  # the child keeps its own copy of the descriptor
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


class StandIn:
    """What ``write_connection`` reads of a cluster: a scheduler and its credentials."""

    def __init__(self, scheduler, security: Security):
        self.scheduler = scheduler
        self.security = security
        self.status = Status.running
        self.hooks: list = []

    def add_close_hook(self, hook) -> None:
        self.hooks.append(hook)
