"""spark_dask.spark.compat: each Spark-version and Spark Connect gate on stand-in
sessions (no Spark), across the versions and masters that decide it."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from spark_dask.spark import compat

pytestmark = pytest.mark.core


class Conf:
    """A SparkContext's live conf (``sc._conf``) or a Connect session's ``spark.conf``."""

    _jconf = object()

    def __init__(self, values):
        self.values = values

    def get(self, key, default=None):
        return self.values.get(key, default)


def classic(version: str, master: str, **confs):
    return SimpleNamespace(version=version, sparkContext=SimpleNamespace(master=master, _conf=Conf(confs)))


class Connect:
    """A Spark Connect session's stand-in: its version and its ``spark.conf``."""

    connect = True
    _active_session = None  # pyspark's Connect SparkSession keeps the thread's active one here

    def __init__(self, version: str, master: str | None, **confs):
        self.version = version
        self.conf = Conf({**confs, **({"spark.master": master} if master is not None else {})})


connect = Connect


@pytest.fixture(autouse=True)
def connect_stand_ins(monkeypatch):
    is_connect = lambda spark: getattr(spark, "connect", False)  # noqa: E731
    monkeypatch.setattr(compat, "is_connect", is_connect)
    monkeypatch.setattr("spark_dask.spark.conf.is_connect", is_connect)


def test_spark_version_reads_major_and_minor():
    assert [compat.spark_version(SimpleNamespace(version=v)) for v in ("3.5.5", "4.1.0-preview2", "4", "4.0rc1")] == [
        (3, 5), (4, 1), (4, 0), (4, 0)
    ]  # fmt: skip


def test_task_profiles_one_rule_for_the_gang_and_the_hand_off():
    """Classic >= 3.4, Connect >= 4.0 (mapInArrow(profile=)), never in local mode: the
    rule session.cluster_facts and the hand-off each wrote themselves before."""
    cases = {
        ("classic", "3.3.2", "local-cluster[2,1,1024]"): False,
        ("classic", "3.4.0", "local-cluster[2,1,1024]"): True,
        ("classic", "3.5.5", "spark://host:7077"): True,
        ("classic", "4.0.0", "local[4]"): False,
        ("classic", "4.0.0", "local"): False,
        ("connect", "3.5.5", "local-cluster[2,1,1024]"): False,
        ("connect", "4.0.0", "local-cluster[2,1,1024]"): True,
        ("connect", "4.1.0", "local[2]"): False,
        ("connect", "4.1.0", None): True,  # serverless: the master is not readable
    }
    got = {
        (kind, version, master): compat.task_profiles_supported((classic if kind == "classic" else connect)(version, master))
        for kind, version, master in cases
    }  # fmt: skip
    assert got == cases


def test_whole_gpu_profiles_share_a_fractional_gpu_before_spark_4():
    fractional, whole = {"spark.task.resource.gpu.amount": "0.5"}, {"spark.task.resource.gpu.amount": "1"}
    assert compat.task_profile_shares_gpus(classic("3.5.5", "local-cluster[2,1,1024]", **fractional))
    assert not compat.task_profile_shares_gpus(classic("3.5.5", "local-cluster[2,1,1024]", **whole))
    assert not compat.task_profile_shares_gpus(classic("3.5.5", "local-cluster[2,1,1024]"))
    assert not compat.task_profile_shares_gpus(classic("4.0.0", "local-cluster[2,1,1024]", **fractional))


def test_the_arrow_and_profile_apis_of_spark_4():
    for version, new in (("3.5.5", False), ("4.0.0", True), ("4.2.1", True)):
        spark = classic(version, "local-cluster[2,1,1024]")
        assert compat.map_in_arrow_takes_profile(spark) is new
        assert compat.arrow_batch_rdd_takes_arguments(spark) is new
        assert compat.arrow_batches_bounded_by_bytes(spark) is new


def test_jvm_job_tags_and_the_connect_profile_session():
    assert compat.jvm_reachable(classic("3.5.5", "local")) and not compat.jvm_reachable(connect("4.0.0", "local"))
    tags = SimpleNamespace(addJobTag=None, removeJobTag=None, cancelJobsWithTag=None)
    assert compat.job_tags_supported(tags) and not compat.job_tags_supported(SimpleNamespace(setJobGroup=None))

    spark = connect("4.0.0", "local-cluster[2,1,1024]")
    Connect._active_session = SimpleNamespace(session=None)  # thread-local in pyspark
    try:
        compat.ready_connect_profile(spark)
        assert Connect._active_session.session is spark
    finally:
        Connect._active_session = None
    compat.ready_connect_profile(classic("4.0.0", "local"))  # nothing to do for a classic session


def test_the_current_catalog_before_spark_3_4_is_spark_catalog():
    def refuse():
        raise AttributeError("'Catalog' object has no attribute 'currentCatalog'")  # pyspark < 3.4

    assert compat.current_catalog(SimpleNamespace(catalog=SimpleNamespace(currentCatalog=lambda: "main"))) == "main"
    assert compat.current_catalog(SimpleNamespace(catalog=SimpleNamespace(currentCatalog=refuse))) == "spark_catalog"
