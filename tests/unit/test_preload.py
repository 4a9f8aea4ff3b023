"""The workers' preload (spark_dask/executor/preload.py) and the task specification that carries
it (spark_dask/executor/task_spec.py, built by spark_dask/gangs/maker.py): what can be exercised without a worker or Spark. Fast.

The preload running for real in workers: tests/spark/test_fork_nanny.py, test_cluster.py."""

from __future__ import annotations

import ast
import dataclasses
import os
import subprocess
import sys
import threading

import pytest
from distributed import Nanny

from spark_dask import options
from spark_dask.capacity import ClusterFacts, GangPlan
from spark_dask.executor import gang_task as task
from spark_dask.executor import preload, processes
from spark_dask.gangs import maker as spec
from spark_dask.spark import shipping
from tests.support.task_specs import make_spec

pytestmark = pytest.mark.core

STDLIB = set(sys.stdlib_module_names)


def test_preload_is_self_contained():
    """It runs on executors without spark_dask: the standard library and distributed only."""
    tree = ast.parse(spec.preload_source())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add((node.module or "").split(".")[0])
    assert imported and imported <= STDLIB | {"distributed"}, imported
    assert "dask_setup" in {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}


def test_spec_carries_the_module_source():
    with open(preload.__file__, encoding="utf-8") as f:
        assert spec.preload_source() == f.read()
    assert make_spec().preload == spec.preload_source()


def test_written_preload_imports_by_its_module_name(tmp_path, monkeypatch):
    path = processes.write_private(str(tmp_path / (task.PRELOAD_MODULE + ".py")), make_spec().preload)
    out = subprocess.run(
        [sys.executable, "-c", f"import {task.PRELOAD_MODULE} as p; print(p.__file__, callable(p.dask_setup))"],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(tmp_path)}, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert out.stdout.split() == [path, "True"]


def test_alive():
    assert preload.alive(os.getpid())
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert not preload.alive(child.pid)  # reaped: no such process


def test_set_title_writes_the_name_and_ignores_what_cannot_be_written(tmp_path):
    comm = tmp_path / "comm"
    preload.set_title("dask-worker", str(comm))
    assert comm.read_text() == "dask-worker"
    preload.set_title("dask-worker", str(tmp_path / "no" / "such" / "comm"))  # no error


def test_spark_facts_from_the_environment():
    assert preload.spark_facts({}) == {}
    assert preload.spark_facts({"SPARK_DASK_FACTS": '{"gang": 2, "host": "h"}'}) == {"gang": 2, "host": "h"}


def test_watchdog_only_for_a_named_task(monkeypatch):
    assert preload.start_watchdog({}) is None
    assert preload.start_watchdog({"SPARK_DASK_TASK_PID": "0"}) is None
    waited = threading.Event()

    def fake_watch(pid, grace):
        assert (pid, grace) == (os.getpid(), 2.5)
        waited.set()

    monkeypatch.setattr(preload, "watchdog", fake_watch)
    thread = preload.start_watchdog({"SPARK_DASK_TASK_PID": str(os.getpid()), "SPARK_DASK_KILL_GRACE": "2.5"})
    thread.join(5)
    assert waited.is_set() and thread.daemon and thread.name == "spark-dask-watchdog"


def test_dask_setup_tags_a_worker_and_gives_a_nanny_the_fast_close(monkeypatch):
    titles = []
    monkeypatch.setattr(preload, "set_title", titles.append)
    monkeypatch.setenv("SPARK_DASK_FACTS", '{"cluster": "spark-dask-x", "gang": 1}')
    monkeypatch.delenv("SPARK_DASK_TASK_PID", raising=False)

    class FakeWorker:
        def __init__(self):
            self.startup_information = {}

    worker = FakeWorker()
    preload.dask_setup(worker)
    assert worker.startup_information["spark"](worker) == {"cluster": "spark-dask-x", "gang": 1}
    nanny = Nanny.__new__(Nanny)  # no server started: the hook only adds a handler
    nanny.handlers = {}
    preload.dask_setup(nanny)
    assert callable(nanny.handlers["spark_dask_close"])
    assert titles == ["dask-worker", "dask-nanny"]


def test_task_spec_is_frozen_and_gangs_replace_fields():
    s = make_spec()
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.n_workers = 3
    g = dataclasses.replace(s, gang=2, name_base=6, barrier=False)
    assert (g.gang, g.name_base, g.barrier, s.gang, s.name_base, s.barrier) == (2, 6, False, 0, 0, True)
    assert "BEGIN" not in repr(dataclasses.replace(s, tls={"ca": "BEGIN", "cert": "BEGIN", "key": "BEGIN"}))
    assert "dask_setup" not in repr(s)  # the preload's text is left out too


def test_task_spec_from_options_plan_and_facts():
    opts = options.resolve(**{o.name: None for o in options.keyword_options() if o.config})
    facts = ClusterFacts(executors=2, executor_cores=4, executor_memory=2**30, executor_gpus=1, task_gpus=1,
                         slots=8, gpu_addresses=[("h1", "0", ["0"]), ("h1", "1", ["1"])])  # fmt: skip
    plan = GangPlan("cuda", True, 2, 2, 1, gpu_mode="exclusive")
    s = spec.task_spec("spark-dask-t", "tls://d:1", None, opts, plan, facts, {"A": "1"}, None)
    assert isinstance(s, spec.TaskSpec)
    assert (s.cluster_id, s.kind, s.pinned, s.requires, s.worker_options) == (
        "spark-dask-t",
        "cuda",
        True,
        ["distributed", "dask_cuda"],
        {},
    )
    assert s.executor_gpus == {"h1": [["0"], ["1"]]} and s.gpus_per_executor == 1
    assert s.gpus_by_executor == {"0": ["0"], "1": ["1"]}  # executors of one host told apart by id
    assert (s.gang, s.name_base, s.barrier, s.log_lines, s.claim_wait) == (0, 0, True, 30, 10.0)
    assert s.preload == spec.preload_source()


def test_shipped_code_unpickles_and_runs_where_spark_dask_is_missing(tmp_path):
    """The executors and Dask workers may lack spark_dask: what the package ships
    (:data:`spark_dask.executor.SHIPPED`, :data:`spark_dask.handoff.SHIPPED`) unpickles
    and runs in a Python where ``import spark_dask`` fails: the gang's task and its
    spec, the pure decisions the task makes, and a hand-off file written and loaded
    back by the Dask-worker side."""
    import pandas as pd
    import pyarrow as pa
    from pyspark import cloudpickle

    from spark_dask import executor, handoff
    from spark_dask.executor import command, placement
    from spark_dask.handoff import transfer

    shipping.ship_by_value(*executor.SHIPPED, *handoff.SHIPPED)
    schema = pa.schema([("id", pa.int64()), ("k", pa.string())]).serialize().to_pybytes()
    frame = pd.DataFrame({"id": [1, 2, 3], "k": ["a", "b", None]})
    data = cloudpickle.dumps((
        make_spec(n_workers=3), task.classic_partition(make_spec()), placement.worker_name,
        command.worker_command, transfer.write_partition, transfer.load_partition, frame, schema,
    ))  # fmt: skip
    (tmp_path / "payload").write_bytes(data)
    (tmp_path / "local").mkdir()
    script = (
        "import sys, pickle, dataclasses\n"
        "sys.modules['spark_dask'] = None  # any import of it fails\n"
        "s, fn, name, command, write, load, frame, schema = pickle.loads(open('payload', 'rb').read())\n"
        "r = dataclasses.replace(s, gang=4)\n"
        "print(type(s).__name__, s.n_workers, r.gang, 'dask_setup' in s.preload, callable(fn))\n"
        "f = {'python': 'py', 'scheduler_address': 'tls://d:1', 'name': 'w', 'nthreads': 2,\n"
        "     'memory_limit': 2**30, 'local_directory': '/l', 'death_timeout': 60, 'preload': 'p'}\n"
        "print(name(3, '1'), ' '.join(command(f, 'cpu')[:4]))\n"
        "part = write(frame, 0, 'spark-dask-handoff-t', schema)\n"
        "back = load(part)\n"
        "print(part['rows'], back.id.tolist(), back.k[:2].tolist(), back.k.isna().tolist())\n"
    )
    env = {**os.environ, "SPARK_LOCAL_DIRS": str(tmp_path / "local")}
    out = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, check=False,
                         env=env, timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].split() == ["TaskSpec", "3", "4", "True", "True"]
    assert lines[1] == "spark-3-gpu1 py -m distributed.cli.dask_worker tls://d:1"
    assert lines[2] == "3 [1, 2, 3] ['a', 'b'] [False, False, True]"
