"""``python -m benchmarks yarn``'s pure parts (``benchmarks/yarn.py``): its arguments,
the tables from a recorded run, the wait for an idle YARN and SIGTERM's way out, without
Spark or YARN."""

from __future__ import annotations

import doctest
import os
import signal

import pytest

from benchmarks import run, yarn


def test_the_doctests():
    failed, tried = doctest.testmod(yarn)
    assert tried >= 3 and failed == 0


def test_arguments_keep_the_sizes_that_fit_the_slots():
    args = yarn.arguments(["--sizes", "8,2,4", "--executors", "2", "--cores", "2", "--reps", "1"])
    assert args.sizes == [2, 4] and args.left_out == [8] and args.reps == 1
    default = yarn.arguments([])
    assert (default.nodemanagers, default.executors, default.cores, default.reps) == (2, 2, 2, 3)
    assert default.sizes == [2, 4] and default.cold_reps == 2 and not default.no_local and default.json is None


@pytest.mark.parametrize(
    "argv, says",
    [
        (["--sizes", "2,x"], "expected numbers"),
        (["--sizes", "0,2"], ">= 1"),
        (["--reps", "0"], ">= 1"),
        (["--cores", "5"], "at most 4"),
        (["--cold-reps", "-1"], ">= 0"),
        (["--sizes", "8", "--executors", "1", "--cores", "2"], "no size fits"),
    ],
)
def test_bad_arguments_say_what_is_wrong(argv, says, capsys):
    with pytest.raises(SystemExit):
        yarn.arguments(argv)
    assert says in capsys.readouterr().err


def _warm(start: float, stage: float) -> dict:
    return {
        "start_runs": [start, start + 0.2, start - 0.1],
        "close_runs": [0.2, 0.25, 0.3],
        "scheduler_runs": [0.1, 0.1, 0.1],
        "workers_runs": [0.5, 0.6, 0.7],
        "stage_floor_runs": [stage, stage, stage],
        "stage_barrier_runs": [1.2, 1.3, 1.4],
        "close_floor_runs": [0.02, 0.03, 0.04],
        "launcher_rss_mb": 98.0,
        "launcher_uss_mb": 15.0,
    }


def recorded() -> dict:
    """A run as its JSON has it (string keys), before ``run.finish``."""
    return {
        "machine": {
            "cpus": 2,
            "memory_gib": 23.5,
            "platform": "Linux",
            "python": "3.11.7",
            "pyspark": "4.3.0",
            "distributed": "2026.8.0",
            "load_before": [1.0, 1, 1],
            "load_after": [2.0, 2, 2],
        },  # fmt: skip
        "reps": 3,
        "cold_reps": 2,
        "sizes_left_out": [8],
        "yarn": {
            "hadoop": "3.3.4",
            "nodemanagers": 2,
            "executors": 2,
            "cores": 2,
            "deploy_mode": "client",
            "left_in_containers": [],
            "daemons_killed": [],
            "left_after_stop": [],
        },  # fmt: skip
        "worker_floor": {"2": [1.0, 1.2, 1.1], "4": [2.0, 2.2, 2.4]},
        "masters": [
            {
                "master": "yarn",
                "ray": None,
                "first_with_driver_jvm": True,
                "app_start_runs": [20.0, 12.0, 11.0, 13.0, 12.5],
                "cold": {"n": 2, "start_runs": [6.0, 7.0], "close_runs": [0.4, 0.5], "stage_floor_runs": [4.0, 5.0]},
                "warm": {"2": _warm(0.8, 0.3), "4": _warm(1.5, 0.4)},
            },
            {
                "master": "local-cluster[2,2,1024]",
                "ray": None,
                "first_with_driver_jvm": True,
                "app_start_runs": [8.0, 5.0],
                "warm": {"2": _warm(0.5, 0.15)},
            },
        ],
        "total_seconds": 300.0,
    }


def test_the_tables_of_a_recorded_run():
    R = recorded()
    run.finish(R)
    text = yarn.render(R)
    lines = text.splitlines()
    assert "| yarn | 20.00 | 12.25 (11.00-13.00) | 5 |" in lines
    assert "| local-cluster[2,2,1024] | 8.00 | 5.00 (5.00-5.00) | 2 |" in lines
    # cold: 6.5 s against 4.5 (stage) + 1.1 (worker floor)
    assert (
        "| yarn | cold | 2 | 6.50 (6.00-7.00) | 5.60 (4.50 + 1.10) | 4.50 (4.00-5.00) |  | 1.16 (1.15-1.18) |" in lines
    )
    # warm N = 4: 1.5 s against 0.4 + 2.2
    assert "| yarn | warm | 4 | 1.50 (1.40-1.70) | 2.60 (0.40 + 2.20) | 0.40 (0.40-0.40) | 1.30 (1.20-1.40) | 0.58 (0.54-0.65) |" in lines  # fmt: skip
    assert "| local-cluster[2,2,1024] | warm | 2 | 0.50 (0.40-0.70) | 1.25 (0.15 + 1.10) |" in text
    assert "| yarn | cold app | 2 | 0.45 (0.40-0.50) |  |" in lines
    assert "| yarn | warm | 2 | 0.25 (0.20-0.30) | 0.03 (0.02-0.04) |" in lines
    assert "| yarn | 4 | 0.10 (0.10-0.10) | 0.60 (0.50-0.70) | 15 |" in lines
    assert "sizes left out (more than 2 x 2 slots): [8]" in text
    assert "container processes left after the last application: none" in text
    # every table row has as many cells as its head
    for block in text.split("\n\n"):
        rows = [line for line in block.splitlines() if line.startswith("|")]
        assert len({row.count("|") for row in rows}) <= 1, block


def test_a_run_without_cold_part_renders():
    R = recorded()
    del R["masters"][0]["cold"]
    R["cold_reps"] = 0
    run.finish(R)
    assert "| yarn | cold |" not in yarn.render(R)


class FakeBed:
    def __init__(self, answers):
        self.answers = list(answers)

    def metrics(self):
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


def test_wait_yarn_idle_returns_once_no_application_and_no_container():
    bed = FakeBed([{"appsRunning": 1, "containersAllocated": 3}, {"appsRunning": 0, "containersAllocated": 1},
                   {"appsRunning": 0, "containersAllocated": 0}])  # fmt: skip
    yarn.wait_yarn_idle(bed, timeout=10)
    assert bed.answers == [{"appsRunning": 0, "containersAllocated": 0}]


def test_wait_yarn_idle_is_bounded():
    with pytest.raises(RuntimeError, match="1 application"):
        yarn.wait_yarn_idle(FakeBed([{"appsRunning": 1, "containersAllocated": 2}]), timeout=0.2)


def test_sigterm_becomes_an_interrupt_and_the_handler_comes_back():
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt), yarn.sigterm_as_interrupt():
        os.kill(os.getpid(), signal.SIGTERM)
        pytest.fail("SIGTERM did not interrupt")
    assert signal.getsignal(signal.SIGTERM) is before
