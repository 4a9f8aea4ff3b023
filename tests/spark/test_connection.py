"""Other processes join a running cluster: ``write_connection()``, ``DASK_CONFIG``, a
plain ``Client()`` in a subprocess, the Node.js client of ``examples/clients/node``,
and ``spark-dask run``'s child processes."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import textwrap

import pytest
import yaml

import spark_dask
from spark_dask import xlang
from spark_dask.commands.run import run_script
from spark_dask.connection import CONFIG_FILE, ENV_SCHEDULER_FILE, SCHEDULER_FILE
from tests.support.node import CLIENT_DIR, WORKER_DIR, node_script, start_node
from tests.support.paths import ROOT
from tests.support.processes import wait_until
from tests.support.spark import assert_no_leftovers

NODE_DIR = os.path.join(ROOT, "examples", "clients", "node")

pytestmark = pytest.mark.spark

JOIN = textwrap.dedent(
    """
    import os, sys
    from distributed import Client
    with Client(timeout=30) as c:   # no address: DASK_CONFIG's files say where and how
        n = len(c.scheduler_info()["workers"])
        print("JOINED", c.scheduler.address, n, c.submit(sum, [1, 2, 3]).result(), flush=True)
        if len(sys.argv) > 1:
            print("FROM_FILE", Client(scheduler_file=os.environ["SPARK_DASK_SCHEDULER_FILE"],
                                      timeout=30).scheduler.address, flush=True)
    """
)


NODE_MISSING = (
    "Node.js part not run: install Node.js >= 18 (bash .ci/install-node) and `npm ci` in examples/clients/node"
)


def node_client() -> list[str] | None:
    """The command that runs the Node.js example, or None: the caller skips (reported,
    after its Python checks); under CI this fails instead."""
    node = shutil.which("node")
    if node and os.path.isdir(os.path.join(NODE_DIR, "node_modules", "@msgpack")):
        return [node, os.path.join(NODE_DIR, "client.mjs")]
    if os.environ.get("CI"):
        pytest.fail(
            "CI must install Node.js and run `npm ci` in examples/clients/node (tests/run-all.sh)", pytrace=False
        )
    return None


def run_child(cmd, env, timeout=60) -> str:
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return proc.stdout


def mode(path: str) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.mark.timeout(240)
def test_write_connection_lets_other_processes_and_languages_join(spark, tmp_path):
    directory = tmp_path / "conn"
    with spark_dask.SparkCluster(spark, n_workers=2, progress=False) as cluster:
        path = cluster.write_connection(directory)
        assert path == str(directory / SCHEDULER_FILE)
        assert mode(directory) == 0o700
        files = sorted(os.listdir(directory))
        assert files == ["ca.pem", "client-cert.pem", "client-key.pem", SCHEDULER_FILE, CONFIG_FILE]
        assert all(mode(directory / f) == 0o600 for f in files)

        with open(path) as f:
            info = json.load(f)  # distributed's scheduler-file format
        assert set(info) == {"type", "id", "address", "services", "started", "workers"}
        assert info["type"] == "Scheduler" and info["address"] == cluster.scheduler_address
        assert info["id"] == cluster.scheduler.id and "dashboard" in info["services"]
        with open(directory / CONFIG_FILE) as f:
            cfg = yaml.safe_load(f)
        assert cfg["scheduler-address"] == cluster.scheduler_address
        comm = cfg["distributed"]["comm"]
        assert comm["require-encryption"] is True
        assert comm["tls"] == {
            "ca-file": str(directory / "ca.pem"),
            "client": {"cert": str(directory / "client-cert.pem"), "key": str(directory / "client-key.pem")},
        }

        env = dict(os.environ, DASK_CONFIG=str(directory), **{ENV_SCHEDULER_FILE: path})
        out = run_child([sys.executable, "-c", JOIN, "--scheduler-file"], env)
        assert f"JOINED {cluster.scheduler_address} 2 6" in out, out
        assert f"FROM_FILE {cluster.scheduler_address}" in out, out
        # without the credentials the scheduler refuses (TLS with the cluster's own CA)
        bare = dict(os.environ, DASK_SCHEDULER_ADDRESS=cluster.scheduler_address)
        bare.pop("DASK_CONFIG", None)
        proc = subprocess.run([sys.executable, "-c", "from distributed import Client; Client(timeout=5)"],
                              env=bare, capture_output=True, text=True, timeout=60)  # fmt: skip
        assert proc.returncode != 0

        node = node_client()
        if node is not None:
            client = cluster.get_client()
            client.set_metadata(["spark-dask-example", "from-python"], {"rows": [1, 2, 3]})
            result = json.loads(run_child(node, env))
            assert result["identity"]["type"] == "Scheduler"
            assert result["identity"]["address"] == cluster.scheduler_address
            assert result["identity"]["id"] == cluster.scheduler.id
            assert sorted(w["name"] for w in result["identity"]["workers"]) == ["spark-0", "spark-1"]
            assert result["handshake"]["pickle-protocol"] >= 4
            assert result["from_python"] == {"rows": [1, 2, 3]}
            assert result["set_then_get"]["language"] == "javascript"
            assert client.get_metadata(["spark-dask-example", "from-node"]) == result["set_then_get"]
            client.close()
    assert_no_leftovers(spark, cluster)
    assert not os.path.exists(directory)  # made by write_connection(): gone with the credentials
    with pytest.raises(spark_dask.SparkDaskError, match="write_connection\\(\\) needs a running cluster"):
        cluster.write_connection(tmp_path / "late")
    if node is None:
        pytest.skip(NODE_MISSING)


@pytest.mark.timeout(240)
def test_write_connection_without_tls_into_an_existing_directory(spark, tmp_path):
    directory = str(tmp_path / "shared")
    os.mkdir(directory)
    os.chmod(directory, 0o755)
    with pytest.warns(UserWarning, match="TLS is off"):
        cluster = spark_dask.SparkCluster(spark, n_workers=1, tls=False, progress=False)
    try:
        with pytest.warns(UserWarning, match="can be listed by other users"):
            cluster.write_connection(directory)
        assert sorted(os.listdir(directory)) == [SCHEDULER_FILE, CONFIG_FILE]
        with open(os.path.join(directory, CONFIG_FILE)) as f:
            assert yaml.safe_load(f) == {"scheduler-address": cluster.scheduler_address}
        out = run_child([sys.executable, "-c", JOIN], dict(os.environ, DASK_CONFIG=directory))
        assert f"JOINED {cluster.scheduler_address} 1 6" in out
    finally:
        cluster.close()
    assert os.listdir(directory) == []  # not ours: the files went, the directory stays
    assert_no_leftovers(spark, cluster)


CHILDREN = textwrap.dedent(
    """
    import json, os, subprocess, sys
    print("ENV", os.environ["DASK_CONFIG"], os.environ["SPARK_DASK_SCHEDULER_FILE"], flush=True)
    out = subprocess.run([sys.executable, "-c", {join!r}], capture_output=True, text=True, timeout=60)
    print(out.stdout, out.stderr[-2000:] if out.returncode else "", flush=True)
    node = {node!r}
    if node:
        out = subprocess.run(node, capture_output=True, text=True, timeout=60)
        print("NODE", json.loads(out.stdout)["identity"]["address"] if out.returncode == 0 else out.stderr, flush=True)
    """
)


@pytest.mark.timeout(240)
def test_run_gives_child_processes_the_cluster(spark, tmp_path, capfd):
    node = node_client()
    script = tmp_path / "job.py"
    script.write_text(CHILDREN.format(join=JOIN, node=node))
    before = os.environ.get("DASK_CONFIG")
    code = run_script(str(script), [], spark=spark, n_workers=1, progress=False)
    out = capfd.readouterr()
    assert code == 0, out.out + out.err
    env_line = next(line for line in out.out.splitlines() if line.startswith("ENV "))
    _, directory, scheduler_file = env_line.split()
    assert scheduler_file == os.path.join(directory, SCHEDULER_FILE)
    joined = next(line for line in out.out.splitlines() if line.startswith("JOINED "))
    address = joined.split()[1]
    assert joined.endswith(" 1 6"), joined
    if node:
        assert f"NODE {address}" in out.out, out.out
    assert os.environ.get("DASK_CONFIG") == before and ENV_SCHEDULER_FILE not in os.environ
    assert not os.path.exists(directory)
    if not node:
        pytest.skip(NODE_MISSING)


# ------------------------------------------------------------ tasks in other languages
@pytest.mark.timeout(300)
def test_node_worker_beside_python_workers_runs_tasks_both_ways(spark, tmp_path):
    """A spark-dask cluster (two Python workers in Spark tasks) and a Node.js worker on
    the driver joined from write_connection(): Node tasks use Python results and Python
    tasks (also ordinary ones) use Node results; the Node.js client submits a graph that
    refers to a Python client's Future; the worker exits when the cluster closes."""
    submit = node_script(CLIENT_DIR, "submit.mjs")
    directory, log = tmp_path / "conn", tmp_path / "node.log"
    proc = None
    try:
        with spark_dask.SparkCluster(spark, n_workers=2, progress=False) as cluster:
            cluster.write_connection(directory)
            proc = start_node(str(directory), "node-1", log)
            client = cluster.get_client()
            assert wait_until(lambda: client.sync(client.scheduler.xlang_workers).get("node") == 1, timeout=60), (
                log.read_text()
            )
            fib = xlang.submit(client, "node", "fib", 20)
            five = xlang.submit(client, "python", "math.factorial", 5)
            mixed = xlang.submit(client, "node", "add", fib, five, 1)
            back = xlang.submit(client, "python", "builtins.sum", [mixed, fib])
            doubled = client.submit(lambda x: 2 * x, fib)  # an ordinary task on a Node result
            assert [f.result(timeout=60) for f in (fib, five, mixed, back, doubled)] == [6765, 120, 6886, 13651, 13530]
            python_places = {a for addrs in client.who_has([doubled, five, back]).values() for a in addrs}
            assert python_places and not python_places & node_addresses(client)
            graph = {"n": ["node", "sum", ["@" + five.key, 3]], "p": ["python", "operator.mul", "@n", 2],
                     "s": ["node", "concat", ["@@x"], ["@p"]]}  # fmt: skip
            out = json.loads(run_child(submit + [str(directory), json.dumps(graph), "n", "p", "s"], os.environ))
            assert out == {"n": 123, "p": 246, "s": ["@x", 246]}
            failing = xlang.submit(client, "node", "fail", "no luck")
            with pytest.raises(
                xlang.XLangTaskError, match=r"node task .* \(fail\) failed on worker node-1: Error: no luck"
            ):
                failing.result(timeout=60)
            client.close()
        assert proc.wait(30) == 0, log.read_text()  # it left with the scheduler
        assert_no_leftovers(spark, cluster)
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(10)


def node_addresses(client) -> set[str]:
    return {a for a, w in client.scheduler_info()["workers"].items() if "xlang-node" in (w.get("resources") or {})}


@pytest.mark.timeout(300)
def test_node_workers_start_in_spark_tasks_through_worker_command(spark):
    worker = node_script(WORKER_DIR, "worker.mjs")
    template = worker + ["--scheduler", "{scheduler_address}", "--name", "{name}", "--nthreads", "{nthreads}",
                         "--tls-ca", "{tls_ca_file}", "--tls-cert", "{tls_cert}", "--tls-key", "{tls_key}"]  # fmt: skip
    with spark_dask.start(spark, n_workers=2, worker_command=template) as client:
        assert client.sync(client.scheduler.xlang_workers) == {"node": 2}
        names = sorted(w["name"] for w in client.scheduler_info()["workers"].values())
        assert names == ["spark-0", "spark-1"]
        fibs = [xlang.submit(client, "node", "fib", n) for n in range(15)]
        total = xlang.submit(client, "node", "sum", fibs)
        assert total.result(timeout=60) == 986  # fib(0) + ... + fib(14)
        cluster = client.cluster
    assert_no_leftovers(spark, cluster)
