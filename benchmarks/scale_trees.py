"""``python -m benchmarks scale --trees A,B,.``: the warm start-up of 2 workers on 2 hosts
(``hosts:2x4``, as in docs/benchmarks.md's "Many hosts") against the empty 2-task barrier
stage, for several source trees, in one run on one multi-host bed (root).

Each commit's tree is extracted with ``git archive <commit> | tar -x`` into a temporary
directory (nothing is checked out; ``.`` is the working tree). For each tree a driver
process runs on host ``driver`` from that tree's directory with ``PYTHONPATH`` naming it,
and the executors get the same ``PYTHONPATH`` (``spark.executorEnv.PYTHONPATH``): both
import that tree's spark_dask before the installed one (checked: each run reports the
``spark_dask`` file its driver and an executor imported). The driver runs
:data:`SCRIPT`, which uses only what every tree has (``SparkCluster(spark, n_workers=2,
progress=False)``, ``close()``), so the measurement is the same code for every tree: a
warm-up start and stage, then ``--reps`` rounds of a start (and its close) and an empty
2-task barrier stage, each on an idle application. Rounds of the trees alternate
(A, B, C, A, B, C): a change of the machine's load hits every tree alike.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from benchmarks.machine import machine_facts
from benchmarks.measure import fmt, median, table

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROUNDS = 2  # applications per tree, alternating

SCRIPT = r"""
import contextlib, io, json, sys, time, warnings, logging
warnings.filterwarnings("ignore")
logging.getLogger("distributed").setLevel(logging.ERROR)
conf, master, reps = json.loads(sys.argv[1]), sys.argv[2], int(sys.argv[3])
from pyspark.sql import SparkSession
b = SparkSession.builder.master(master).appName("scale-trees")
for k, v in conf.items():
    b = b.config(k, v)
spark = b.getOrCreate()
sc = spark.sparkContext
sc.setLogLevel("ERROR")
deadline = time.monotonic() + 120
while sc._jsc.sc().getExecutorIds().size() < 2:  # both executors registered (bounded)
    if time.monotonic() > deadline:
        raise SystemExit("executors did not register within 120 s")
    time.sleep(0.1)
import spark_dask

def empty(_it):
    yield 1

def idle():
    tracker = sc._jsc.sc().statusTracker()
    deadline = time.monotonic() + 120
    while sc.statusTracker().getActiveJobsIds() or sum(e.numRunningTasks() for e in tracker.getExecutorInfos()):
        if time.monotonic() > deadline:
            raise SystemExit("Spark still runs tasks after 120 s")
        time.sleep(0.01)

def stage():
    idle()
    t0 = time.perf_counter()
    sc.parallelize(range(2), 2).barrier().mapPartitions(empty).collect()
    return time.perf_counter() - t0

def steps_of(c, t0):
    # where the start's time went (trees that keep the gang's marks: issue 70's on): the
    # scheduler's start, the gang's submission, Spark's launch of its tasks, the tasks'
    # work up to their nannies forked, the workers' start and registration, what is after
    try:
        p = c._parts
        g = [g for pool in p.pools.values() for g in pool.gangs][0]
        return lambda: _steps(p, g, t0)
    except Exception:
        return lambda: None

def _steps(p, g, t0):
    try:
        off = time.time() - time.monotonic()
        marks = [r["t"] for r in g.rows]
        first = min(t["start"] for t in marks) - off
        spawned = max(t["spawned"] for t in marks) - off
        return {"scheduler": p.timings["scheduler"], "submit": g.submitted_at - t0, "launch": first - g.submitted_at,
                "tasks": spawned - first, "workers": g.running_at - spawned, "after": t0 + p.timings["start"] - g.running_at}
    except Exception:
        return None

def ours():
    idle()
    with contextlib.redirect_stdout(io.StringIO()):
        t0 = time.perf_counter()
        m0 = time.monotonic()
        c = spark_dask.SparkCluster(spark, n_workers=2, progress=False)
        start = time.perf_counter() - t0
        steps = steps_of(c, m0)
        t1 = time.perf_counter()
        c.close()
    return start, time.perf_counter() - t1, steps()

where = sc.parallelize([0], 1).map(lambda _: __import__("spark_dask").__file__).collect()[0]
ours(); stage()  # the warm-up
out = {"driver_imports": spark_dask.__file__, "executor_imports": where, "start": [], "close": [], "stage": [],
       "steps": []}
for _ in range(reps):
    s, c, steps = ours()
    out["start"].append(s); out["close"].append(c); out["stage"].append(stage())
    if steps:
        out["steps"].append(steps)
spark.stop()
print("RESULT " + json.dumps(out), flush=True)
"""


def extract(commit: str, into: str) -> str:
    """The tree of ``commit`` under ``into`` (``git archive | tar -x``); ``.``: the working tree."""
    if commit == ".":
        return REPO
    path = os.path.join(into, commit)
    os.makedirs(path)
    archive = subprocess.Popen(["git", "-C", REPO, "archive", commit], stdout=subprocess.PIPE)
    subprocess.run(["tar", "-x", "-C", path], stdin=archive.stdout, check=True, timeout=120)
    if archive.wait(60):
        raise SystemExit(f"git archive {commit} failed")
    return path


def run_tree(h, tree: str, reps: int) -> dict:
    """One application of :data:`SCRIPT` on host ``driver``, importing ``tree`` first."""
    from tests.support import hosts as hostlib

    conf = hostlib.Driver(h, {"spark.executorEnv.PYTHONPATH": tree}).conf
    argv = [sys.executable, "-c", SCRIPT, json.dumps(conf), h.master_url, str(reps)]
    done = h.run(hostlib.DRIVER, argv, timeout=600, cwd=tree, env={"PYTHONPATH": tree})
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if line is None:
        raise SystemExit(f"no result from {tree}: {done.stdout[-2000:]} {done.stderr[-3000:]}")
    return json.loads(line[len("RESULT ") :])


def main(args) -> dict:
    from tests.support import hosts as hostlib

    why = hostlib.unavailable()
    if why:
        raise SystemExit(f"--trees: {why}")
    commits = [c.strip() for c in args.trees.split(",") if c.strip()]
    tmp = tempfile.mkdtemp(prefix="scale-trees-")
    R: dict = {"machine": machine_facts(load_before=list(os.getloadavg())), "reps": args.reps, "rounds": ROUNDS,
               "trees": {c: {"start": [], "close": [], "stage": [], "imports": [], "steps": []} for c in commits}}  # fmt: skip
    t_all = time.perf_counter()
    try:
        trees = {c: extract(c, tmp) for c in commits}
        h = hostlib.Hosts.up(workers=2, cores=4)
        try:
            for i in range(ROUNDS):
                for c in commits:
                    r = run_tree(h, trees[c], args.reps)
                    T = R["trees"][c]
                    for k in ("start", "close", "stage"):
                        T[k] += r[k]
                    T["imports"].append([r["driver_imports"], r["executor_imports"]])
                    T["steps"] += r.get("steps", [])
                    print(f"trees: round {i + 1}, {c}: start {r['start']}, stage {r['stage']} "
                          f"({time.perf_counter() - t_all:.0f} s, load {os.getloadavg()[0]:.1f})", file=sys.stderr)  # fmt: skip
        finally:
            h.down()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    R["machine"]["load_after"] = list(os.getloadavg())
    for T in R["trees"].values():
        T["ratio"] = median(T["start"]) / median(T["stage"])
        T["ratio_runs"] = [s / f for s, f in zip(T["start"], T["stage"])]
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(R, f, indent=1)
    print(render(R))
    return R


def render(R: dict) -> str:
    m = R["machine"]
    rows = []
    for c, T in R["trees"].items():
        rs = T["ratio_runs"]
        rows.append([c, str(len(T["start"])), fmt(median(T["start"])), fmt(median(T["stage"])),
                     f"{T['ratio']:.2f} ({min(rs):.2f}-{max(rs):.2f})", fmt(median(T["close"]))])  # fmt: skip
    head = (f"warm start-up of 2 workers on hosts:2x4, each tree's code, {R['rounds']} applications per tree "
            f"alternating, {R['reps']} starts each; medians (per-start ratio range); {m['cpus']} CPUs, load "
            f"{m['load_before'][0]:.1f} before, {m['load_after'][0]:.1f} after")  # fmt: skip
    lines = [head, ""] + table(["tree", "starts", "start-up s", "empty 2-task stage s", "÷ stage", "teardown s"], rows)
    steps = [(c, T["steps"]) for c, T in R["trees"].items() if T.get("steps")]
    if steps:
        keys = list(steps[0][1][0])
        lines += ["", "where a start's time goes, seconds (medians): the scheduler's start; the gang submitted "
                  "(from the start's call); Spark's launch (submitted -> its first task runs); the tasks (-> the "
                  "last one's nannies forked); the workers (-> the last one registered); after", ""]  # fmt: skip
        lines += table(["tree", *keys], [[c, *(fmt(median([x[k] for x in S]), 3) for k in keys)] for c, S in steps])
    lines += ["", "imported: " + "; ".join(f"{c}: {sorted(set(x for i in T['imports'] for x in i))}"
                                           for c, T in R["trees"].items())]  # fmt: skip
    return "\n".join(lines)
