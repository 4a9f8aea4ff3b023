"""``python -m benchmarks scale``'s pure parts (``benchmarks/scale.py``): its arguments,
its bed, the ratios, growth and extrapolation its tables print, and the tables from a
recorded run, without Spark."""

from __future__ import annotations

import doctest

import pytest

from benchmarks import scale


def test_the_doctests():
    failed, tried = doctest.testmod(scale)
    assert tried >= 8 and failed == 0


def test_arguments_choose_sizes_and_parts():
    args = scale.arguments(["--sizes", "64,2,16", "--parts", "idle,startup", "--reps", "1", "--worker", "cuda"])
    assert args.sizes == [2, 16, 64] and args.parts == ["startup", "idle"]
    assert args.reps == 1 and args.worker == "cuda"
    default = scale.arguments([])
    assert default.sizes == [2, 4, 8, 16, 32, 64] and default.parts == list(scale.PARTS)


@pytest.mark.parametrize(
    "argv, says",
    [(["--sizes", "2,x"], "expected numbers"), (["--sizes", "0,2"], ">= 1"), (["--parts", "idle,nap"], "nap")],
)
def test_bad_arguments_say_what_is_wrong(argv, says):
    with pytest.raises(SystemExit, match=says):
        scale.arguments(argv)


def test_the_bed_has_eight_gpus_per_executor_and_room_for_spark():
    for n in (2, 8, 9, 64, 128):
        master, executors = scale.bed(n, 512)
        assert executors * scale.GPUS >= n > (executors - 1) * scale.GPUS or n < scale.GPUS
        assert master == f"local-cluster[{executors},{scale.GPUS + scale.SPARE_CORES},512]"


def run(sizes=(2, 8, 64)) -> dict:
    """A recorded run's shape: start-up linear in N, the stage flat, the naive floor linear."""
    out = []
    for n in sizes:
        out.append({
            "n": n, "master": scale.bed(n, 512)[0], "load_before": 1.0, "load_after": 2.0,
            "startup": {"start": [0.1 * n, 0.1 * n + 0.2], "stage": [0.2, 0.2], "naive": [0.05 * n] * 2,
                        "close": [0.3], "close_floor": [0.05]},
            "idle": {"without": {"py_cpu_pct": 0.5, "threads": 4, "py4j_per_s": 0.4, "py4j_callers": {}},
                     "with": {"py_cpu_pct": 1.0, "threads": 9, "py4j_per_s": 2.0 * n, "jvm_cpu_pct": 3.0,
                              "py4j_callers": {"spark_dask/decommission.py:decommissioning": 2.0}},
                     "floor": {"py_cpu_pct": 0.01 * n} if n < 64 else {"error": "3 of 64 bare workers registered"},
                     "rss_growth_mb": 10.0 + n, "workers_memory": {"uss_mb": 20.0},
                     "executor_rss_mb": [260.0]},
        })  # fmt: skip
    return {"machine": {"cpus": 2, "memory_gib": 23.5, "platform": "Linux", "python": "3.11", "pyspark": "4",
                        "distributed": "2026", "load_before": [1.0], "load_after": [2.0]},
            "worker": "cpu", "reps": 2, "idle_seconds": 20, "handoff_gb": 1.0, "sizes": out,
            "masters": {str(s["n"]): s["master"] for s in out}}  # fmt: skip


def test_the_ratios_are_taken_in_the_same_run():
    R = run()
    by_n = scale.summarize(R["sizes"])
    f = by_n["64"]
    assert f["start"] == pytest.approx(6.5) and f["stage"] == pytest.approx(0.2)
    assert f["vs_stage"] == pytest.approx(6.5 / 0.2) and f["vs_naive"] == pytest.approx(6.5 / 3.2)
    assert f["py4j_per_s_with"] == 128 and f["py4j_per_s_without"] == 0.4
    assert "py4j_callers_with" not in f  # the breakdown stays in the run's JSON, not in the flat figures
    assert by_n["8"]["py_cpu_pct_floor"] == pytest.approx(0.08) and "py_cpu_pct_floor" not in f  # 64's failed
    assert scale.growth(by_n, "py4j_per_s_with") == pytest.approx(1.0)  # per worker: linear
    assert scale.growth(by_n, "stage") == pytest.approx(0.0)
    assert scale.extrapolate(by_n, "py4j_per_s_with") == pytest.approx(512)


def test_the_tables_name_the_machine_its_load_and_every_size():
    R = run()
    R["by_n"] = scale.summarize(R["sizes"])
    text = scale.render(R)
    assert "load average (1 min) before/after each N: N=2 1.0/2.0" in text
    assert "| 64 | local-cluster[8,10,512] | 6.50 | 0.20 | 3.20 | 32.50 | 2.03 | 16.00 | 0.30 | 0.05 |" in text
    assert "| 64 | 1.0 (0.5) | - | 3.0 (-) | 9 (4) | 128.0 (0.4) | 74 | 20 | 260 |" in text
    assert "| 8 | 1.0 (0.5) | 0.1 | 3.0 (-) |" in text
    assert "N=64: distributed's idle floor failed: 3 of 64 bare workers registered" in text
    assert "| py4j_per_s_with | 1.00 | 512.00 |" in text
    assert "drain" not in text.split("growth with N")[0]  # no drain measured: no drain table


def test_the_lost_host_table_has_a_row_per_bed_and_mode():
    run = {"workers": 4, "replace_s": 3.0, "spark_back_s": 6.0, "dask_back_s": 10.0, "start_s": 2.0}
    H = {"cores": 2, "runs": {"2 barrier": {**run, "barrier": True}, "2 isolated": {**run, "barrier": False},
                              "8": {**run, "workers": 16}}}  # fmt: skip
    text = scale.render_hosts(H)
    assert "| 2 | one barrier stage | 4 | 3.00 | 6.00 | 10.00 | 4.00 | 2.00 | 2.00 |" in text
    assert "| 2 | a Spark job per worker | 4 |" in text
    assert "| 8 | one barrier stage | 16 |" in text  # a run recorded before the two modes


def test_a_size_that_failed_is_said_and_the_others_kept():
    R = run(sizes=(8, 64))
    R["sizes"][1]["startup"] = {"error": "ClusterTimeoutError: spark-dask: only 63 of 64 Dask workers connected"}
    R["sizes"][1]["idle"] = {"error": "ClusterTimeoutError: ..."}
    R["by_n"] = scale.summarize(R["sizes"])
    assert "start" in R["by_n"]["8"] and R["by_n"]["64"] == {}
    text = scale.render(R)
    assert "N=64: the startup part failed: ClusterTimeoutError: spark-dask: only 63 of 64" in text
    assert "| 8 | local-cluster[1,10,512] |" in text
