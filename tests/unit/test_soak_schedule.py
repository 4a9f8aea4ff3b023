"""The chaos soak's schedule and bookkeeping (``benchmarks/soak.py``), without Spark."""

from __future__ import annotations

import itertools

import pytest

from benchmarks import soak
from tests.support.multihost import SOAK_MINUTES, SOAK_SEED

HOSTS = ["worker-1", "worker-2"]


@pytest.mark.parametrize("seed", [0, 37, 266])
@pytest.mark.parametrize("minutes", [2, 30])
def test_the_schedule_is_a_pure_function_of_its_arguments(seed, minutes):
    a, b = soak.schedule(seed, minutes, HOSTS), soak.schedule(seed, minutes, list(reversed(HOSTS)))
    assert a == b and a == sorted(a)
    assert soak.schedule(seed + 1, minutes, HOSTS) != a


@pytest.mark.parametrize("seed", range(20))
def test_every_step_is_within_its_limits(seed):
    steps = soak.schedule(seed, 30, HOSTS)
    assert soak.kinds_of(steps) == set(soak.KINDS)  # 30 minutes: every kind, many times
    last_scale = [s for s in steps if s.kind == "scale"][-1]
    assert last_scale.target == str(max(soak.SIZES))  # the run ends at full size
    for s in steps:
        assert s.kind in soak.KINDS and s.kind in soak.BOUNDS
        if s.kind in ("kill_worker", "kill_executor", "host_lost", "link_cut"):
            assert s.target in HOSTS
        if s.kind == "link_cut":
            assert soak.LINK_CUT[0] <= s.duration <= soak.LINK_CUT[1]
        if s.kind == "host_lost":
            assert soak.HOST_LOST[0] <= s.duration <= soak.HOST_LOST[1]
            assert s.duration + 120 < soak.BOUNDS["host_lost"]  # room for the replacement's start
        if s.kind == "link_cut":
            assert s.duration + 10 < soak.BOUNDS["link_cut"]
        assert s.t <= 30 * 60 or s == last_scale
    faults = [s for s in steps if s.kind in soak.FAULTS]
    for a, b in itertools.pairwise(faults):  # one fault at a time: the next after the last's duration
        assert b.t >= a.t + a.duration
    sizes = [int(s.target) for s in faults if s.kind == "scale"]
    assert all(x != y for x, y in itertools.pairwise(sizes))  # toggles


def test_the_ci_seed_covers_every_kind_in_two_minutes():
    assert soak.kinds_of(soak.schedule(SOAK_SEED, SOAK_MINUTES, HOSTS)) == set(soak.KINDS)


def test_below_full_counts_the_time_with_fewer_workers_than_wanted():
    samples = [(0, 2, 2), (1, 1, 2), (3, 0, 2), (4, 2, 2), (6, 1, 1), (7, 1, 2), (8, 2, 2)]
    assert soak.below_full(samples) == 4.0
    assert soak.below_full(samples, since=3) == 2.0
    assert soak.below_full([]) == 0.0


def test_render_says_pass_only_with_nothing_wrong_hung_or_left():
    R = {
        "seed": 3,
        "minutes": 2,
        "faults": dict.fromkeys(soak.KINDS, 1),
        "checked": 10,
        "retried": 2,
        "wrong": 0,
        "hangs": 0,
        "errors": 0,
        "left": {"processes": [], "ports": [], "files": []},
        "below_full_s": 12.5,
        "ran_s": 120.0,
        "total_s": 200.0,
        "late_s": 3.0,
        "relaunches": 4,
    }
    text = soak.render(R)
    assert "PASS" in text and "| wrong results | 0 |" in text and "(total 7)" in text
    assert "FAIL" in soak.render({**R, "left": {"ports": ["worker-1: 198.18.0.11:4242"]}})
    assert "FAIL" in soak.render({**R, "wrong": 1})
