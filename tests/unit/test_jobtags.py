"""spark_dask.spark.jobtags: the gangs' and the hand-off's tagged Spark jobs, with fake sessions (no Spark)."""

import pytest

from spark_dask.spark import jobtags


class FakeContext:
    def __init__(self):
        self.calls = []
        self.props = {"spark.job.description": "before"}

    def setJobGroup(self, group, description, interruptOnCancel=False):
        self.calls.append(("setJobGroup", group, description, interruptOnCancel))

    def getLocalProperty(self, key):
        return self.props.get(key)

    def setLocalProperty(self, key, value):
        self.calls.append(("setLocalProperty", key, value))
        self.props[key] = value

    def setJobDescription(self, description):
        self.calls.append(("setJobDescription", description))
        self.props["spark.job.description"] = description

    def addJobTag(self, tag):
        self.calls.append(("addJobTag", tag))

    def removeJobTag(self, tag):
        self.calls.append(("removeJobTag", tag))

    def cancelJobGroup(self, tag):
        self.calls.append(("cancelJobGroup", tag))

    def cancelJobsWithTag(self, tag):
        self.calls.append(("cancelJobsWithTag", tag))


class FakeClassic:
    def __init__(self):
        self.sparkContext = FakeContext()


class FakeConnect:
    def __init__(self):
        self.calls = []

    def addTag(self, tag):
        self.calls.append(("addTag", tag))

    def removeTag(self, tag):
        self.calls.append(("removeTag", tag))

    def interruptTag(self, tag):
        self.calls.append(("interruptTag", tag))


@pytest.fixture
def connect(monkeypatch):
    monkeypatch.setattr(jobtags, "is_connect", lambda spark: isinstance(spark, FakeConnect))


def test_gang_job_group_and_tag(connect):
    spark = FakeClassic()
    with jobtags.tagged(spark, "t1", "the gang", job_group=True, gang=True):
        spark.sparkContext.calls.append("collect")
    assert spark.sparkContext.calls == [
        ("setJobGroup", "t1", "the gang", True), ("addJobTag", "t1"), ("addJobTag", jobtags.GANG), "collect",
        ("removeJobTag", "t1"), ("removeJobTag", jobtags.GANG),
    ]  # fmt: skip


def test_handoff_tag_and_description_restored(connect):
    spark = FakeClassic()
    with pytest.raises(RuntimeError), jobtags.tagged(spark, "t2", "to_dask"):
        assert spark.sparkContext.props["spark.job.description"] == "to_dask"
        raise RuntimeError("job failed")
    assert spark.sparkContext.calls == [
        ("setJobDescription", "to_dask"), ("addJobTag", "t2"), ("removeJobTag", "t2"),
        ("setLocalProperty", "spark.job.description", "before"),
    ]  # fmt: skip


def test_connect_session_tag(connect):
    spark = FakeConnect()
    with jobtags.tagged(spark, "t3", "ignored", job_group=True):
        spark.calls.append("collect")
    jobtags.cancel(spark, "t3")
    assert spark.calls == [("addTag", "t3"), "collect", ("removeTag", "t3"), ("interruptTag", "t3")]
    spark = FakeConnect()
    with jobtags.tagged(spark, "t3", "a gang", gang=True):
        spark.calls.append("collect")
    assert spark.calls == [("addTag", "t3"), ("addTag", jobtags.GANG), "collect", ("removeTag", "t3"),
                           ("removeTag", jobtags.GANG)]  # fmt: skip


def test_cancel_classic_and_a_gone_context(connect):
    spark = FakeClassic()
    jobtags.cancel(spark, "t4")
    # by tag only: every job of tagged() carries it, and cancelJobGroup warns when it finds none
    assert spark.sparkContext.calls == [("cancelJobsWithTag", "t4")]
    del FakeContext.cancelJobsWithTag  # pyspark < 3.5: the job group
    try:
        spark = FakeClassic()
        jobtags.cancel(spark, "t4")
        assert spark.sparkContext.calls == [("cancelJobGroup", "t4")]
    finally:
        FakeContext.cancelJobsWithTag = lambda self, tag: self.calls.append(("cancelJobsWithTag", tag))

    class Gone:
        @property
        def sparkContext(self):
            raise RuntimeError("stopped")

    jobtags.cancel(Gone(), "t5")  # quiet: nothing left to cancel
