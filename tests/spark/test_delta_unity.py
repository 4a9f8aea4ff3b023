"""Unity Catalog table names read by the file reader with the credentials the catalog vends
(spark_dask/delta/unity.py, vending.py): against a stand-in for the catalog's REST API
(tests/support/unity_catalog.py) in front of moto's S3 server, whose IAM checks every
request (the Dask workers and the driver hold no storage credential of their own: only
the vended ones can read), and Spark's read of the same table by the same name (the
table registered in Spark's catalog at the local copy the store's files were put from).

- a name reads Spark's rows, deletion vectors and time travel included, and the random
  filters of test_delta_filters.py give Spark's rows through vending;
- every refusal (no EXTERNAL USE SCHEMA, external access off, a row filter, a column
  mask, a view, a name the catalog lacks, a wrong token) reads through Spark with one
  warning naming why, and ``via="files"`` refuses with one line naming what to ask for;
- credentials are renewed before they expire, and the expired ones are refused by the
  store for real;
- neither the workspace token nor a vended credential shows in the graph, its keys, the
  frames' reprs, the warnings, or the logs of this process, the workers and the scheduler.
"""

from __future__ import annotations

import gc
import logging
import os
import pickle
import random
import re
import threading
import time
import uuid
import warnings

import cloudpickle
import pandas as pd
import pytest

import spark_dask
from spark_dask.delta import read as delta_read
from tests.spark.test_delta_filters import ZONE, filters_table, random_filters, refused, sql_condition
from tests.support import delta_tables
from tests.support.processes import wait_until
from tests.support.s3 import NO_METADATA, S3Server
from tests.support.stores import ordered, plain, publish
from tests.support.unity_catalog import CatalogStandIn

pytestmark = [pytest.mark.core, pytest.mark.spark, pytest.mark.timeout(600)]

SCHEMA = "spark_catalog.uc_sales"
FILTER_CASES = 24
COLUMNS = [("id", "bigint"), ("g", "string"), ("val", "double")]  # delta_tables.write_dv's


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with S3Server.for_module(tmp_path_factory, "databricks.sdk") as s:
        yield s


@pytest.fixture(scope="module")
def uc(server):
    with CatalogStandIn.start(server, token=f"dapi-{uuid.uuid4().hex}") as catalog:
        catalog.grant_external_use(SCHEMA)
        yield catalog


@pytest.fixture(scope="module")
def spark(delta_spark):
    """The shared Delta session, with the schema the tables are registered in; this
    process without AWS's variables or instance metadata while the module runs."""
    saved = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith(("AWS_", "DATABRICKS_"))}
    os.environ.update(NO_METADATA)
    delta_spark.sql(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
    yield delta_spark
    delta_spark.sql(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
    for k in NO_METADATA:
        os.environ.pop(k, None)
    os.environ.update(saved)


@pytest.fixture(scope="module")
def client(spark, server):
    """One Dask worker with no storage credential in its environment."""
    with spark_dask.start(spark, n_workers=1, progress=False, memory_limit="2GiB", env=dict(NO_METADATA)) as c:
        yield c


@pytest.fixture(scope="module")
def workspace(uc):
    """The databricks-sdk client a user builds for the catalog."""
    from databricks.sdk import WorkspaceClient

    return WorkspaceClient(host=uc.url, token=uc.token)


def register(spark, server, uc, local: str, name: str, **info) -> str:
    """The Delta table at ``local`` put on the store and registered by ``name`` in Spark
    (at ``local``) and in the catalog (at its store URL). Returns the full name."""
    key = f"uc/{name}-{uuid.uuid4().hex[:6]}"
    publish(server.filesystem(), local, f"{server.bucket}/{key}")
    full = f"{SCHEMA}.{name}"
    spark.sql(f"DROP TABLE IF EXISTS {full}")
    spark.sql(f"CREATE TABLE {full} USING delta LOCATION '{local}'")
    uc.add_table(full, server.url(key), **info)
    return full


@pytest.fixture(scope="module")
def orders(spark, server, uc, tmp_path_factory) -> str:
    table = delta_tables.write_dv(spark, str(tmp_path_factory.mktemp("uc-orders")))
    return register(spark, server, uc, table.path, "orders")


def read(name: str, server, **kwargs):
    return spark_dask.read_delta(name, storage_options=server.endpoint_options, **kwargs)


def sparks(spark, name: str, version: int | None = None) -> pd.DataFrame:
    clause = f" VERSION AS OF {version}" if version is not None else ""
    return plain(ordered(spark.sql(f"SELECT * FROM {name}{clause}").toPandas()))


def test_a_name_reads_sparks_rows_through_vending(spark, server, uc, client, workspace, orders):
    calls = len(uc.calls)
    with server.authenticated(), warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback, no warning
        latest = read(orders, server, catalog=workspace).compute()
        first = read(orders, server, catalog=workspace, version=1).compute()
    assert plain(ordered(latest)).equals(sparks(spark, orders)), "the latest version"
    assert plain(ordered(first)).equals(sparks(spark, orders, 1)), "version 1"
    asked = [(m, p.split("/api/")[1]) for m, p, _ in uc.calls[calls:]]
    assert asked[:2] == [
        ("GET", f"2.1/unity-catalog/tables/{orders}"),
        ("POST", "2.1/unity-catalog/temporary-table-credentials"),
    ], asked
    # the catalog from the environment, as a Databricks job or a Databricks Connect user has it
    os.environ.update(uc.environment())
    try:
        with server.authenticated(), warnings.catch_warnings():
            warnings.simplefilter("error")
            by_env = read(orders.split(".", 1)[1], server).compute()  # schema.table: the session's catalog
    finally:
        for k in uc.environment():
            os.environ.pop(k)
    assert plain(ordered(by_env)).equals(sparks(spark, orders))


def test_random_filters_through_vending_give_sparks_rows(spark, server, uc, client, workspace, tmp_path_factory):
    confs = {"spark.sql.session.timeZone": ZONE, **delta_tables.NO_REBASE}  # as test_delta_filters.py's session
    before = {k: spark.conf.get(k, None) for k in confs}
    for k, v in confs.items():
        spark.conf.set(k, v)
    try:
        filters_through_vending(spark, server, uc, workspace, str(tmp_path_factory.mktemp("uc-filters") / "t"))
    finally:
        for k, v in before.items():
            spark.conf.unset(k) if v is None else spark.conf.set(k, v)


def filters_through_vending(spark, server, uc, workspace, path: str) -> None:
    name = register(spark, server, uc, filters_table(spark, path), "filters")
    rng = random.Random(67)
    cases = [random_filters(rng) for _ in range(FILTER_CASES * 2)]
    ansi = delta_read.session_ansi(spark)
    cases = [f for f in cases if not refused(f, ansi)][:FILTER_CASES]
    conditions = [sql_condition(f) for f in cases]
    columns = ", ".join(f"({c}) AS c{k}" for k, c in enumerate(conditions))
    rows = spark.sql(f"SELECT id, {columns} FROM {name}").collect()
    want = [{r["id"] for r in rows if r[f"c{k}"] is True} for k in range(len(cases))]
    differ = []
    with server.authenticated():
        for k, filters in enumerate(cases):
            got = set(read(name, server, catalog=workspace, filters=filters, columns=["id"]).compute()["id"])
            if got != want[k]:
                differ.append(f"case {k}: {filters!r} ({conditions[k]}): {len(got)} rows, Spark {len(want[k])}")
    assert not differ, "\n".join(differ)
    assert sum(bool(w) for w in want) > len(cases) // 4, "too few filters matched rows"


REFUSALS = [
    # (what the catalog says, setup, the warning's words, what via="files" asks for)
    ("no EXTERNAL USE SCHEMA", {"schema": "spark_catalog.uc_locked"}, "PERMISSION_DENIED", "EXTERNAL USE SCHEMA on"),
    (
        "a row filter",
        {"row_filter": "spark_catalog.uc_sales.only_eu"},
        "row filter (spark_catalog.uc_sales.only_eu)",
        None,
    ),
    ("a column mask", {"columns": COLUMNS, "masked": ["g"]}, "column g is masked", None),
    ("a view", {"table_type": "VIEW"}, "it is a view (VIEW)", None),
    ("catalog-managed commits", {"properties": {"delta.feature.catalogManaged": "supported"}}, "catalogManaged", None),
    ("a name the catalog lacks", {"absent": True}, "TABLE_DOES_NOT_EXIST", None),
]


@pytest.mark.parametrize("what,setup,words,ask", REFUSALS, ids=[r[0] for r in REFUSALS])
def test_a_refusal_reads_through_spark_with_one_line(
    spark, server, uc, client, workspace, orders, what, setup, words, ask
):
    setup = dict(setup)
    schema = setup.pop("schema", SCHEMA)
    absent = setup.pop("absent", False)
    name = f"{schema}.refused_" + re.sub(r"\W+", "_", what)
    spark.sql(f"CREATE SCHEMA IF NOT EXISTS {schema}")
    location = spark.sql(f"DESCRIBE DETAIL {orders}").collect()[0]["location"]
    spark.sql(f"DROP TABLE IF EXISTS {name}")
    spark.sql(f"CREATE TABLE {name} USING delta LOCATION '{location}'")
    if not absent:
        uc.add_table(name, server.url("uc", "nowhere"), **setup)
    with server.authenticated(), pytest.warns(UserWarning) as caught:
        got = read(name, server, catalog=workspace).compute()
    lines = [str(w.message) for w in caught if "through Spark" in str(w.message)]
    assert len(lines) == 1 and lines[0].startswith(f"spark-dask: reading {name} through Spark: "), lines
    assert words in lines[0], lines[0]
    assert plain(ordered(got)).equals(sparks(spark, name)), "Spark's rows"
    with server.authenticated(), pytest.raises(spark_dask.DeltaError) as refusal:
        read(name, server, catalog=workspace, via="files")
    message = str(refusal.value)
    assert message.startswith(f"spark-dask: via='files' cannot read {name}: ") and words in message, message
    assert (f"Ask for {ask}" in message) if ask else ("Read it with via='auto' or 'spark'" in message), message


def test_external_access_off_and_a_wrong_token(spark, server, uc, client, workspace, orders):
    from databricks.sdk import WorkspaceClient

    uc.external_access = False
    try:
        with server.authenticated(), pytest.raises(spark_dask.DeltaError, match="Ask for External data access"):
            read(orders, server, catalog=workspace, via="files")
    finally:
        uc.external_access = True
    wrong = WorkspaceClient(host=uc.url, token="dapi-wrong")
    with server.authenticated(), pytest.warns(UserWarning, match="did not accept this process's credentials"):
        got = read(orders, server, catalog=wrong).compute()
    assert plain(ordered(got)).equals(sparks(spark, orders))


def test_without_a_catalog_names_go_through_spark_silently(spark, server, client, orders, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.databrickscfg
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = read(orders, server).compute()
        also = read(orders, server, catalog=False).compute()
    assert plain(ordered(got)).equals(sparks(spark, orders)) and plain(ordered(also)).equals(sparks(spark, orders))
    with pytest.raises(spark_dask.DeltaError, match="no Unity Catalog is configured"):
        read(orders, server, via="files")


def renewers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("spark-dask-renew-")]


def test_credentials_are_renewed_before_they_expire(spark, server, uc, client, workspace, orders):
    import s3fs

    uc.lifetime = 6.0
    try:
        vended = len(uc.vended)
        with server.authenticated():
            ddf = read(orders, server, catalog=workspace)
            first = uc.vended[vended]
            assert plain(ordered(ddf.compute())).equals(sparks(spark, orders))
            assert wait_until(lambda: first["access_key_id"] in uc.revoked, timeout=30), "never revoked"
            store = s3fs.S3FileSystem(
                key=first["access_key_id"],
                secret=first["secret_access_key"],
                token=first["session_token"],
                skip_instance_cache=True,
                **server.endpoint_options,
            )
            location = uc.get_table(orders)["storage_location"]
            with pytest.raises(PermissionError):  # expired: the store refuses them for real
                store.cat(f"{location}/_delta_log/{0:020d}.json")
            again = ddf.compute()  # with the renewed credentials
        assert plain(ordered(again)).equals(sparks(spark, orders))
        assert len(uc.vended) - vended >= 2, uc.vended[vended:]
        assert renewers(), "no renewer while the frame lives"
        del ddf
        gc.collect()
        assert wait_until(lambda: not renewers(), timeout=10), renewers()  # the frame gone: no more renewals
    finally:
        uc.lifetime = 3600.0


def logged_here(record: logging.LogRecord, uc) -> bool:
    """Whether a log record of this process is in the leak check: any level of
    spark_dask's, the databricks-sdk's, distributed's and dask's loggers, INFO and above
    of every other, none of the stand-in catalog's threads (the catalog's side).
    botocore's DEBUG log shows each signed request's canonical form, session token
    included, for every user of the AWS SDK: not ours to hide."""
    if record.threadName in uc.threads:
        return False
    return record.levelno >= logging.INFO or record.name.split(".")[0] in (
        "spark_dask",
        "databricks",
        "distributed",
        "dask",
    )


def test_a_worker_meeting_expired_credentials_waits_for_the_renewed_ones(
    spark, server, uc, client, workspace, orders, monkeypatch
):
    """The driver late (it renews 2 s after the expiry, not before): the store refuses
    the expired credentials the workers get first, and they wait for the renewed ones."""
    from spark_dask.delta import vending

    monkeypatch.setattr(vending, "renew_in", lambda expires, vended_at, now: max(0.5, expires + 2 - now))
    uc.lifetime = 4.0
    try:
        vended = len(uc.vended)
        with server.authenticated():
            ddf = read(orders, server, catalog=workspace)
            first = uc.vended[vended]["access_key_id"]
            assert wait_until(lambda: first in uc.revoked, timeout=30), "never revoked"
            assert len(uc.vended) == vended + 1, "renewed before the expiry"
            got = ddf.compute()  # the workers meet the revoked credentials first
        assert len(uc.vended) >= vended + 2
        assert plain(ordered(got)).equals(sparks(spark, orders))
        del ddf
        gc.collect()
        assert wait_until(lambda: not renewers(), timeout=10), renewers()
    finally:
        uc.lifetime = 3600.0


def test_a_credential_revoked_before_its_expiry_is_a_refusal(spark, server, uc, client, workspace, orders):
    vended = len(uc.vended)
    with server.authenticated():
        ddf = read(orders, server, catalog=workspace)
        uc.revoke(uc.vended[vended]["access_key_id"])  # an hour before its expiry
        with pytest.raises(spark_dask.DeltaError, match="cannot read the Delta table .*: the store refused it"):
            ddf.compute()


def leases(ddf) -> list:
    """The credential leases the frame's read holds (in its expression's operands)."""
    from spark_dask.delta import stores

    found, todo = [], [op for node in ddf.expr.walk() for op in node.operands]
    while todo:
        value = todo.pop()
        if isinstance(value, stores.Lease):
            found.append(value)
        elif isinstance(value, dict):
            todo += list(value.values())
        elif isinstance(value, (list, tuple)):
            todo += list(value)
    return found


def test_a_frame_computed_where_its_credentials_are_not_is_one_line(
    spark, server, uc, client, workspace, orders, monkeypatch
):
    from distributed import Variable

    from spark_dask.delta import stores

    monkeypatch.setattr(stores.Lease, "WAIT", 2.0)  # shipped by value: the workers' too
    with server.authenticated():
        ddf = read(orders, server, catalog=workspace)
        (lease,) = set(leases(ddf))
        Variable(lease.name, client=client).delete()  # as on another scheduler
        with pytest.raises(spark_dask.DeltaError, match="not on this Dask scheduler"):
            ddf.compute()


def test_no_token_or_credential_shows(spark, server, uc, client, workspace, orders, caplog):
    caplog.set_level(logging.DEBUG)
    vended = len(uc.vended)
    with server.authenticated():
        ddf = read(orders, server, catalog=workspace, filters=[("id", ">", 10)])
        ddf.compute()
        with pytest.warns(UserWarning) as caught:  # a refusal's line
            read(orders, server, catalog=type(workspace)(host=uc.url, token="dapi-wrong")).compute()
    secrets = [uc.token, "dapi-wrong"]
    for v in uc.vended[vended:]:
        secrets += [v["secret_access_key"], v["session_token"], v["access_key_id"]]
    ours = "\n".join(r.getMessage() for r in caplog.records if logged_here(r, uc))
    graph = dict(ddf.dask)
    seen = {
        "the pickled graph": cloudpickle.dumps(graph),
        "the task keys": repr(list(graph)).encode(),
        "the frame's repr": (repr(ddf) + repr(ddf.expr)).encode(),
        "the warnings": " ".join(str(w.message) for w in caught).encode(),
        "this process's log": ours.encode(),
        "the workers' logs": pickle.dumps(client.get_worker_logs()),
        "the scheduler's log": pickle.dumps(client.get_scheduler_logs()),
    }
    for where, data in seen.items():
        for secret in secrets:
            which = [
                f"{r.name} {r.threadName}: {r.getMessage()[:200]}"
                for r in caplog.records
                if secret in r.getMessage() and r.threadName not in uc.threads
            ]
            assert secret.encode() not in data, f"a credential in {where}: {which[:3]}"
    assert time.time() < max(v["expiration_time"] for v in uc.vended[vended:]) / 1000  # they were live
