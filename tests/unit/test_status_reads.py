"""What the watches read of Spark every round while a cluster runs (issue 57: py4j calls
per second independent of the cluster's size and of the application's past), against a
stand-in of Spark's status tracker as py4j shows it (no JVM here): each call into the
JVM is counted, an ``int[]`` is a ``JavaArray`` whose every element is a call."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from pyspark import StatusTracker

from spark_dask.spark.jobtags import GANG
from spark_dask.spark.launcher import stage_snapshot

pytestmark = pytest.mark.core


class JVM:
    """The py4j calls of one snapshot."""

    def __init__(self):
        self.calls = 0

    def __call__(self, value):
        self.calls += 1
        return value


class JavaArray:
    """py4j's ``JavaArray``: its length and each element are one call each."""

    def __init__(self, jvm, values):
        self.jvm, self.values = jvm, list(values)

    def __len__(self):
        return self.jvm(len(self.values))

    def __getitem__(self, i):
        if i >= len(self.values):
            raise IndexError(i)
        return self.jvm(self.values[i])


class Context(SimpleNamespace):
    """A SparkContext stand-in (hashed by identity, weakly referable, as a SparkContext is)."""

    __hash__ = object.__hash__


def context(jobs: dict, stages: dict, active: set, groups: dict, tags: dict):
    """A SparkContext stand-in: ``jobs`` {job: [stage ids]}, ``stages`` {stage: (tasks,
    active tasks)}, the ``active`` jobs, the job ids of each job group and job tag."""
    jvm = JVM()

    def arr(values):
        return jvm(JavaArray(jvm, values))

    def job_info(j):
        return jvm(SimpleNamespace(stageIds=lambda: arr(jobs[j]), status=lambda: jvm("RUNNING")))

    def stage_info(s):
        total, running = stages[s]
        fields = dict(currentAttemptId=0, submissionTime=0, name="collect", numTasks=total,
                      numActiveTasks=running, numCompletedTasks=0, numFailedTasks=0)  # fmt: skip
        return jvm(SimpleNamespace(**{k: (lambda v=v: jvm(v)) for k, v in fields.items()}))

    jtracker = SimpleNamespace(
        getActiveJobIds=lambda: arr(sorted(active)),
        getJobIdsForGroup=lambda g: arr(groups.get(g, [])),
        getActiveStageIds=lambda: arr(sorted({s for j in active for s in jobs[j]})),
        getJobInfo=job_info,
        getStageInfo=stage_info,
    )
    scala = SimpleNamespace(getJobIdsForTag=lambda t: arr(tags.get(t, [])))
    jsc = SimpleNamespace(
        statusTracker=lambda: jvm(jtracker), sc=lambda: jvm(SimpleNamespace(statusTracker=lambda: jvm(scala)))
    )
    arrays = SimpleNamespace(toString=lambda a: jvm(str(a.values)))
    sc = Context(_jsc=jsc, _jvm=SimpleNamespace(java=SimpleNamespace(util=SimpleNamespace(Arrays=arrays))))
    sc.statusTracker = lambda: StatusTracker(jtracker)
    return sc, jvm


@pytest.mark.parametrize("past", [0, 100, 1000])
def test_a_snapshot_reads_as_much_whatever_the_applications_past_gangs(past):
    """The running cluster's gang (job 0, stage 0, 64 tasks) beside ``past`` ended gang
    jobs of earlier clusters that Spark's tracker still keeps (``spark.ui.retainedJobs``):
    they were read each round (5 calls each: 5025 a round after 1000 clusters), now the
    active jobs only."""
    jobs = {j: [j] for j in range(past + 1)}
    sc, jvm = context(jobs, {0: (64, 64)}, {0}, {"t": [0]}, {GANG: list(jobs)})
    stages, ours = stage_snapshot(SimpleNamespace(sparkContext=sc), ["t"])
    assert ours == {0} and [(s["stageId"], s["gang"]) for s in stages] == [(0, True)]
    assert jvm.calls == 21, jvm.calls


def test_a_snapshot_tells_ours_other_gangs_and_a_starved_stage_apart():
    jobs = {0: [0], 1: [1], 2: [2, 3], 3: [4]}  # ours; another cluster's gang; a user's job; ended
    sc, jvm = context(jobs, {0: (2, 2), 1: (2, 0), 2: (4, 0), 3: (4, 4)}, {0, 1, 2}, {"t": [0]}, {GANG: [0, 1, 3]})
    sc._jsc.sc = lambda: SimpleNamespace(
        statusTracker=lambda: SimpleNamespace(getJobIdsForTag=lambda t: JavaArray(jvm, [0, 1, 3])),
        statusStore=lambda: SimpleNamespace(lastStageAttempt=lambda s: SimpleNamespace(
            description=lambda: SimpleNamespace(isDefined=lambda: True, get=lambda: f"job of stage {s}"))),
    )  # fmt: skip
    stages, ours = stage_snapshot(SimpleNamespace(sparkContext=sc), ["t"])
    assert ours == {0}
    assert [(s["stageId"], s["gang"], s.get("description")) for s in stages] == [
        (0, True, None), (1, True, "job of stage 1"), (2, False, "job of stage 2"), (3, False, None),
    ]  # fmt: skip
