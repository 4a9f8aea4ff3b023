"""The Node.js Dask worker of ``examples/workers/node`` against real ``distributed``: a
TLS Scheduler, an in-process Python Worker and Client, and ``node worker.mjs`` processes
(no Spark). Node tasks are marked ``dask.annotate(xlang={"language": "node", ...})`` and
restricted to the ``xlang-node`` resource; the Python function submitted is a stub that
must never run."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import time

import dask
import pytest
from distributed import Client, Scheduler, Worker, wait
from distributed.security import Security

from spark_dask import connection
from tests.support.node import StandIn
from tests.support.paths import ROOT

NODE_DIR = os.path.join(ROOT, "examples", "workers", "node")
COMM = os.path.join(ROOT, "examples", "clients", "node", "dask-comm.mjs")
NODE = {"xlang-node": 1}


def node_worker() -> str:
    """The node binary, or skip (under CI: fail) when Node.js or `npm ci` is missing or stale."""
    node = shutil.which("node")
    installed = os.path.join(NODE_DIR, "node_modules", "spark-dask-node-client", "dask-comm.mjs")
    if node and os.path.isfile(installed):
        with open(installed, "rb") as a, open(COMM, "rb") as b:
            if a.read() == b.read():
                return node
            reason = "examples/workers/node/node_modules holds an old dask-comm.mjs: run `npm ci` there again"
    else:
        reason = "Node.js worker not run: install Node.js >= 18 and run `npm ci` in examples/workers/node"
    if os.environ.get("CI"):
        pytest.fail(f"CI must install Node.js and run `npm ci` in examples/workers/node: {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(autouse=True)
def _needs_node():
    node_worker()  # skip (or, under CI, fail) before starting anything


def stub(*args):
    raise RuntimeError("node task ran on Python")


def node_submit(client, function, *args, key, deps=(), **kw):
    """A Node task: `function(*args)` on a Node worker; deps are futures ("@KEY" in args)."""
    with dask.annotate(xlang={"language": "node", "function": function, "args": list(args)}):
        return client.submit(stub, *deps, key=key, resources=NODE, pure=False, **kw)


class Cluster:
    """A TLS scheduler, one in-process Python worker, a client and Node worker processes."""

    def __init__(self, tmp_path):
        self.tmp = tmp_path
        self.dir = tmp_path / "conn"
        self.procs: list[subprocess.Popen] = []
        self.logs: list[str] = []

    async def __aenter__(self):
        self.sec = Security.temporary()
        self.s = await Scheduler(protocol="tls", security=self.sec, port=0, dashboard_address=":0")
        self.w = await Worker(self.s.address, security=self.sec, nthreads=2, name="python-0")
        self.client = await Client(self.s.address, security=self.sec, asynchronous=True)
        connection.write_connection(StandIn(self.s, self.sec), str(self.dir))  # what a spark-dask cluster writes
        return self

    async def start_node(self, name, *extra, nthreads=2):
        log = str(self.tmp / f"{name}.log")
        self.logs.append(log)
        with open(log, "wb") as f:
            proc = subprocess.Popen(
                [node_worker(), os.path.join(NODE_DIR, "worker.mjs"), str(self.dir), "--name", name,
                 "--nthreads", str(nthreads), *extra],
                stdout=f, stderr=subprocess.STDOUT,
            )  # fmt: skip
        self.procs.append(proc)
        deadline = time.monotonic() + 30
        while not any(ws.name == name for ws in self.s.workers.values()) or "Registered to: " not in self.log(log):
            assert proc.poll() is None, self.log(log)
            assert time.monotonic() < deadline, "Node worker did not register\n" + self.log(log)
            await asyncio.sleep(0.05)
        proc.address = next(a for a, ws in self.s.workers.items() if ws.name == name)
        proc.logfile = log
        return proc

    @staticmethod
    def log(path):
        with open(path, errors="replace") as f:
            return f.read()[-5000:]

    async def __aexit__(self, *exc):
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(10)
        with contextlib.suppress(Exception):
            await self.client.close()
        with contextlib.suppress(Exception):
            await self.w.close()
        with contextlib.suppress(Exception):
            await self.s.close()


def run(coro, timeout):
    asyncio.run(asyncio.wait_for(coro, timeout))


def erred(c, key):
    """The scheduler's record of a task that erred (its exception_text and traceback_text:
    with exception=None, as the Node worker sends, the scheduler keeps them only there)."""
    return next(e for e in c.s.erred_tasks if e.key == key)


async def erred_text(c, future) -> str:
    """The exception_text of a Node task that erred (waits for it)."""
    await wait([future], timeout=30)
    assert c.s.tasks[future.key].state == "erred", c.s.tasks[future.key].state
    return erred(c, future.key).exception_text


@pytest.mark.timeout(120)
def test_node_results_flow_both_ways_with_python(tmp_path):
    async def body():
        async with Cluster(tmp_path) as c:
            node = await c.start_node("node-0")
            assert "Registered to: " + c.s.address in c.log(node.logfile)
            ws = c.s.workers[node.address]
            assert ws.resources == {"xlang-node": 2} and ws.nthreads == 2
            assert ws.extra["xlang"]["language"] == "node"
            client = c.client
            f = node_submit(client, "fib", 20, key="fib20")
            assert await f == 6765  # the Python client fetches it from the Node worker
            assert c.s.tasks["fib20"].who_has == {ws}
            assert c.s.tasks["fib20"].type == "javascript:number"
            p = client.submit(lambda x: x + 1, f, key="py", workers=[c.w.address])  # a Python worker fetches from Node
            assert await p == 6766
            g = node_submit(client, "add", "@py", 1, key="g", deps=[p])  # Node fetches from the Python worker
            assert await g == 6767
            # arrays and maps (Python sees msgpack arrays as tuples), nested references, "@@"
            assert await node_submit(client, "echo", {"a": [1, 2, [3]], "b": None, "s": "@@x"}, key="e") == {
                "a": (1, 2, (3,)), "b": None, "s": "@x"}  # fmt: skip
            assert await node_submit(client, "concat", ["@fib20"], [2, 3], key="cat", deps=[f]) == (6765, 2, 3)
            lst = client.submit(lambda: [1, 2, 3.5], key="pylist", workers=[c.w.address])  # a "collection" header
            dct = client.submit(lambda: {"k": [1, 2], "t": (3, b"x")}, key="pydict", workers=[c.w.address])
            tup = client.submit(lambda: ("a", [1, {"z": 2}]), key="pytuple", workers=[c.w.address])
            assert await node_submit(client, "sum", "@pylist", key="s", deps=[lst]) == 6.5
            assert await node_submit(client, "echo", ["@pydict", "@pytuple"], key="e2", deps=[dct, tup]) == (
                {"k": (1, 2), "t": (3, b"x")}, ("a", (1, {"z": 2})))  # fmt: skip
            py2 = client.submit(lambda x: sum(x), node_submit(client, "echo", [4, 5], key="arr"), workers=[c.w.address])
            assert await py2 == 9
            # a tuple key: "@" + its JSON names it
            t = node_submit(client, "fib", 10, key=("fibs", 10))
            assert await t == 55
            assert await node_submit(client, "add", '@["fibs", 10]', 1, key="t1", deps=[t]) == 56
            assert node.poll() is None

    run(body(), 100)


MODULE = """
export function makeMap() { return new Map([[1, 2]]); }
export function nested() { return {ok: [1, new Set([1])]}; }
export function nothing() {}
export function crash() { setTimeout(() => { throw new Error("uncaught in a timer"); }, 10); return new Promise(() => {}); }
export async function later(x) { await new Promise((r) => setTimeout(r, 10)); return x * 2; }
"""


@pytest.mark.timeout(120)
def test_node_task_errors(tmp_path):
    pd = pytest.importorskip("pandas")

    async def body():
        async with Cluster(tmp_path) as c:
            module = tmp_path / "extra.mjs"
            module.write_text(MODULE)
            await c.start_node("node-0", "--module", str(module))
            client = c.client
            assert "Error: boom" in await erred_text(c, node_submit(client, "fail", "boom", key="f1"))
            tb = erred(c, "f1").traceback_text
            assert "boom" in tb and "tasks.mjs" in tb, tb
            text = await erred_text(c, node_submit(client, "nope", key="f2"))
            assert 'no function "nope"' in text and "fib" in text
            text = await erred_text(c, node_submit(client, "makeMap", key="f3"))
            assert text == "TypeError: task f3 returned a Map, which msgpack cannot carry", text
            assert "Set (at .ok[1])" in await erred_text(c, node_submit(client, "nested", key="f4"))
            assert "returned a undefined" in await erred_text(c, node_submit(client, "nothing", key="f5"))
            assert await node_submit(client, "later", 21, key="ok") == 42  # --module's async function
            with dask.annotate(xlang={"language": "python"}):
                f6 = client.submit(stub, key="f6", resources=NODE, pure=False)
            assert "runs only node tasks" in await erred_text(c, f6)
            f7 = client.submit(stub, key="f7", resources=NODE, pure=False)  # no annotation at all
            assert "runs only node tasks" in await erred_text(c, f7)
            assert "no dependency" in await erred_text(c, node_submit(client, "echo", "@missing", key="f8"))
            # Python values msgpack cannot carry: the Node task errs naming the dependency
            objs = client.submit(lambda: {object(), object()}, key="objs", workers=[c.w.address])
            text = await erred_text(c, node_submit(client, "echo", "@objs", key="f9", deps=[objs]))
            assert "dependency objs" in text and "Could not serialize object of type object" in text, (
                text
            )  # the set travels as a collection
            df = client.submit(lambda: pd.DataFrame({"a": [1]}), key="df", workers=[c.w.address])
            text = await erred_text(c, node_submit(client, "echo", "@df", key="f10", deps=[df]))
            assert "dependency df" in text and "DataFrame" in text, text
            # an uncaught error ends the task's thread: the task errs, a new thread takes over
            assert "thread exited" in await erred_text(c, node_submit(client, "crash", key="f11"))
            assert await node_submit(client, "add", 1, 2, key="still") == 3  # the worker carries on
            assert await client.gather([node_submit(client, "add", i, key=f"x{i}") for i in range(8)]) == list(range(8))

    run(body(), 100)


@pytest.mark.timeout(120)
def test_free_keys_and_many_tasks(tmp_path):
    async def body():
        async with Cluster(tmp_path) as c:
            node = await c.start_node("node-0")
            client = c.client
            peer = c.s.rpc(node.address)
            f = node_submit(client, "fib", 30, key="kept")
            assert await f == 832040
            assert await peer.keys() == ("kept",)
            assert (await peer.identity())["type"] == "NodeWorker"
            with pytest.raises(Exception, match="no handler for op profile"):
                await peer.profile()
            f.release()
            deadline = time.monotonic() + 10
            while await peer.keys():
                assert time.monotonic() < deadline, "the Node worker kept a released result"
                await asyncio.sleep(0.05)

            # released while running: the result is discarded when the function returns
            slow = node_submit(client, "sleep", 500, "late", key="cancelled")
            while not (c.s.tasks.get("cancelled") and c.s.tasks["cancelled"].processing_on):
                await asyncio.sleep(0.02)
            await asyncio.sleep(0.2)
            slow.release()
            await asyncio.sleep(0.8)
            assert await peer.keys() == ()
            assert "its result will be discarded" in c.log(node.logfile)

            futures = [node_submit(client, "add", i, 1, key=f"add-{i}") for i in range(1000)]
            assert await client.gather(futures) == [i + 1 for i in range(1000)]
            total = node_submit(client, "sum", [f"@add-{i}" for i in range(200)], key="total", deps=futures[:200])
            assert await total == sum(range(1, 201))
            assert c.s.tasks["total"].who_has == {c.s.workers[node.address]}
            del futures, total
            deadline = time.monotonic() + 10
            while await peer.keys():
                assert time.monotonic() < deadline
                await asyncio.sleep(0.05)
            assert node.poll() is None

    run(body(), 100)


@pytest.mark.timeout(120)
def test_killed_node_worker_and_scheduler_close(tmp_path):
    async def body():
        async with Cluster(tmp_path) as c:
            a = await c.start_node("node-a", nthreads=1)
            b = await c.start_node("node-b", nthreads=1)
            client = c.client
            f = node_submit(client, "sleep", 3000, "slept", key="slow")
            deadline = time.monotonic() + 20
            while not (c.s.tasks.get("slow") and c.s.tasks["slow"].processing_on):
                assert time.monotonic() < deadline
                await asyncio.sleep(0.02)
            await asyncio.sleep(0.5)  # running there now
            victim, other = (a, b) if c.s.tasks["slow"].processing_on.address == a.address else (b, a)
            victim.send_signal(signal.SIGKILL)
            assert await asyncio.wait_for(f, 30) == "slept"
            assert c.s.tasks["slow"].who_has == {c.s.workers[other.address]}
            assert victim.wait(10) == -signal.SIGKILL
            # SIGTERM: the worker leaves (unregisters) and exits 0
            c2 = await c.start_node("node-c", nthreads=1)
            c2.send_signal(signal.SIGTERM)
            assert await asyncio.to_thread(c2.wait, 15) == 0
            assert c2.address not in c.s.workers
            await client.close()
            await c.w.close()
            await c.s.close()  # the scheduler tells the workers to close
            assert await asyncio.to_thread(other.wait, 15) == 0, c.log(other.logfile)
            assert "closed this worker" in c.log(other.logfile) or "went away" in c.log(other.logfile)

    run(body(), 100)


SPIN = """
export function spin(ms) { const end = Date.now() + ms; while (Date.now() < end); return ms; }
export function bytes(n) { return Buffer.alloc(n, 7); }
"""


@pytest.mark.timeout(120)
def test_flags_busy_threads_big_values_and_stealing(tmp_path):
    async def body():
        async with Cluster(tmp_path) as c:
            module = tmp_path / "spin.mjs"
            module.write_text(SPIN)
            d = str(c.dir)
            # the flags of a worker command template instead of DIR; --host for the listener
            a = await c.start_node("node-a", "--module", str(module), "--host", "127.0.0.1", nthreads=2)
            assert a.address.startswith("tls://127.0.0.1:")
            # a taken name: the scheduler refuses, the worker says why and exits 1
            log = tmp_path / "dup.log"
            with open(log, "wb") as f:
                dup = await asyncio.to_thread(  # the scheduler runs on this event loop
                    subprocess.run,
                    [node_worker(), os.path.join(NODE_DIR, "worker.mjs"), "--scheduler", c.s.address,
                     "--tls-ca", f"{d}/ca.pem", "--tls-cert", f"{d}/client-cert.pem", "--tls-key",
                     f"{d}/client-key.pem", "--name", "node-a"],
                    stdout=f, stderr=subprocess.STDOUT, timeout=30,
                )  # fmt: skip
            assert dup.returncode == 1 and "name taken" in log.read_text(), log.read_text()
            client = c.client
            small = node_submit(client, "add", 1, 1, key="small")
            assert await small == 2
            # a CPU-bound task on one thread: heartbeats and get_data go on meanwhile
            busy = node_submit(client, "spin", 3000, key="busy")
            await asyncio.sleep(0.5)
            t0 = time.monotonic()
            assert await client.gather(small, direct=True) == 2
            assert await client.gather(small, direct=False) == 2
            assert time.monotonic() - t0 < 1.5
            assert await busy == 3000
            # large values both ways
            # (for msgpack, distributed serializes a top-level list, tuple, set or dict element by
            # element: ~50 µs each on the Python side; bytes go as they are)
            big = client.submit(lambda: list(range(20_000)), key="big", workers=[c.w.address])
            assert await node_submit(client, "sum", "@big", key="bigsum", deps=[big]) == sum(range(20_000))
            raw = client.submit(lambda: bytes(range(256)) * 20_000, key="raw", workers=[c.w.address])
            assert await node_submit(client, "echo", "@raw", key="rawecho", deps=[raw]) == bytes(range(256)) * 20_000
            blob = node_submit(client, "bytes", 5_000_000, key="blob")
            assert await client.submit(lambda b: (len(b), b[:2]), blob, workers=[c.w.address]) == (
                5_000_000,
                b"\x07\x07",
            )
            # a second Node worker: tasks spread, may be stolen (steal-request/steal-response)
            await c.start_node("node-b", "--module", str(module), nthreads=1)
            futures = [node_submit(client, "sleep", 30, i, key=f"nap-{i}") for i in range(60)]
            assert await client.gather(futures) == list(range(60))
            assert {c.s.tasks[f.key].who_has.pop().name for f in futures} <= {"node-a", "node-b"}

    run(body(), 100)


@pytest.mark.timeout(60)
def test_plain_tcp_without_tls(tmp_path):
    async def body():
        async with Scheduler(port=0, dashboard_address=":0") as s:
            with open(tmp_path / "tcp.log", "wb") as log:  # the child keeps its own descriptor
                proc = subprocess.Popen([node_worker(), os.path.join(NODE_DIR, "worker.mjs"), "--scheduler", s.address],
                                        stdout=log, stderr=subprocess.STDOUT)  # fmt: skip
            try:
                async with Client(s.address, asynchronous=True) as client:
                    await client.wait_for_workers(1, timeout=30)
                    assert next(iter(s.workers)).startswith("tcp://")
                    assert await node_submit(client, "fib", 25, key="f") == 75025
            finally:
                proc.kill()
                proc.wait(10)

    run(body(), 50)


@pytest.mark.timeout(60)
def test_removed_worker_exits(tmp_path):
    async def body():
        async with Cluster(tmp_path) as c:
            node = await c.start_node("node-0")
            await c.s.remove_worker(node.address, stimulus_id="test-remove", close=False)
            code = await asyncio.to_thread(node.wait, 20)
            text = c.log(node.logfile)
            assert code in (0, 1), text  # stream closed (0) or heartbeat "missing" (1)
            assert "went away" in text or "no longer knows this worker" in text, text

    run(body(), 50)
