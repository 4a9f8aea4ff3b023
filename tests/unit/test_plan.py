"""Pure decisions, without Spark: gang size, GPU assignment, sizing, command lines."""

from __future__ import annotations

import pytest

from spark_dask import options
from spark_dask import plan as plan_module
from spark_dask.capacity import (
    GangPlan,
    max_workers,
    tasks_for,
)
from spark_dask.executor.command import option_flags, version_problem, worker_command
from spark_dask.executor.placement import (
    assign_shared,
    assign_workers,
    gang_shortfall,
    gpu_env,
    physical_gpu,
    worker_name,
)
from spark_dask.executor.sizing import memory_problem, worker_memory, worker_threads
from spark_dask.options.groups import check_group
from spark_dask.plan import PlanError, check_memory_limit, gang_steps, plan_gang, workers_for
from spark_dask.spark.session import _memory
from tests.support.task_specs import small_facts

GiB = 2**30

pytestmark = pytest.mark.core


facts = small_facts


# ----------------------------------------------------------------------------- plan_gang
def test_cpu_default_is_one_worker_per_executor():
    p = plan_gang(facts())
    assert (p.kind, p.pinned, p.n_workers, p.n_tasks, p.uses_profile) == ("cpu", False, 2, 2, False)


def test_cpu_one_task_per_executor_keeps_cores_for_spark():
    f = facts(executors=3, executor_cores=8, slots=24, task_profiles=True)
    p = plan_gang(f)
    assert p.n_tasks == 3 and p.task_cpus == 5 and p.task_gpus is None
    # without task profiles the default profile is used
    assert not plan_gang(f, task_profile=False).uses_profile


def test_cpu_more_workers_than_executors_use_default_profile():
    p = plan_gang(facts(executors=2, executor_cores=4, slots=8, task_profiles=True), n_workers=6)
    assert p.n_tasks == 6 and not p.uses_profile


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2", True])
def test_bad_n_workers(bad):
    with pytest.raises(PlanError, match="n_workers"):
        plan_gang(facts(), n_workers=bad)


def test_too_many_workers_fails_now_with_the_numbers():
    with pytest.raises(PlanError) as e:
        plan_gang(facts(), n_workers=3)
    msg = str(e.value)
    assert "3 Spark task slots" in msg and "has 2" in msg and "n_workers<=2" in msg


def test_dynamic_allocation_runs_plain_jobs_one_per_worker():
    # no executors yet (minExecutors=0): one worker by default, Spark adds the executor
    f = facts(executors=0, slots=0, dynamic_allocation=True, max_executors=2)
    p = plan_gang(f)
    assert (p.n_workers, p.barrier, p.uses_profile) == (1, False, False)
    assert [(g.n_tasks, g.barrier) for g in gang_steps(p, 2)] == [(1, False), (1, False)]
    assert plan_gang(f, n_workers=2).n_workers == 2
    with pytest.raises(PlanError, match=r"at most 2 \(spark.dynamicAllocation.maxExecutors=2"):
        plan_gang(f, n_workers=3)
    # unbounded (maxExecutors unset): any number, Spark asks for the executors
    assert plan_gang(facts(executors=1, dynamic_allocation=True), n_workers=50).n_workers == 50
    # task profiles are never used under dynamic allocation
    assert not plan_gang(facts(executor_cores=8, slots=16, task_profiles=True, dynamic_allocation=True)).uses_profile


def test_dynamic_allocation_gpus_one_worker_per_gpu_of_each_executor():
    f = facts(executors=1, executor_cores=4, slots=2, executor_gpus=2, task_gpus=1, dynamic_allocation=True,
              max_executors=3)  # fmt: skip
    p = plan_gang(f)
    assert (p.n_workers, p.pinned, p.barrier) == (2, True, False)
    assert max_workers(f, p) == 6


def test_no_executors():
    with pytest.raises(PlanError, match="no Spark executors"):
        plan_gang(facts(executors=0))


def test_bad_worker_kind():
    with pytest.raises(PlanError, match="worker must be one of"):
        plan_gang(facts(), worker="gpu")


def test_cuda_without_gpus():
    with pytest.raises(PlanError, match="executors have no GPUs"):
        plan_gang(facts(), worker="cuda")


def test_gpu_default_is_one_worker_per_gpu():
    f = facts(executors=2, executor_cores=8, executor_gpus=4, task_gpus=1, slots=8)
    p = plan_gang(f)
    assert (p.kind, p.pinned, p.n_workers, p.n_tasks, p.uses_profile) == ("cuda", True, 8, 8, False)
    p = plan_gang(f, worker="cpu")
    assert (p.kind, p.pinned) == ("cpu", True)


def test_exclusive_fractional_gpu_amount_asks_for_whole_gpus_with_a_profile():
    f = facts(executors=1, executor_cores=2, executor_gpus=2, task_gpus=0.5, slots=2, task_profiles=True)
    p = plan_gang(f, gpu_mode="exclusive")
    assert p.n_tasks == 2 and p.task_gpus == 1.0 and p.task_cpus == 1 and p.gpu_mode == "exclusive"


def test_exclusive_fractional_gpu_amount_without_profiles_relies_on_the_tasks():
    f = facts(executors=1, executor_cores=2, executor_gpus=2, task_gpus=0.5, slots=2)
    p = plan_gang(f, gpu_mode="exclusive")
    assert p.n_tasks == 2 and not p.uses_profile and p.pinned


def test_fractional_gpu_amount_shares_gpus_with_spark_by_default():
    # Spark RAPIDS style: 4 cores, 2 GPUs, a quarter GPU per Spark task
    f = facts(executors=1, executor_cores=4, executor_gpus=2, task_gpus=0.25, slots=4, task_profiles=True)
    p = plan_gang(f)
    assert (p.gpu_mode, p.kind, p.pinned, p.n_workers, p.n_tasks) == ("shared", "cuda", True, 2, 2)
    assert not p.uses_profile  # each gang task is an ordinary Spark GPU task (a quarter GPU)
    assert plan_gang(f, task_profile=False).gpu_mode == "shared"  # needs no profile at all
    assert not p.notes


def test_rapids_plugin_with_whole_gpu_tasks_shares_through_a_cpu_only_profile():
    # the Databricks default: one GPU per Spark task, and the RAPIDS SQL plugin on
    f = facts(executors=2, executor_cores=8, executor_gpus=1, task_gpus=1, slots=2,
              task_profiles=True, rapids_plugin=True)  # fmt: skip
    p = plan_gang(f)
    assert p.gpu_mode == "shared" and p.uses_profile
    assert (p.task_cpus, p.task_gpus) == (1, None)  # CPUs only: the GPUs stay with Spark
    assert p.n_workers == 2
    # without task profiles the gang can only hold whole GPUs: said, not silent
    p = plan_gang(f, task_profile=False)
    assert p.gpu_mode == "exclusive" and not p.uses_profile
    assert len(p.notes) == 1 and "fraction" in p.notes[0] and "wait" in p.notes[0]
    with pytest.raises(PlanError, match="gpu_mode='shared' cannot work"):
        plan_gang(f, task_profile=False, gpu_mode="shared")


def test_whole_gpu_tasks_without_rapids_stay_exclusive():
    f = facts(executors=2, executor_cores=8, executor_gpus=4, task_gpus=1, slots=8, task_profiles=True)
    assert plan_gang(f).gpu_mode == "exclusive"
    assert plan_gang(f, gpu_mode="shared").gpu_mode == "shared"


def test_shared_mode_is_one_worker_per_gpu_at_most():
    f = facts(executors=1, executor_cores=8, executor_gpus=2, task_gpus=0.25, slots=8)
    assert plan_gang(f, n_workers=1).n_workers == 1
    with pytest.raises(PlanError, match="one Dask worker per GPU"):
        plan_gang(f, n_workers=3)
    with pytest.raises(PlanError, match="gpu_mode must be one of"):
        plan_gang(f, gpu_mode="half")


def test_gpu_mode_is_checked_where_the_options_are_resolved():
    from spark_dask import options

    given = {o.name: None for o in options.keyword_options() if o.config}
    with pytest.raises(PlanError, match="gpu_mode must be one of"):
        options.resolve(**{**given, "gpu_mode": "half"})
    assert options.resolve(**{**given, "gpu_mode": "shared"}).gpu_mode == "shared"


def test_assign_shared_splits_each_executors_gpus_by_partition():
    gang = [{"partition": p, "executor": e} for p, e in [(2, "a:1"), (0, "a:1"), (1, "b:1"), (3, "b:1")]]
    gpus = {"a:1": ["5", "7"], "b:1": ["0"]}
    a = assign_shared(gang, gpus)
    assert a == {
        0: [{"name": "spark-0-gpu5", "gpu": "5"}],
        2: [{"name": "spark-2-gpu7", "gpu": "7"}],
        1: [{"name": "spark-1-gpu0", "gpu": "0"}],
        3: [],  # executor b has one GPU: its second task starts nothing
    }
    msg = gang_shortfall(a, 4, pinned=True, shared=True)
    assert "3 Dask workers, not the 4" in msg and "task slots were busy" in msg and "[3]" in msg


def test_memory_problem_reads_like_a_person_writes():
    msg = memory_problem(10**12, 24 * GiB)
    assert "memory_limit=931 GiB" in msg and "24 GiB of memory" in msg
    assert memory_problem(GiB, 24 * GiB) is None


def test_tasks_with_several_gpus():
    f = facts(executors=2, executor_cores=8, executor_gpus=4, task_gpus=2, slots=4)
    p = plan_gang(f)
    assert p.n_workers == 8 and p.n_tasks == 4 and p.workers_per_task == 2
    with pytest.raises(PlanError, match="multiple of 2"):
        plan_gang(f, n_workers=3)


def test_gpus_on_executors_but_not_on_tasks():
    f = facts(executor_gpus=2, task_gpus=0)
    with pytest.raises(PlanError, match="spark.task.resource.gpu.amount=1"):
        plan_gang(f, worker="cuda")
    p = plan_gang(f)  # auto: plain workers, not pinned
    assert (p.kind, p.pinned) == ("cpu", False)


# ----------------------------------------------------------------------------- task side
def test_physical_gpu_mapping():
    assert physical_gpu("0", None) == "0"
    assert physical_gpu("1", "4,5,6") == "5"
    assert physical_gpu("7", "4,5") == "7"  # out of range: left as Spark gave it
    assert physical_gpu("GPU-uuid", "0,1") == "GPU-uuid"


def test_worker_names():
    assert worker_name(3, None) == "spark-3"
    assert worker_name(3, "1") == "spark-3-gpu1"
    assert worker_name(3, "1", attempt=2) == "spark-3-gpu1-a2"  # Spark ran the task again


def test_later_gangs_continue_the_names():
    a = assign_workers(gathered((0, "a", []), (1, "b", [])), pinned=False, base=5)
    assert [w["name"] for ws in a.values() for w in ws] == ["spark-5", "spark-6"]
    gang = [{"partition": 0, "executor": "e1"}]
    assert assign_shared(gang, {"e1": ["3", "4"]}, base=2) == {0: [{"name": "spark-2-gpu3", "gpu": "3"}]}


# ------------------------------------------------------------------------------ scaling


def test_gang_steps():
    shape = plan_gang(facts(executors=2, executor_cores=4, slots=8, task_profiles=True), n_workers=1)
    (step,) = gang_steps(shape, 1)
    assert (step.n_tasks, step.n_workers, step.task_cpus, step.barrier) == (1, 1, 3, True)
    assert gang_steps(shape, 0) == []
    two_gpus = GangPlan("cuda", True, 4, 2, 2, gpu_mode="exclusive")
    assert [(g.n_tasks, g.n_workers) for g in gang_steps(two_gpus, 3)] == [(2, 4)]
    assert tasks_for(3, 2) == 2


def test_workers_for_cores_and_memory():
    assert workers_for(1, cores=8, threads_per_worker=4) == 2
    assert workers_for(3, cores=8, threads_per_worker=4) == 3
    assert workers_for(0, memory=5 * GiB, memory_per_worker=2 * GiB) == 3
    with pytest.raises(PlanError, match="threads of a worker"):
        workers_for(0, cores=4)


def test_doctests_of_the_plan_module():
    import doctest

    assert doctest.testmod(plan_module).failed == 0


def gathered(*tasks):
    return [{"partition": p, "host": h, "gpus": g} for p, h, g in tasks]


def test_assign_one_worker_per_physical_gpu_when_tasks_share_gpus():
    # fractional amount: tasks 0 and 1 both got GPU 0 on host a; task 2 got GPU 1
    g = gathered((1, "a", ["0"]), (0, "a", ["0"]), (2, "a", ["1"]), (3, "b", ["0"]))
    a = assign_workers(g, pinned=True)
    assert a == {
        0: [{"name": "spark-0-gpu0", "gpu": "0"}],
        1: [],
        2: [{"name": "spark-2-gpu1", "gpu": "1"}],
        3: [{"name": "spark-3-gpu0", "gpu": "0"}],  # same id, other host: its own GPU
    }
    assert gang_shortfall(a, 3, pinned=True) is None
    msg = gang_shortfall(a, 4, pinned=True)
    assert "3 Dask workers, not the 4" in msg and "[1]" in msg


def test_assign_unpinned_and_multi_gpu():
    assert assign_workers(gathered((0, "a", []), (1, "a", [])), pinned=False) == {
        0: [{"name": "spark-0", "gpu": None}],
        1: [{"name": "spark-1", "gpu": None}],
    }
    a = assign_workers(gathered((0, "a", ["2", "3"])), pinned=True)
    assert [w["gpu"] for w in a[0]] == ["2", "3"]


def test_threads():
    assert worker_threads(None, task_cpus=1, executor_cores=8, tasks_on_executor=1, workers_in_task=1) == 8
    assert worker_threads(None, task_cpus=2, executor_cores=8, tasks_on_executor=2, workers_in_task=1) == 2
    assert worker_threads(None, task_cpus=1, executor_cores=8, tasks_on_executor=1, workers_in_task=4) == 2
    assert worker_threads(None, task_cpus=1, executor_cores=2, tasks_on_executor=1, workers_in_task=4) == 1
    assert worker_threads(3, task_cpus=1, executor_cores=8, tasks_on_executor=1, workers_in_task=1) == 3


def test_gpu_workers_get_one_thread_unless_told_otherwise():
    # dask-cuda's own default (--nthreads 1), not the task's CPUs
    assert (
        worker_threads(None, task_cpus=4, executor_cores=16, tasks_on_executor=1, workers_in_task=1, kind="cuda") == 1
    )
    assert (
        worker_threads(None, task_cpus=4, executor_cores=16, tasks_on_executor=4, workers_in_task=1, kind="cuda") == 1
    )
    assert worker_threads(6, task_cpus=4, executor_cores=16, tasks_on_executor=1, workers_in_task=1, kind="cuda") == 6
    # plain workers pinned to GPUs (worker="cpu") keep the CPU rule
    assert worker_threads(None, task_cpus=4, executor_cores=16, tasks_on_executor=4, workers_in_task=1, kind="cpu") == 4


def test_gpu_env_numbers_gpus_in_pci_order():
    assert gpu_env("3") == {"CUDA_VISIBLE_DEVICES": "3", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    assert gpu_env("GPU-ab12", {"X": "1"})["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert gpu_env("3", {"CUDA_DEVICE_ORDER": "FASTEST_FIRST"}) == {"CUDA_VISIBLE_DEVICES": "3"}  # the user's wins
    assert gpu_env(None) == {}  # unpinned workers are left alone


@pytest.mark.parametrize(
    "driver,executor,level",
    [
        ("2026.8.0", "2026.8.0", None),
        ("2026.8.0", None, None),  # not installed: reported as a missing package
        ("2026.8.0", "2026.8.1", "warning"),  # patch level only
        ("2026.8.1", "2026.8.0rc1", "warning"),
        ("2026.8.0", "2026.7.1", "error"),  # another monthly release
        ("2026.8.0", "2025.12.0", "error"),  # another year
        ("2026.8.0", "weird", "error"),
    ],
)
def test_version_mismatch_levels(driver, executor, level):
    got = version_problem(driver, executor, "executor 3 (host h, partition 0)")
    if level is None:
        assert got is None
        return
    assert got[0] == level
    msg = got[1]
    assert msg.startswith("executor 3 (host h, partition 0) has distributed " + executor)
    assert driver in msg and f"%pip install distributed=={driver}" in msg


def test_memory():
    # 64 GiB host, two 16 GiB executors, four workers: 32 GiB left / 4
    assert worker_memory("auto", 64 * GiB, 16 * GiB, 2, 4) == 8 * GiB
    assert worker_memory(None, 64 * GiB, 16 * GiB, 1, 1) == 48 * GiB
    assert worker_memory(5 * GiB, 64 * GiB, 16 * GiB, 1, 1) == 5 * GiB
    assert worker_memory("auto", 8 * GiB, 16 * GiB, 1, 1) == 256 * 2**20  # floor


def test_auto_memory_leaves_every_executor_of_the_host_in_start_and_in_info(monkeypatch):
    """Issue 68 point 8: on local-cluster[2,...] with one worker, ``spark-dask info`` said
    the host less both executors (as documented: the executor JVMs placed on it) and the
    start gave the host less one, the executor of the gang's only task. Now the start
    counts every executor of the host too (the driver's list; the gang's where it has none)."""
    from types import SimpleNamespace

    from spark_dask.capacity import ClusterFacts
    from spark_dask.commands import info
    from spark_dask.executor import gang_task
    from spark_dask.gangs.maker import executor_counts
    from tests.support.task_specs import make_spec

    for module in (info, gang_task):
        monkeypatch.setattr(module, "host_memory", lambda: 64 * GiB)
    facts = ClusterFacts(executors=2, executor_cores=1, executor_memory=16 * GiB, master="local-cluster[2,1,16384]",
                         executor_hosts=("10.0.0.1", "10.0.0.1"))  # fmt: skip
    predicted, _ = info._worker_memory(facts, SimpleNamespace(n_workers=1), "auto")
    me = {"partition": 0, "executor": "10.0.0.1:40001", "host": "10.0.0.1", "cpus": 1}
    mine = [{"name": "w0", "gpu": None}]
    spec = make_spec(executor_memory=16 * GiB, n_workers=1, executors_by_host=executor_counts(facts.executor_hosts))
    _, started = gang_task._size(spec, me, [me], {0: mine}, mine, "here")
    assert predicted == started == 32 * GiB
    # where the driver cannot tell (Spark Connect): the executors of the gang's tasks
    _, unknown = gang_task._size(make_spec(executor_memory=16 * GiB, n_workers=1), me, [me], {0: mine}, mine, "here")
    assert unknown == 48 * GiB


def test_memory_limit_is_checked_by_one_rule_for_the_cluster_and_each_worker_group():
    """``plan.check_memory_limit``: the option's rule and each group's, their texts as before."""
    assert (check_memory_limit("auto"), check_memory_limit("2GiB"), check_memory_limit(3e9)) == ("auto", 2 * GiB, 3e9)
    given = {o.name: None for o in options.keyword_options() if o.config}

    def resolve(**kw):
        return options.resolve(**{**given, **kw})

    assert check_memory_limit(None, "cpu") == "auto" and resolve(memory_limit="1GiB").memory_limit == GiB
    bad = [
        (lambda: resolve(memory_limit="lots"), "memory_limit must be 'auto', a number of bytes or a size like '8GiB', got 'lots'"),
        (lambda: check_memory_limit(None), "memory_limit must be 'auto', a number of bytes or a size like '8GiB', got None"),
        (lambda: resolve(memory_limit="-1GB"), "memory_limit must be positive, got '-1GB'"),
        (lambda: check_group("cpu", {"worker": "cpu", "memory_limit": "lots"}),
         "worker group 'cpu': memory_limit must be 'auto', bytes or a size like '8GiB', got 'lots'"),
        (lambda: check_group("cpu", {"worker": "cpu", "memory_limit": 0}), "worker group 'cpu': memory_limit must be positive, got 0"),
        (lambda: resolve(memory_limit="512"), "memory_limit='512' was read as 512 B per Dask worker"),
        # a group's limit too small for a Dask worker is refused as the cluster's is (it was taken as 512 bytes)
        (lambda: check_group("cpu", {"worker": "cpu", "memory_limit": "512"}),
         "worker group 'cpu': memory_limit='512' was read as 512 B per Dask worker"),
    ]  # fmt: skip
    for call, said in bad:
        with pytest.raises(PlanError) as e:
            call()
        assert str(e.value).startswith("spark-dask: " + said), str(e.value)


def test_option_flags():
    assert option_flags({"rmm_pool_size": "10GB", "nanny": False, "dashboard": True}) == [
        "--rmm-pool-size", "10GB", "--no-nanny", "--dashboard",
    ]  # fmt: skip
    assert option_flags({"resources": {"GPU": 1, "MEM": 2}}) == ["--resources", "GPU=1 MEM=2"]
    assert option_flags({"preload": ["a", "b"], "x": None}) == ["--preload", "a", "--preload", "b"]
    assert option_flags({"disable_cudf_spill": True}) == ["--disable-cudf-spill"]


FIELDS = {
    "python": "/venv/bin/python",
    "scheduler_address": "tls://10.0.0.1:4000",
    "name": "spark-0",
    "nthreads": 4,
    "memory_limit": 1000,
    "local_directory": "/tmp/w",
    "death_timeout": 60,
    "preload": "/tmp/p.py",
    "tls_ca_file": "/tmp/ca.pem",
    "tls_cert": "/tmp/cert.pem",
    "tls_key": "/tmp/key.pem",
}


def test_default_cpu_command_uses_the_tasks_python_and_a_nanny():
    cmd = worker_command(FIELDS, "cpu", options={"resources": {"X": 1}})
    assert cmd[:4] == ["/venv/bin/python", "-m", "distributed.cli.dask_worker", "tls://10.0.0.1:4000"]
    joined = " ".join(cmd)
    for part in (
        "--name spark-0",
        "--nthreads 4",
        "--memory-limit 1000",
        "--nanny",
        "--death-timeout 60",
        "--preload /tmp/p.py",
        "--preload-nanny /tmp/p.py",
        "--tls-key /tmp/key.pem",
    ):
        assert part in joined
    assert cmd[-2:] == ["--resources", "X=1"]


def test_worker_dashboard_is_off_unless_asked_for():
    assert worker_command(FIELDS, "cpu").count("--no-dashboard") == 1
    assert worker_command(FIELDS, "cuda").count("--no-dashboard") == 1
    for opts in ({"dashboard": True}, {"dashboard_address": ":8788"}, {"no_dashboard": True}):
        cmd = worker_command(FIELDS, "cpu", options=opts)
        assert cmd.count("--no-dashboard") == (1 if "no_dashboard" in opts else 0)
    assert "--no-dashboard" not in worker_command(FIELDS, "cpu", template="{python} -m w {scheduler_address}")


def test_cpu_command_without_nanny_has_no_nanny_flags():
    for opts in ({"no_nanny": True}, {"nanny": False}):
        cmd = worker_command(FIELDS, "cpu", options=opts)
        assert cmd.count("--no-nanny") == 1
        assert "--nanny" not in cmd and "--preload-nanny" not in cmd
    assert worker_command(FIELDS, "cpu", options={"nanny": True}).count("--nanny") == 1


def test_cuda_command():
    cmd = worker_command({**FIELDS, "tls_ca_file": ""}, "cuda")
    assert cmd[:5] == ["/venv/bin/python", "-m", "dask", "cuda", "worker"]
    assert "--tls-ca-file" not in cmd and "--preload-nanny" not in cmd


def test_command_template():
    cmd = worker_command(
        FIELDS, "cpu", template="{python} -m my.worker {scheduler_address} --id {name}", options={"verbose": True}
    )
    assert cmd == ["/venv/bin/python", "-m", "my.worker", "tls://10.0.0.1:4000", "--id", "spark-0", "--verbose"]
    cmd = worker_command(FIELDS, "cpu", template=["/opt/w", "{scheduler_address}"])
    assert cmd == ["/opt/w", "tls://10.0.0.1:4000"]


@pytest.mark.parametrize(
    "text,expected",
    [("1g", GiB), ("1024m", GiB), ("512", 512 * 2**20), ("2gb", 2 * GiB), ("100b", 100), ("1.5g", int(1.5 * GiB))],
)
def test_spark_memory_strings(text, expected):
    assert _memory(text) == expected


def test_spark_memory_string_error():
    with pytest.raises(PlanError, match="cannot read"):
        _memory("lots")


def test_session_closed_errors():
    from spark_dask.spark.launcher import session_closed

    assert session_closed(RuntimeError("[INVALID_HANDLE.SESSION_CLOSED] The handle x is invalid"))
    assert session_closed(RuntimeError("Job 3 cancelled because SparkContext was shut down"))
    assert not session_closed(RuntimeError("Could not recover from a failed barrier ResultStage"))
    assert not session_closed(None)


def test_spark_decoration_is_stripped_from_our_task_errors():
    from spark_dask.spark.launcher import summarize_spark_error

    # how Spark 4 wraps an exception raised in a barrier task (PythonException)
    text = (
        "An error occurred while calling o91.collectAndServe.\n: org.apache.spark.SparkException: "
        "Job aborted due to stage failure: Could not recover from a failed barrier ResultStage.\n"
        "org.apache.spark.api.python.PythonException: [PYTHON_EXCEPTION] An exception was thrown "
        'from the Python worker: Traceback (most recent call last):\n  File "task.py", line 1\n'
        "spark_dask.executor.gang_task.WorkerStartError: spark-dask: on executor 0 (host h, partition 0): "
        "memory_limit=64 TiB per worker exceeds the 24 GiB of memory of the host; use 'auto'\n"
        " SQLSTATE: 38000\n\tat org.apache.spark.api.python.BasePythonRunner.handlePythonException"
    )
    assert summarize_spark_error(RuntimeError(text)) == (
        "spark-dask: on executor 0 (host h, partition 0): memory_limit=64 TiB per worker exceeds "
        "the 24 GiB of memory of the host; use 'auto'"
    )


def test_the_default_command_loads_the_preload_by_module_name_a_template_gets_the_file():
    fields = {**FIELDS, "preload_module": "spark_dask_preload"}
    for kind in ("cpu", "cuda"):
        cmd = worker_command(fields, kind)
        assert cmd[cmd.index("--preload") + 1] == "spark_dask_preload"
    cmd = worker_command(fields, "cpu")
    assert cmd[cmd.index("--preload-nanny") + 1] == "spark_dask_preload"
    cmd = worker_command(fields, "cpu", template="{python} -m w {scheduler_address} --preload {preload}")
    assert cmd[-1] == "/tmp/p.py"
