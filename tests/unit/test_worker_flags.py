"""worker_options checked against the worker program on the driver (no Spark)."""

from __future__ import annotations

import importlib.util
import types

import pytest

from spark_dask.executor.command import option_flags
from spark_dask.plan import PlanError
from spark_dask.worker_flags import (
    DASK_CUDA_OPTIONS,
    TaskWarnings,
    check_worker_options,
    program_options,
)

NO_DASK_CUDA = importlib.util.find_spec("dask_cuda") is None


def test_cpu_options_come_from_distributeds_own_command():
    table, program = program_options("cpu")
    assert "distributed.cli.dask_worker" in program and "distributed 20" in program
    assert table["nanny"].switch and table["nanny"].off == "no_nanny"
    assert table["preload"].multiple and table["nthreads"].kind == "int"
    assert "rmm_pool_size" not in table


@pytest.mark.skipif(not NO_DASK_CUDA, reason="dask-cuda is installed: its command is read instead")
def test_cuda_options_come_from_the_recorded_table_without_dask_cuda():
    table, program = program_options("cuda")
    assert table == DASK_CUDA_OPTIONS
    assert "dask cuda worker" in program and "26.08" in program
    for absent in ("nanny", "nworkers", "preload_nanny", "lifetime"):
        assert absent not in table
    assert table["enable_cudf_spill"].off == "disable_cudf_spill"
    assert table["multiprocessing_method"].choices == ("spawn", "fork", "forkserver")


@pytest.mark.skipif(NO_DASK_CUDA, reason="needs dask-cuda")
def test_recorded_table_matches_the_installed_dask_cuda():  # pragma: no cover - GPU machines
    table, _ = program_options("cuda")
    current = {k for k, o in DASK_CUDA_OPTIONS.items() if o.until is None}
    assert current <= set(table), current - set(table)


@pytest.mark.parametrize(
    "options,kind,expected",
    [
        ({"rmm-pool-size": "10GB", "enable_cudf_spill": False}, "cuda",
         {"rmm_pool_size": "10GB", "disable_cudf_spill": True}),
        ({"dashboard": False, "preload": ("a.py", "b.py")}, "cuda", {"no_dashboard": True, "preload": ["a.py", "b.py"]}),
        ({"no_dashboard": False, "--pid-file": "/tmp/p"}, "cpu", {"dashboard": True, "pid_file": "/tmp/p"}),
        ({"nanny": False, "resources": {"GPU": 1}}, "cpu", {"no_nanny": True, "resources": {"GPU": 1}}),
        ({"nanny": True, "lifetime": None}, "cpu", {}),  # the launcher's default; None is dropped
        ({"multiprocessing_method": "forkserver", "device_memory_limit": 0.7}, "cuda",
         {"multiprocessing_method": "forkserver", "device_memory_limit": 0.7}),
        ({"preload_nanny": "x.py", "worker_class": "my.Worker"}, "cpu", {"preload_nanny": "x.py", "worker_class": "my.Worker"}),
    ],
)  # fmt: skip
def test_valid_options_are_normalized(options, kind, expected):
    assert check_worker_options(options, kind) == expected


def test_switches_become_flags_the_program_has():
    flags = option_flags(check_worker_options({"enable_cudf_spill": False, "rmm_async": True}, "cuda"))
    assert flags == ["--disable-cudf-spill", "--rmm-async"]  # not --no-enable-cudf-spill


@pytest.mark.parametrize(
    "options,kind,match",
    [
        ({"no_such_option": 1}, "cpu", r"`python -m distributed.cli.dask_worker` \(distributed .*\) has no option --no-such-option"),
        ({"rmm_pol_size": "1GB"}, "cuda", r"`dask cuda worker` .* has no option --rmm-pol-size\. Did you mean 'rmm_pool_size'\?"),
        ({"nanny": False}, "cuda", r"has no option --nanny\. It is an option of distributed's `dask worker`"),
        ({"nworkers": 2}, "cuda", r"has no option --nworkers\. It is an option of distributed's"),
        ({"preload_nanny": "x.py"}, "cuda", r"has no option --preload-nanny\. It is an option of distributed's"),
        ({"rmm_pool_size": "1GB"}, "cpu", r"It is an option of `dask cuda worker`; this cluster starts plain Dask workers"),
        ({"protocol": "ucx"}, "cuda", r"sets --protocol .* itself: .*outside the cluster's TLS"),
        ({"nthreads": 4}, "cuda", r"sets --nthreads .* use threads_per_worker"),
        ({"memory-limit": "4GB"}, "cpu", r"use memory_limit"),
        ({"name": "w"}, "cpu", r"sets --name"),
        ({"tls_key": "/k.pem"}, "cuda", r"per-cluster TLS"),
        ({"nworkers": 2}, "cpu", r"use n_workers"),
        ({"death_timeout": 5}, "cpu", r"spark-dask.death-timeout"),
        ({"local_directory": "/x"}, "cuda", r"SPARK_LOCAL_DIRS"),
        ({"dashboard": "no"}, "cpu", r"--dashboard of .* is a switch"),
        ({"dashboard_address": True}, "cpu", r"takes a value, not True/False"),
        ({"resources": ["GPU=1"]}, "cpu", r"takes one value, not a list"),
        ({"rmm_pool_size": {"a": 1}}, "cuda", r"not a dict"),
        ({"cudf_spill_stats": "x"}, "cuda", r"takes an integer"),
        ({"multiprocessing_method": "thread"}, "cuda", r"takes one of spawn, fork, forkserver"),
        ({"preload": [object()]}, "cpu", r"takes text or numbers"),
    ],
)  # fmt: skip
def test_bad_options_name_the_option_and_the_program(options, kind, match):
    with pytest.raises(PlanError, match=match) as e:
        check_worker_options(options, kind)
    assert repr(next(iter(options))) in str(e.value)


def test_a_custom_command_template_is_not_checked():
    assert check_worker_options({"anything": 1}, "cuda", template="{python} -m my.worker") == {"anything": 1}
    assert check_worker_options(None, "cpu") == {}


def test_task_warnings_are_reported_once_per_message():
    got = []
    plugin = TaskWarnings(got.append)

    def worker(warnings):
        return types.SimpleNamespace(extra={"spark": {"warnings": warnings}})

    scheduler = types.SimpleNamespace(
        workers={"a": worker(["w1", "w2"]), "b": worker(["w1"]), "c": types.SimpleNamespace(extra={})}
    )
    for address in ("a", "b", "c", "gone"):
        plugin.add_worker(scheduler, address)
    assert got == ["w1", "w2"]
