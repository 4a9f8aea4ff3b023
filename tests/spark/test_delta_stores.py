"""Delta tables on an object store: a real S3 API server (moto's, tests/support/s3.py) that
holds tables Spark wrote (on the local disk: the test puts their files on the server with
s3fs, each commit's data files before its log entry, as a writer does), and ``read_delta``
reads through s3fs on the Dask workers of a spark-dask cluster; Spark's own read of the
same table is the answer.

- every read sees the table as the store has it at that call (fsspec's object-store
  filesystems keep listings for the life of the process);
- credentials from ``storage_options`` never show (task keys, reprs, the workers' and
  the scheduler's logs, error messages), and from the workers' environment (``env=``)
  they are not in the task graph at all;
- a driver or a worker that the store refuses fails with one line naming the table;
- in-commit timestamps decide ``timestamp=`` on a copied table (copies change the files'
  modification times), under Delta 3.3's property names and Delta 3.2's ``-preview`` ones;
- ``write_delta(mode="error")`` asks Spark's Hadoop filesystem whether a table at a URI
  exists (a cloud URI's credentials are often Spark's only).

Delta's jars are for Spark 3.5: the module runs in CI's pyspark 3.5 environment, on the
Delta session tests/conftest.py's ``delta_spark`` shares.
"""

from __future__ import annotations

import json
import os
import pickle

import cloudpickle
import dask.dataframe as dd
import pandas as pd
import pytest

import spark_dask
from tests.support import delta_tables
from tests.support.s3 import NO_METADATA, S3Server
from tests.support.stores import ordered, publish, sparks

pytestmark = [pytest.mark.core, pytest.mark.spark, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with S3Server.for_module(tmp_path_factory) as s:
        yield s


@pytest.fixture(scope="module")
def spark(delta_spark):
    """The Delta session this module shares with test_delta_read.py and
    test_delta_filters.py (tests/conftest.py); this process without the instance
    metadata service while the module runs."""
    old = {k: os.environ.get(k) for k in NO_METADATA}
    os.environ.update(NO_METADATA)
    yield delta_spark
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture(scope="module")
def client(spark, server):
    """One Dask worker whose environment holds the test user's key (as an instance profile
    would give it)."""
    env = {**server.environment(), **NO_METADATA}
    with spark_dask.start(spark, n_workers=1, progress=False, memory_limit="2GiB", env=env) as c:
        yield c


def assert_rows(got, want: pd.DataFrame, what: str) -> None:
    got = ordered(got.compute())
    assert got.id.tolist() == want.id.tolist(), what
    assert got.k.tolist() == want.k.tolist(), what


def everything_shown(client, ddf) -> str:
    """What a user or a log can see of a read: its reprs, task keys, the scheduler's task
    prefixes, and every worker's and the scheduler's log."""
    keys = [str(k) for k in ddf.__dask_graph__()]
    expr = getattr(ddf, "expr", None)
    prefixes = client.run_on_scheduler(lambda dask_scheduler: sorted(map(str, dask_scheduler.task_prefixes)))
    logs = [line for lines in client.get_worker_logs().values() for _, line in lines]
    logs += [line for _, line in client.get_scheduler_logs()]
    return "\n".join([repr(ddf), str(expr), repr(expr), *keys, *prefixes, *logs])


def test_a_table_on_s3(spark, server, client, monkeypatch, tmp_path):
    """One table that Spark writes, on the store:

    - Spark commits between two reads in one process (the commit reaches the store after
      the first read listed the log): the second read (on the Dask workers, through
      s3fs) has Spark's new version, and time travel knows it;
    - the key and secret of ``storage_options`` travel to the worker and show nowhere;
    - credentials from the environments only (the driver's, the workers' ``env=``): the
      task graph holds none;
    - a driver with a wrong secret, and a worker whose key was revoked after the log was
      read: one DeltaError line each, naming the table and the fix.
    """
    url, local, fs = server.url("fresh"), str(tmp_path / "fresh"), server.filesystem()
    spark.range(0, 9000, 1, 3).selectExpr("id", "CAST(id % 7 AS INT) AS k").write.format("delta").save(local)
    assert publish(fs, local, f"{server.bucket}/fresh")
    first = spark_dask.read_delta(url, storage_options=server.storage_options, via="files")
    assert_rows(first, sparks(spark, local), "version 0")
    spark.sql(f"DELETE FROM delta.`{local}` WHERE id % 3 = 0")  # version 1: 6,000 rows
    assert f"{server.bucket}/fresh/_delta_log/{1:020d}.json" in publish(fs, local, f"{server.bucket}/fresh")
    want = sparks(spark, local)
    second = spark_dask.read_delta(url, storage_options=server.storage_options, via="files")
    assert_rows(second, want, "after Spark's DELETE")
    assert len(second) == 6000
    assert_rows(spark_dask.read_delta(url, version=1, storage_options=server.storage_options), want, "version 1")
    shown = everything_shown(client, second)
    assert server.secret not in shown and server.key not in shown

    with monkeypatch.context() as env:
        for k, v in server.environment().items():
            env.setenv(k, v)
        with server.authenticated():
            ddf = spark_dask.read_delta(url, storage_options=server.endpoint_options, via="files")
            graph = cloudpickle.dumps(dict(ddf.__dask_graph__()), protocol=pickle.HIGHEST_PROTOCOL)
            assert server.secret.encode() not in graph and server.key.encode() not in graph
            assert_rows(ddf, want, "credentials from the environments")

    wrong = {**server.storage_options, "secret": "not-the-secret-0123456789"}
    with server.authenticated(), pytest.raises(spark_dask.DeltaError) as driver:
        spark_dask.read_delta(url, storage_options=wrong, via="files")
    revoked_key, revoked_secret = server.new_key()
    ddf = spark_dask.read_delta(url, storage_options={**wrong, "key": revoked_key, "secret": revoked_secret})
    server.revoke(revoked_key)
    with server.authenticated(), pytest.raises(spark_dask.DeltaError) as worker:
        ddf.compute()
    for error, who in ((driver.value, "the driver"), (worker.value, "the Dask worker on ")):
        message = str(error)
        assert message.startswith(f"spark-dask: {who}") and f"cannot read the Delta table {url}" in message, message
        assert "\n" not in message and "storage_options=" in message and "env=" in message, message
        assert error.__cause__ is None and error.__suppress_context__, message
    shown = everything_shown(client, ddf) + str(driver.value) + str(worker.value)
    assert "not-the-secret-0123456789" not in shown and revoked_secret not in shown


def test_in_commit_timestamps_decide_time_travel_on_a_copy(spark, server, client, tmp_path):
    """A table with in-commit timestamps, copied to the store (new modification times):
    ``timestamp=`` picks the version by the commits' own timestamps, under Delta 3.3's
    property names and under Delta 3.2's (``-preview``)."""
    local = str(tmp_path / "ict")
    spark.sql(f"""CREATE TABLE delta.`{local}` USING delta TBLPROPERTIES ('delta.enableInCommitTimestamps' = 'true')
        AS SELECT id, CAST(id % 5 AS INT) AS k FROM range(0, 100, 1, 1)""")
    spark.sql(f"INSERT INTO delta.`{local}` SELECT id, CAST(id % 5 AS INT) FROM range(100, 150, 1, 1)")
    ict = [delta_tables.read_commit(local, v)[0]["commitInfo"]["inCommitTimestamp"] for v in (0, 1)]
    conf = delta_tables.latest_metadata(local)["configuration"]
    assert conf.get("delta.enableInCommitTimestamps") == "true", conf  # Delta 3.3.2's name
    between = pd.Timestamp((ict[0] + ict[1]) // 2, unit="ms", tz="UTC").isoformat()
    want = sparks(spark, local, versionAsOf=0)
    fs = server.filesystem()
    for name, preview in (("ict", False), ("ict_preview", True)):
        fs.put(local, f"{server.bucket}/{name}", recursive=True)
        for v in (0, 1):
            fs.pipe(f"{server.bucket}/{name}/_delta_log/{v:020d}.json", renamed(local, v, preview))
        got = spark_dask.read_delta(server.url(name), timestamp=between, storage_options=server.storage_options)
        assert_rows(got, want, f"{name} as of {between}")


def renamed(path: str, version: int, preview: bool) -> bytes:
    """A commit's JSON lines; with ``preview``, as Delta 3.2 wrote them: the feature
    ``inCommitTimestamp-preview`` and the properties ``delta.*-preview``
    (delta-io/delta#3416 dropped the suffix in Delta 3.3)."""
    lines = []
    for action in delta_tables.read_commit(path, version):
        if preview and "protocol" in action:
            features = action["protocol"].get("writerFeatures", [])
            action["protocol"]["writerFeatures"] = [f + "-preview" if f == "inCommitTimestamp" else f for f in features]
        if preview and "metaData" in action:
            conf = action["metaData"]["configuration"]
            action["metaData"]["configuration"] = {
                (k + "-preview" if k.startswith("delta.") and "InCommitTimestamp" in k else k): v
                for k, v in conf.items()
            }
        lines.append(json.dumps(action))
    return ("\n".join(lines) + "\n").encode()


def test_write_delta_asks_spark_whether_a_table_at_a_uri_exists(spark, server, client, monkeypatch, tmp_path):
    """A URI (``file:`` here, ``s3a:`` or ``abfss:`` on a cloud, whose credentials are often
    Spark's only: its ``spark.hadoop.*`` confs) is looked up through Spark's Hadoop
    filesystem: ``mode="error"`` writes a new table, and refuses an existing one before the
    Dask side is computed."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", server.endpoint)  # a Python S3 client, if any, asks moto, not AWS
    source = dd.from_pandas(pd.DataFrame({"id": range(50), "k": [i % 3 for i in range(50)]}), npartitions=2)
    target = (tmp_path / "written").as_uri()
    spark_dask.write_delta(source, target, mode="error")
    assert spark.read.format("delta").load(target).count() == len(source)
    with pytest.raises(spark_dask.DeltaError, match="exists already: pass mode='append' or mode='overwrite'"):
        spark_dask.write_delta(source, target)
