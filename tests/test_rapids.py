"""RAPIDS Accelerator conf checks and the dask-cuda RMM pool sizing (no GPU needed)."""

from __future__ import annotations

import sys
import types

import pytest

from spark_dask import rapids

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
    assert rapids.rmm_pool_size(80 * gib, gib, 0.95) == int(79 * gib * 0.95) // (256 * 2**20) * (256 * 2**20)
    assert rapids.rmm_pool_size(int(1.5 * gib), gib) is None
    assert rapids.rmm_pool_size(0, gib) is None


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
    spec = {"pool": "auto", "reserve": 2**30, "fraction": 1.0}
    opts, note = rapids.rmm_option(spec, "0", {"enable_nvlink": True})
    assert opts == {"enable_nvlink": True, "rmm_pool_size": 29 * 2**30}
    assert "29.00 GiB of 30.0 GiB free on GPU 0" in note
    assert fake_nvml == ["init", "shutdown"]
    assert rapids.gpu_free_memory("GPU-1234") == (30 * 2**30, 40 * 2**30)


def test_overrides_and_fallbacks(monkeypatch):
    spec = {"pool": "auto", "reserve": 2**30, "fraction": 0.9}
    assert rapids.rmm_option(spec, "0", {"rmm-pool-size": "5GB"}) == ({"rmm-pool-size": "5GB"}, "rmm pool: worker_options")
    assert rapids.rmm_option({"pool": None}, "0", None) == ({}, "rmm pool: off")
    assert rapids.rmm_option({"pool": 8 * 2**30}, "0", None)[0] == {"rmm_pool_size": 8 * 2**30}
    monkeypatch.setitem(sys.modules, "pynvml", None)  # not installed: import fails
    opts, note = rapids.rmm_option(spec, "0", None)
    assert opts == {} and "dask-cuda default" in note


def test_rapids_module_is_stdlib_only_at_import():
    """It is shipped by value to executors with the task code."""
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(rapids))
    top = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    names = {(n.module or "") if isinstance(n, ast.ImportFrom) else a.name for n in top for a in getattr(n, "names", [])}
    assert names <= {"__future__", "re", "collections.abc", "dataclasses"}, names
