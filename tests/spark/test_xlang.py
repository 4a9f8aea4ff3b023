"""Cross-language tasks (spark_dask.xlang, spark_dask.xlang.scheduler) on a real Dask
scheduler with the extension installed (TLS, as spark-dask's): the graph format's
rules, placement (ordinary tasks never reach a worker of another language, that
language's tasks only reach it), Python tasks from the msgpack graph, errors, and the
Node.js client and worker of ``examples/`` (tests/spark/test_node_worker.py covers the Node.js
worker's protocol on its own; test_xlang_spark runs the Node.js worker in Spark tasks).

The local stand-in for a spark-dask cluster is a ``LocalCluster`` (threads, TLS with
``Security.temporary()``) whose scheduler loads ``spark_dask.xlang.scheduler`` as a
preload, and whose connection files ``spark_dask.connection.write_connection`` writes.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
import warnings

import pytest
from distributed import Client, LocalCluster, Worker, wait
from distributed.security import Security
from distributed.versions import VersionMismatchWarning

from spark_dask import connection, internals, xlang
from spark_dask.xlang.graph import XLangError, carry_problem, references, resolve, task_order
from tests.support.node import CLIENT_DIR, StandIn, node_script, start_node
from tests.support.processes import wait_until


# ---------------------------------------------------------------- the graph's rules
def test_task_order_puts_dependencies_first_and_finds_references_in_containers():
    graph = {
        "c": ["node", "add", "@a", {"x": ["@b"]}, "@@literal"],
        "a": ["node", "fib", 3],
        "b": ["python", "math.factorial", "@a"],
    }
    order = [key for key, *_ in task_order(graph)]
    assert order.index("a") < order.index("b") < order.index("c")
    assert references(graph["c"][2:]) == ["a", "b"]
    assert resolve(graph["c"][2:], {"a": 2, "b": (1, 2)}) == [2, {"x": [(1, 2)]}, "@literal"]


@pytest.mark.parametrize(
    "graph, words",
    [
        ({}, "non-empty map"),
        ([["node", "fib"]], "non-empty map"),
        ({"a": ["node"]}, "expected [language, function"),
        ({"a": "node fib 3"}, "expected [language, function"),
        ({"a": ["python", "factorial", 3]}, "dotted path"),
        ({"a": ["node", "f", "@b"], "b": ["node", "f", "@a"]}, "cycle: a -> b -> a"),
        ({"a": ["node", "f", {1, 2}]}, "builtins.set, which msgpack cannot carry"),
        ({"a": ["node", "f", 2**70]}, "too large for msgpack"),
        ({"a": ["node", "f", {(1, 2): 3}]}, "key of type tuple"),
    ],
)
def test_malformed_graphs_are_refused_with_the_reason(graph, words):
    with pytest.raises(XLangError, match=None) as info:
        task_order(graph)
    assert words in str(info.value)


def test_carry_problem_accepts_what_msgpack_carries():
    assert carry_problem([None, True, 1, -(2**63), 2.5, "s", b"b", (1, [2]), {"k": {1: "v"}}], "x") is None
    assert "numpy.ndarray" in carry_problem(__import__("numpy").arange(3), "the result")


# ------------------------------------------------------------------ a stand-in cluster
@pytest.fixture
def xcluster(tmp_path):
    """(LocalCluster with one Python worker, its Security, a connection directory)."""
    security = Security.temporary()
    with LocalCluster(n_workers=1, threads_per_worker=2, processes=False, protocol="tls", security=security,
                      dashboard_address=":0", scheduler_kwargs={"preload": ["spark_dask.xlang.scheduler"]}) as cluster:  # fmt: skip
        stand_in = StandIn(cluster.scheduler, security)
        connection.write_connection(stand_in, str(tmp_path / "conn"))
        try:
            yield cluster, security, str(tmp_path / "conn")
        finally:
            for hook in stand_in.hooks:
                hook()


@pytest.mark.timeout(120)
def test_ordinary_tasks_never_reach_a_worker_of_another_language(xcluster):
    """A Python worker that declares ``xlang-node`` stands for a Node.js worker: the 60
    plain tasks (with and without dependencies, root-ish and not) all run on the real
    Python worker, the node task runs on it only (and its Python callable refuses)."""
    cluster, security, _ = xcluster
    assert internals.replaced(cluster.scheduler) == []  # Python workers only: distributed's own scheduler
    cluster.worker_spec["fake-node"] = {
        "cls": Worker,
        "options": {"nthreads": 2, "resources": {"xlang-node": 1}, "security": security},
    }
    cluster.scale(2)
    with Client(cluster, security=security) as client:
        client.wait_for_workers(2)
        assert client.run_on_scheduler(lambda dask_scheduler: internals.replaced(dask_scheduler)) == [
            "valid_workers",
            "decide_worker_non_rootish",
            "check_idle_saturated",
            "stream_handlers['task-erred']",
        ]
        workers = client.scheduler_info()["workers"]
        fake = next(a for a, w in workers.items() if w["name"] == "fake-node")
        python_worker = next(a for a in workers if a != fake)
        roots = client.map(lambda i: i + 1, range(40))
        total = client.submit(sum, roots)
        more = client.map(lambda x, i: x + i, [total] * 20, range(20))
        wait(roots + more + [total])
        places = {a for addrs in client.who_has(roots + more + [total]).values() for a in addrs}
        assert places == {python_worker}
        assert not client.run_on_scheduler(
            lambda dask_scheduler: [w.address for w in dask_scheduler.running if w.address == fake]
        )
        node = xlang.submit(client, "node", "fib", 10)
        with pytest.raises(XLangError, match="was sent to a Python worker"):
            node.result(timeout=30)  # it reached the only worker declaring xlang-node
        assert client.sync(client.scheduler.xlang_workers) == {"python": 1, "node": 1}


@pytest.mark.timeout(120)
def test_python_tasks_from_python_and_from_the_msgpack_graph(xcluster):
    cluster, security, _ = xcluster
    with Client(cluster, security=security) as client:
        five = xlang.submit(client, "python", "math.factorial", 5)
        total = xlang.submit(client, "python", "builtins.sum", [five, 1, 2])
        assert (five.result(timeout=30), total.result(timeout=30)) == (120, 123)
        answer = client.sync(
            client.scheduler.xlang_submit,
            graph={"a": ["python", "operator.add", "@" + five.key, 1], "b": ["python", "builtins.len", ["@a", "@@x"]]},
        )
        assert answer["status"] == "OK" and set(answer["keys"]) == {"a", "b"}
        got = client.sync(client.scheduler.xlang_gather, keys=["a", "b", five.key], holder=answer["holder"], timeout=30)
        assert got == {"status": "OK", "results": {"a": 121, "b": 2, five.key: 120}}
        # the held keys go with the release; the Python client's own stay
        client.sync(client.scheduler.xlang_release, holder=answer["holder"])

        def gone():
            return client.run_on_scheduler(lambda dask_scheduler: "a" not in dask_scheduler.tasks)

        assert wait_until(gone, timeout=10)
        assert client.run_on_scheduler(lambda dask_scheduler, k=five.key: k in dask_scheduler.tasks)


@pytest.mark.timeout(120)
def test_errors_name_the_task_and_the_reason(xcluster):
    cluster, security, _ = xcluster
    with Client(cluster, security=security) as client:
        with pytest.raises(XLangError, match=r"builtins.set, which msgpack cannot carry"):
            xlang.submit(client, "python", "builtins.len", {1, 2})
        unsendable = xlang.submit(client, "python", "builtins.set", [1, 2], key="makes-a-set")
        with pytest.raises(XLangError, match=r"result of task 'makes-a-set' \(builtins.set\) is a builtins.set"):
            unsendable.result(timeout=30)
        missing = xlang.submit(client, "python", "no_such_module_x.f", 1)
        with pytest.raises(XLangError, match="cannot import the python function 'no_such_module_x.f'"):
            missing.result(timeout=30)
        started = time.monotonic()
        lonely = xlang.submit(client, "node", "fib", 3, key="lonely")
        with pytest.raises(XLangError, match=r"no node worker is connected .* task 'lonely' \(fib\) cannot run"):
            lonely.result(timeout=60)
        assert time.monotonic() - started < 30  # the grace (5 s), not a wait forever
        with pytest.raises(XLangError, match="neither in this graph nor on the scheduler"):
            client.sync(client.scheduler.xlang_submit, graph={"a": ["python", "math.factorial", "@nowhere"]})
        got = client.sync(client.scheduler.xlang_gather, keys=["makes-a-set"], timeout=30)
        assert got["status"] == "error" and "builtins.set" in got["message"]


# ------------------------------------------------------------------ Node.js programs
def run(cmd, timeout=60, check=True) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if check:
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return proc


@pytest.mark.timeout(120)
def test_node_client_submits_a_python_graph_and_reads_errors(xcluster):
    submit = node_script(CLIENT_DIR, "submit.mjs")
    cluster, security, conn = xcluster
    graph = {
        "f": ["python", "math.factorial", 6],
        "g": ["python", "builtins.sum", ["@f", 1]],
        "s": ["python", "builtins.str", "@@at"],
    }
    out = run(submit + [conn, json.dumps(graph), "g", "s"])
    assert json.loads(out.stdout) == {"g": 721, "s": "@at"}
    bad = run(submit + [conn, json.dumps({"x": ["python", "builtins.set", [1]]})], check=False)
    assert bad.returncode == 1 and "builtins.set, which msgpack cannot carry" in bad.stderr
    refused = run(submit + [conn, json.dumps({"x": ["python", "factorial", 1]})], check=False)
    assert refused.returncode == 1 and "dotted path" in refused.stderr
    with Client(cluster, security=security) as client:  # the holders went with the releases
        assert wait_until(
            lambda: (
                not client.run_on_scheduler(
                    lambda dask_scheduler: [k for k in dask_scheduler.tasks if k in ("f", "g", "s", "x")]
                )
            ),
            timeout=10,
        )


@pytest.mark.timeout(180)
def test_node_workers_under_the_extension_mixed_graphs_kill_and_close(xcluster, tmp_path):
    """Two Node.js workers on the stand-in: a graph mixing Node and Python tasks both
    ways from the Node.js client; a Node worker SIGKILLed during a task: the task runs on
    the other and the result is right; both exit when the scheduler closes."""
    submit = node_script(CLIENT_DIR, "submit.mjs")
    cluster, security, conn = xcluster
    procs = [start_node(conn, f"node-{i}", tmp_path / f"node-{i}.log") for i in range(2)]
    try:
        with Client(cluster, security=security) as client:
            assert wait_until(lambda: client.sync(client.scheduler.xlang_workers).get("node") == 2, timeout=60)
            with warnings.catch_warnings():  # no "Mismatched versions" for the Node.js workers
                warnings.simplefilter("error", VersionMismatchWarning)
                Client(cluster.scheduler_address, security=security).close()
            graph = {"a": ["node", "fib", 10], "b": ["python", "operator.mul", "@a", 3], "c": ["python", "operator.mod", "@b", 100],
                     "d": ["node", "add", "@c", "@a", 2], "e": ["node", "sum", ["@a", "@d"]]}  # fmt: skip
            out = json.loads(run(submit + [conn, json.dumps(graph), "a", "c", "d", "e"]).stdout)
            assert out == {"a": 55, "c": 65, "d": 122, "e": 177}
            huge = run(submit + [conn, json.dumps({"h": ["python", "math.factorial", 30]})], check=False)
            assert huge.returncode == 1 and "int too large for msgpack (64 bits): 33 digits" in huge.stderr
            slow = xlang.submit(client, "node", "sleep", 3000, "done", key="slow")
            assert wait_until(
                lambda: client.processing().get(next(iter(who_runs(client, "slow")), ""), None), timeout=20
            )
            victim = next(iter(who_runs(client, "slow")))
            name = client.scheduler_info()["workers"][victim]["name"]
            procs[int(name.split("-")[1])].send_signal(signal.SIGKILL)
            assert slow.result(timeout=60) == "done"
            survivor = client.who_has([slow])["slow"]
            assert survivor and victim not in survivor
        cluster.close()
        for p in procs:
            if p.poll() is None or p.returncode != -signal.SIGKILL:
                assert p.wait(30) == 0
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(10)


def who_runs(client, key) -> set[str]:
    return {w for w, keys in client.processing().items() if key in keys}
