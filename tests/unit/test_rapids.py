"""RAPIDS Accelerator conf checks and the dask-cuda RMM pool sizing (no GPU needed)."""

from __future__ import annotations

import sys
import types

import pytest

from spark_dask import rapids
from spark_dask.executor import rmm

PLUGIN = {"spark.plugins": "com.nvidia.spark.SQLPlugin"}


def reader(values):
    return lambda key: values.get(key)


def test_plugin_off_or_pool_none_never_warns():
    assert rapids.check_rapids(reader({})) == []
    assert rapids.check_rapids(reader({**PLUGIN, rapids.POOL: "NONE"})) == []
    assert rapids.check_rapids(reader({**PLUGIN, rapids.POOLING_ENABLED: "false"})) == []
    assert not rapids.plugin_enabled("com.example.Other")
    assert rapids.plugin_enabled("com.example.Other, com.nvidia.spark.SQLPlugin")


def test_default_pool_starves_dask_and_says_what_to_set():
    (msg,) = rapids.check_rapids(reader(PLUGIN), dask_fraction=0.4)
    assert "--conf spark.rapids.memory.gpu.allocFraction=0.6" in msg
    assert "--conf spark.rapids.memory.gpu.maxAllocFraction=0.6" in msg
    assert "spark.rapids.memory.gpu.pool=NONE" in msg
    assert "minAllocFraction" not in msg  # default 0.25 already fits


def test_small_fractions_pass_and_min_fraction_is_fixed_too():
    ok = {**PLUGIN, rapids.ALLOC_FRACTION: "0.5", rapids.MAX_ALLOC_FRACTION: "0.55"}
    assert rapids.check_rapids(reader(ok), dask_fraction=0.4) == []
    bad = {**PLUGIN, rapids.ALLOC_FRACTION: "0.9", rapids.MIN_ALLOC_FRACTION: "0.8"}
    (msg,) = rapids.check_rapids(reader(bad), dask_fraction=0.5)
    assert "spark.rapids.memory.gpu.minAllocFraction=0.5" in msg
    mem = rapids.read_rapids(reader({**PLUGIN, rapids.RESERVE: "1g", rapids.POOL: "arena"}))
    assert mem.reserve == 2**30 and mem.pool == "ARENA" and mem.pooled


def test_rmm_pool_size_rule():
    gib = 2**30
    assert rmm.rmm_pool_size(80 * gib, gib, 0.95) == int(79 * gib * 0.95) // (256 * 2**20) * (256 * 2**20)
    assert rmm.rmm_pool_size(int(1.5 * gib), gib) is None
    assert rmm.rmm_pool_size(0, gib) is None


@pytest.fixture
def fake_nvml(monkeypatch):
    """A pynvml stand-in: GPU "0" has 30 GiB free of 40 GiB."""
    mod = types.ModuleType("pynvml")
    calls = []

    class Mem:
        free, total = 30 * 2**30, 40 * 2**30

    mod.nvmlInit = lambda: calls.append("init")
    mod.nvmlShutdown = lambda: calls.append("shutdown")
    mod.nvmlDeviceGetHandleByIndex = lambda i: ("idx", i)
    mod.nvmlDeviceGetHandleByUUID = lambda u: ("uuid", u)
    mod.nvmlDeviceGetMemoryInfo = lambda h: Mem
    monkeypatch.setitem(sys.modules, "pynvml", mod)
    return calls


def test_task_side_sizing_with_nvml(fake_nvml):
    spec = {"pool": "auto", "reserve": 2**30, "fraction": 1.0, "spill_fraction": 0.8}
    opts, note, warning = rmm.rmm_option(spec, "0", {"enable_nvlink": True}, has_rmm=True)
    assert opts == {
        "enable_nvlink": True,
        "rmm_pool_size": 29 * 2**30,
        "device_memory_limit": int(29 * 2**30 * 0.8),  # spills inside the pool, not at 80 % of the GPU
    }
    assert "29.00 GiB of 30.0 GiB free on GPU 0" in note and "spills at 23.20 GiB (0.8 x pool)" in note
    assert warning is None
    assert fake_nvml == ["init", "shutdown"]
    assert rmm.gpu_free_memory("GPU-1234") == (30 * 2**30, 40 * 2**30)


def test_auto_pool_beside_sparks_gpu_tasks_leaves_them_their_share(fake_nvml):
    # 30 of 40 GiB free (no Spark pool yet, or pool NONE): Dask takes at most 40 % of the GPU
    spec = {"pool": "auto", "reserve": 2**30, "fraction": 1.0, "spill_fraction": 0.8, "share": 0.4}
    opts, note, _ = rmm.rmm_option(spec, "0", None, has_rmm=True)
    assert opts["rmm_pool_size"] == 16 * 2**30  # 0.4 x 40 GiB, not 29 GiB of the 30 free
    assert "at most 40% of the GPU (shared with Spark)" in note
    opts, _, _ = rmm.rmm_option({**spec, "share": 0.9}, "0", None, has_rmm=True)
    assert opts["rmm_pool_size"] == 29 * 2**30  # what is free is the smaller bound


def test_overrides_and_fallbacks(monkeypatch):
    spec = {"pool": "auto", "reserve": 2**30, "fraction": 0.9, "spill_fraction": 0.8}
    opts, note, warning = rmm.rmm_option(spec, "0", {"rmm-pool-size": "5GB"}, has_rmm=True)
    assert opts == {"rmm-pool-size": "5GB", "device_memory_limit": 4 * 10**9}  # Dask reads GB as 10**9
    assert note.startswith("rmm pool: worker_options") and warning is None
    assert rmm.rmm_option({"pool": None}, "0", None) == ({}, "rmm pool: off", None)
    opts = rmm.rmm_option({"pool": 8 * 2**30, "spill_fraction": 0.5}, "0", None, has_rmm=True)[0]
    assert opts == {"rmm_pool_size": 8 * 2**30, "device_memory_limit": 4 * 2**30}
    monkeypatch.setitem(sys.modules, "pynvml", None)  # not installed: import fails
    opts, note, warning = rmm.rmm_option(spec, "0", None, has_rmm=True)
    assert opts == {} and "dask-cuda default" in note and warning is None


def test_the_users_device_memory_limit_wins_and_null_fraction_keeps_daskcudas_default():
    spec = {"pool": 8 * 2**30, "spill_fraction": 0.8}
    opts = rmm.rmm_option(spec, "0", {"device-memory-limit": "2GB"}, has_rmm=True)[0]
    assert opts == {"device-memory-limit": "2GB", "rmm_pool_size": 8 * 2**30}
    opts = rmm.rmm_option(spec, "0", {"rmm_pool_size": "0.5", "device_memory_limit": 0}, has_rmm=True)[0]
    assert opts == {"rmm_pool_size": "0.5", "device_memory_limit": 0}  # 0: the user turned spilling off
    opts = rmm.rmm_option({"pool": 8 * 2**30, "spill_fraction": None}, "0", None, has_rmm=True)[0]
    assert opts == {"rmm_pool_size": 8 * 2**30}


@pytest.mark.parametrize(
    "pool,limit",
    [
        (10 * 2**30, 8 * 2**30),  # bytes
        ("10GiB", 8 * 2**30),
        ("10GB", 8 * 10**9),  # as dask.utils.parse_bytes reads it
        ("5000M", 4 * 10**9),
        (0.9, 0.72),  # a fraction of the GPU's total memory stays a fraction
        ("0.9", 0.72),
        (1.0, 0.8),
        ("1.0", 0.8),
        (1, None),  # the integer 1 is one byte for dask-cuda, not the whole GPU
        ("lots", None),
        (None, None),
        (True, None),
    ],
)
def test_spill_limit_in_the_pools_own_form(pool, limit):
    assert rmm.spill_limit(pool, 0.8) == limit


@pytest.mark.parametrize("text", ["100", "100 MB", "5.4 kB", "1kiB", "1e6 kB", "MB", "10GiB", "2Gi", "1.5 TB", "7 B"])
def test_sizes_are_read_as_dask_reads_them(text):
    from dask.utils import parse_bytes

    assert rapids.parse_size(text) == parse_bytes(text)


def test_configured_pool_without_rmm_starts_without_a_pool_and_warns():
    spec = {"pool": 8 * 2**30, "spill_fraction": 0.8}
    opts, note, warning = rmm.rmm_option(spec, "0", {"enable_nvlink": True}, has_rmm=False)
    assert opts == {"enable_nvlink": True}  # no pool, no limit derived from one
    assert note == "rmm pool: none, rmm is not installed"
    assert "rmm is not installed" in warning and "rmm-pool-size" in warning and "cudf" in warning
    assert rmm.rmm_option({"pool": "auto"}, "0", None, has_rmm=False)[2] is not None


def test_rmm_options_the_user_gave_need_rmm():
    assert rmm.rmm_problem({"rmm_pool_size": "10GB"}, has_rmm=True) is None
    assert rmm.rmm_problem({"enable_nvlink": True}, has_rmm=False) is None
    assert rmm.rmm_problem({"rmm_async": False, "rmm_pool_size": None}, has_rmm=False) is None
    msg = rmm.rmm_problem({"rmm-pool-size": "10GB", "rmm_async": True}, has_rmm=False, python="/venv/bin/python")
    assert "rmm-pool-size, rmm_async" in msg and "rmm" in msg and "/venv/bin/python" in msg
    assert "which dask-cuda does not install" in msg


def test_rmm_installed_looks_on_sys_path(tmp_path, monkeypatch):
    if rmm.rmm_installed():
        pytest.skip("rmm is installed here")
    (tmp_path / "rmm").mkdir()
    (tmp_path / "rmm" / "__init__.py").write_text("raise ImportError('looked up, never imported')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert rmm.rmm_installed()
