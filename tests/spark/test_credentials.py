"""Databricks credentials for the workers (``databricks_credentials=True``): where they
come from, the refusals, and that they reach the workers' environment and nothing else.

Faked here, because they exist only on a Databricks runtime: the driver's
``DATABRICKS_RUNTIME_VERSION``, and the notebook context behind Databricks' driver entry
point (a stand-in ``dbruntime`` module whose context returns Scala-like ``Option``
objects, as py4j shows them). The Spark application, the cluster and its workers are real.
"""

from __future__ import annotations

import doctest
import glob
import json
import os
import secrets
import sys
import time
import types
import urllib.request
import warnings

import dask.config
import pytest

import spark_dask
from spark_dask.errors import PlanError
from spark_dask.events import Events
from spark_dask.executor.gang_task import _worker_env
from spark_dask.gangs.maker import WorkerCredentials
from spark_dask.spark import databricks as db
from tests.support.parts import parts_of
from tests.support.spark import assert_no_leftovers, make_spark, stop_spark
from tests.support.task_specs import cluster_options, make_spec

DRIVER = {db.RUNTIME_ENV: "15.4"}
API_URL = "https://eastus-c3.azuredatabricks.net"
CREDENTIAL_VARS = (db.HOST_ENV, db.TOKEN_ENV, db.CLIENT_ID_ENV, db.CLIENT_SECRET_ENV)


def fresh_token() -> str:
    """A token no text of the test machine holds by chance (a PAT's shape)."""
    return "dapi" + secrets.token_hex(16)


class FakeOption:
    """A Scala ``Option[String]`` as py4j shows it: ``isDefined()``, and ``get()`` that
    fails on an empty one (``None.get``)."""

    def __init__(self, value: str | None):
        self.value = value

    def isDefined(self) -> bool:
        return self.value is not None

    def get(self) -> str:
        if self.value is None:
            raise RuntimeError("java.util.NoSuchElementException: None.get")
        return self.value


class FakeEntryPoint:
    """The entry point's notebook context (``getDbutils().notebook().getContext()``,
    ``apiUrl()``, ``apiToken()``) and its job-group registration."""

    def __init__(self, url: str | None, token: str | None):
        self.url, self.token = url, token
        self.reads = 0  # contexts read
        self.groups: list[str] = []
        self.broken: Exception | None = None  # raised by getContext() when set

    def _context(self):
        if self.broken is not None:
            raise self.broken
        self.reads += 1
        return types.SimpleNamespace(apiUrl=lambda: FakeOption(self.url), apiToken=lambda: FakeOption(self.token))

    def getDbutils(self):
        return types.SimpleNamespace(notebook=lambda: types.SimpleNamespace(getContext=self._context))

    def registerBackgroundSparkJobGroup(self, group):
        self.groups.append(group)


@pytest.fixture
def notebook(monkeypatch):
    """A stand-in ``dbruntime`` whose entry point has a notebook context with a token;
    the driver's environment holds no credentials of its own."""
    ep = FakeEntryPoint(API_URL, fresh_token())
    initializer = types.SimpleNamespace(get_spark_entry_point=lambda: ep)
    module = types.ModuleType("dbruntime")
    module.UserNamespaceInitializer = types.SimpleNamespace(getOrCreate=lambda: initializer)
    monkeypatch.setitem(sys.modules, "dbruntime", module)
    for key in CREDENTIAL_VARS:
        monkeypatch.delenv(key, raising=False)
    return ep


def never_called():
    raise AssertionError("the notebook context was read although the environment had credentials")


# ----------------------------------------------------------------- sources (pure)


def test_doctests_of_the_databricks_module():
    result = doctest.testmod(db)
    assert result.attempted > 5 and result.failed == 0


def test_the_drivers_token_pair_comes_first():
    env = {**DRIVER, db.HOST_ENV: "https://adb-1.2.azuredatabricks.net", db.TOKEN_ENV: "dapi-env"}
    assert db.worker_credentials(env, never_called) == {
        db.HOST_ENV: "https://adb-1.2.azuredatabricks.net",
        db.TOKEN_ENV: "dapi-env",
    }


def test_the_drivers_oauth_client_is_passed_as_a_triple():
    env = {**DRIVER, db.HOST_ENV: "https://h", db.CLIENT_ID_ENV: "sp-id", db.CLIENT_SECRET_ENV: "sp-secret"}
    assert db.worker_credentials(env, never_called) == {
        db.HOST_ENV: "https://h",
        db.CLIENT_ID_ENV: "sp-id",
        db.CLIENT_SECRET_ENV: "sp-secret",
    }
    # a token beside the client: the token pair, not a mixture of both
    assert db.env_credentials({**env, db.TOKEN_ENV: "t"}) == {db.HOST_ENV: "https://h", db.TOKEN_ENV: "t"}


@pytest.mark.parametrize(
    "partial",
    [{db.TOKEN_ENV: "t"}, {db.HOST_ENV: "https://h"}, {db.HOST_ENV: "https://h", db.CLIENT_ID_ENV: "id"},
     {db.HOST_ENV: "", db.TOKEN_ENV: "t"}],
)  # fmt: skip
def test_an_incomplete_environment_falls_back_to_the_notebook_context(partial):
    ep = FakeEntryPoint(API_URL, "dapi-notebook")
    found = db.worker_credentials({**DRIVER, **partial}, lambda: ep)
    assert found == {db.HOST_ENV: API_URL, db.TOKEN_ENV: "dapi-notebook"}
    assert ep.reads == 1


def test_the_notebook_context_through_the_driver_entry_point(notebook):
    # the module's own entry_point() finds the stand-in dbruntime
    assert db.worker_credentials(DRIVER) == {db.HOST_ENV: API_URL, db.TOKEN_ENV: notebook.token}
    assert notebook.reads == 1


def test_off_databricks_only_the_environment_is_a_source():
    token = fresh_token()
    # Databricks Connect from a laptop, spark-submit: the variables of this process
    assert db.worker_credentials({db.HOST_ENV: "https://h", db.TOKEN_ENV: token}, never_called) == {
        db.HOST_ENV: "https://h", db.TOKEN_ENV: token}  # fmt: skip
    with pytest.raises(PlanError, match=db.RUNTIME_ENV) as e:  # no notebook context to read there
        db.worker_credentials({db.HOST_ENV: "https://h", db.CLIENT_ID_ENV: "app"}, never_called)
    assert "found no Databricks credentials" in str(e.value) and "databricks_credentials=True" in str(e.value)


@pytest.mark.parametrize(
    "case, reason",
    [("no entry point", "no Databricks driver entry point"), ("empty token", "has no API URL and token"),
     ("empty url", "has no API URL and token"), ("context fails", "could not be read (RuntimeError)")],
)  # fmt: skip
def test_no_source_names_what_was_looked_for_and_never_a_token(case, reason):
    token = fresh_token()
    ep = FakeEntryPoint(API_URL, token)
    if case == "empty token":
        ep.token = None
    elif case == "empty url":
        ep.url = None
    elif case == "context fails":
        ep.broken = RuntimeError(f"py4j said: bad context holding {token}")
    env = {**DRIVER, db.HOST_ENV: "https://h-4242", db.CLIENT_ID_ENV: "sp-4242"}  # incomplete
    with pytest.raises(PlanError) as e:
        db.worker_credentials(env, lambda: None if case == "no entry point" else ep)
    msg = str(e.value)
    assert reason in msg
    for looked_for in CREDENTIAL_VARS:
        assert looked_for in msg
    assert "notebook context" in msg and "{{secrets/<scope>/<key>}}" in msg
    assert token not in msg and "4242" not in msg and API_URL not in msg  # names, never values


# ----------------------------------------------------------------- the spec and the worker's environment


def test_the_task_spec_repr_has_no_credential():
    token = fresh_token()
    spec = make_spec(credentials={db.HOST_ENV: API_URL, db.TOKEN_ENV: token}, env={"A": "1"})
    assert spec.credentials[db.TOKEN_ENV] == token
    assert token not in repr(spec) and API_URL not in repr(spec)
    assert "env={'A': '1'}" in repr(spec)  # the repr shows fields: the check above can fail
    assert make_spec().credentials == {}


def test_the_workers_environment_gets_the_credentials_and_env_wins():
    creds = {db.HOST_ENV: API_URL, db.TOKEN_ENV: "dapi-x"}
    me = {"executor_id": "0", "executor": "h:0", "host": "h", "partition": 0, "gang": 0, "task": 0}
    w = {"name": "w0", "gpu": None}
    env = _worker_env(make_spec(credentials=creds), me, w, "/tmp/wd", ["python"], [])
    assert env[db.HOST_ENV] == API_URL and env[db.TOKEN_ENV] == "dapi-x"
    assert "dapi-x" not in env["SPARK_DASK_FACTS"]
    env = _worker_env(make_spec(credentials=creds, env={db.HOST_ENV: "https://mine"}), me, w, "/tmp/wd", ["python"], [])
    assert env[db.HOST_ENV] == "https://mine" and env[db.TOKEN_ENV] == "dapi-x"  # env= names it: env= wins


def _credentials(on: bool) -> WorkerCredentials:
    return WorkerCredentials(cluster_options(databricks_credentials=on), Events([]))


def test_each_gang_reads_the_credentials_again(notebook, monkeypatch):
    monkeypatch.setenv(db.RUNTIME_ENV, "15.4")
    credentials = _credentials(True)
    first = notebook.token
    assert credentials.read() == {db.HOST_ENV: API_URL, db.TOKEN_ENV: first}
    notebook.token = fresh_token()  # the notebook's token was renewed
    assert credentials.read("start")[db.TOKEN_ENV] == first and notebook.reads == 1  # the start's gangs: that read
    assert credentials.read("relaunch")[db.TOKEN_ENV] == notebook.token
    assert notebook.reads == 2
    assert _credentials(False).read() == {} and notebook.reads == 2  # off: nothing is read


def test_a_later_gang_keeps_the_last_credentials_when_none_can_be_read(notebook, monkeypatch):
    monkeypatch.setenv(db.RUNTIME_ENV, "15.4")
    credentials = _credentials(True)
    token = notebook.token
    notebook.broken = RuntimeError("no context yet")
    with pytest.raises(PlanError):
        credentials.read()  # the start: refused
    notebook.broken = None
    assert credentials.read()[db.TOKEN_ENV] == token
    notebook.broken = RuntimeError(f"gone, {token}")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert credentials.read("scale")[db.TOKEN_ENV] == token
    assert [str(w.message) for w in caught] == [credentials.events.logs[-1][1]]
    assert "could not be read again for the workers of a scale gang" in caught[0].message.args[0]
    assert token not in caught[0].message.args[0]


# ----------------------------------------------------------------- a real cluster


def _texts_under(directory: str) -> dict[str, str]:
    out = {}
    for path in glob.glob(os.path.join(directory, "**", "*"), recursive=True):
        if os.path.isfile(path):
            with open(path, "rb") as f:
                out[path] = f.read().decode("utf-8", "replace")
    return out


def _rest(ui: str, path: str) -> str:
    with urllib.request.urlopen(f"{ui}/api/v1/applications/{path}", timeout=10) as r:
        return r.read().decode()


def _leaks(texts: dict[str, str], tokens) -> list[str]:
    return [f"{where} holds {token[:8]}..." for where, text in texts.items() for token in tokens if token in text]


@pytest.mark.spark
@pytest.mark.timeout(150)
def test_the_workers_get_the_notebook_credentials_and_nothing_shows_them(notebook, monkeypatch, capfd, tmp_path):
    """A cluster with ``databricks_credentials=True`` on a faked Databricks driver: the
    workers' Dask tasks read the notebook's host and token, a gang added after the
    token changed gets the new one, and neither token is anywhere else: printed output
    (driver, JVM), logs, widget, repr, spark_info, connection files, the named-cluster
    entry, the Spark application's jobs, stages and properties (REST API and event log)
    or the executors' logs."""
    events_dir = tmp_path / "events"
    events_dir.mkdir()
    spark = make_spark(
        "local-cluster[2,1,1024]",
        **{"spark.ui.enabled": "true", "spark.ui.port": "0", "spark.eventLog.enabled": "true",
           "spark.eventLog.dir": f"file://{events_dir}", "spark.eventLog.compress": "false"},
    )  # fmt: skip
    tokens = [notebook.token]
    texts: dict[str, str] = {}
    try:
        app, ui = spark.sparkContext.applicationId, spark.sparkContext.uiWebUrl
        t0 = time.monotonic()
        with pytest.raises(PlanError, match=db.RUNTIME_ENV):  # off Databricks, no variables: refused at once
            spark_dask.start(spark, n_workers=1, databricks_credentials=True, progress=False)
        monkeypatch.setenv(db.RUNTIME_ENV, "15.4")
        notebook.token = None
        with pytest.raises(PlanError, match="found no Databricks credentials") as e:  # no source
            spark_dask.start(spark, n_workers=1, databricks_credentials=True, progress=False)
        assert time.monotonic() - t0 < 15 and json.loads(_rest(ui, f"{app}/jobs")) == []  # no Spark job
        texts["the refusal"] = str(e.value)
        notebook.token = tokens[0]
        reads = notebook.reads

        with dask.config.set({"spark-dask.state-dir": str(tmp_path / "state")}):
            client = spark_dask.start(spark, n_workers=1, databricks_credentials=True, progress=False)
        cluster = client.cluster
        with client:
            seen = client.submit(lambda: (os.environ.get("DATABRICKS_HOST"), os.environ.get("DATABRICKS_TOKEN")))
            assert seen.result() == (API_URL, tokens[0])
            assert notebook.reads == reads + 1  # once, at the start's check: its gang uses that read

            tokens.append(fresh_token())
            notebook.token = tokens[1]  # renewed: the next gang gets the new one
            cluster.scale(2)
            client.wait_for_workers(2, timeout=60)
            found = client.run(lambda: os.environ.get("DATABRICKS_TOKEN"))
            assert sorted(found.values()) == sorted(tokens), "one worker per gang, each with its gang's token"

            paths = os.listdir(os.path.dirname(cluster.write_connection(str(tmp_path / "conn"))))
            texts.update(_texts_under(str(tmp_path / "conn")))
            assert len(paths) >= 3
            entry = _texts_under(parts_of(cluster).entry.directory)
            assert entry and any(cluster.tag in t for t in entry.values())
            texts.update(entry)
            logs = cluster.get_logs()
            texts["get_logs()"] = "\n".join(str(v) for v in logs.values())
            assert "Spark tasks" in logs and cluster.tag in texts["get_logs()"]
            texts["_repr_html_()"] = cluster._repr_html_()
            assert parts_of(cluster).gangs[-1].launcher.spec.credentials[db.TOKEN_ENV] == tokens[1]
            texts["repr"] = (
                repr(cluster)
                + repr(parts_of(cluster).makers["default"].spec)
                + repr(parts_of(cluster).gangs[-1].launcher.spec)
            )
            texts["spark_info()"] = json.dumps(cluster.spark_info(), default=str)
            jobs = _rest(ui, f"{app}/jobs")
            assert cluster.tag in jobs and "spark-dask" in jobs  # the gangs' descriptions and groups are here
            texts["REST jobs"] = jobs
            texts["REST stages"] = _rest(ui, f"{app}/stages?details=true")
            texts["REST environment"] = _rest(ui, f"{app}/environment")
            texts["Spark conf"] = repr(spark.sparkContext.getConf().getAll())
            keys = ("spark.job.description", "spark.jobGroup.id", "spark.job.tags")
            texts["local properties"] = repr([spark.sparkContext.getLocalProperty(k) for k in keys])
        assert cluster.status.name == "closed"
        texts["get_logs() after close"] = "\n".join(str(v) for v in cluster.get_logs().values())
        texts["task rows"] = json.dumps(cluster.task_rows, default=str)
        assert cluster.task_rows and all(r["workers"] for r in cluster.task_rows)  # with log tails
        assert_no_leftovers(spark, cluster)
        work = os.path.join(os.environ.get("SPARK_HOME") or pyspark_dir(), "work", app)
        executor_logs = _texts_under(work)
        assert executor_logs, f"no executor logs under {work}"
        texts.update(executor_logs)
    finally:
        stop_spark(spark)
    event_logs = _texts_under(str(events_dir))
    assert event_logs and any(cluster.tag in t for t in event_logs.values())  # the jobs' properties are there
    texts.update(event_logs)
    out, err = capfd.readouterr()
    texts["stdout"], texts["stderr"] = out, err
    assert not _leaks(texts, tokens), _leaks(texts, tokens)


def pyspark_dir() -> str:
    """Where the pip-installed pyspark is: ``local-cluster`` executors work under its ``work/``."""
    import pyspark

    return os.path.dirname(pyspark.__file__)
