"""``spark-dask`` CLI: help, info (starts nothing), run (in-process and under spark-submit)."""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import subprocess
import sys
import textwrap
import time

import pytest
from click.testing import CliRunner

from spark_dask import cli
from spark_dask.commands.run import client_config, exec_target, exit_code, run_script
from tests.support.paths import ROOT
from tests.support.processes import no_workers_left
from tests.support.spark import active_jobs, submit_confs

pytestmark = pytest.mark.core


SPARK_SUBMIT = os.path.join(os.path.dirname(sys.executable), "spark-submit")

CLIENT_SCRIPT = textwrap.dedent(
    """
    import sys
    from distributed import Client
    from dask.distributed import get_client
    from pyspark.sql import SparkSession

    c = Client()
    names = sorted(w["name"] for w in c.scheduler_info()["workers"].values())
    print("CLIENT", c.scheduler.address, names, flush=True)
    print("GET_CLIENT", get_client().scheduler.address, flush=True)
    print("RESULT", c.submit(sum, [1, 2, 3]).result(), flush=True)
    print("ARGS", sys.argv[1:], flush=True)
    if "--spark" in sys.argv:
        print("SPARK", SparkSession.builder.getOrCreate().range(50).count(), flush=True)
    if "--leave-open" not in sys.argv:  # a script may well forget to close its client
        c.close()
    sys.exit(int(sys.argv[1]))
    """
)


def test_help_lists_every_start_option():
    out = CliRunner().invoke(cli.main, ["run", "--help"]).output
    for opt in ("--n-workers", "--worker ", "--threads-per-worker", "--memory-limit", "--worker-option",
                "--worker-command", "--timeout", "--tls / --no-tls", "--dashboard / --no-dashboard",
                "--progress / --no-progress", "--task-profile", "--env", "--silence-logs", "--master",
                "--conf", "-m, --module"):  # fmt: skip
        assert opt in out, opt
    assert "info" in CliRunner().invoke(cli.main, ["--help"]).output


def test_option_parsing():
    kw = cli._start_kwargs(
        {"n_workers": 2, "worker_options": {"nanny": False}, "env": {}, "tls": None, "silence_logs": "false"}
    )
    assert kw == {"n_workers": 2, "worker_options": {"nanny": False}, "silence_logs": False}
    assert cli.typed_key_values(None, None, ["rmm_pool_size=10GB", "nanny=false"]) == {
        "rmm_pool_size": "10GB",
        "nanny": False,
    }
    assert [exit_code(c) for c in (None, 0, 3, True, 256, -1)] == [0, 0, 3, 1, 0, 255]


def test_exec_target_exit_codes(tmp_path, capsys):
    ok = tmp_path / "ok.py"
    ok.write_text("import sys; assert sys.argv[1:] == ['a', '--b']\n")
    assert exec_target(str(ok), ["a", "--b"]) == 0
    (tmp_path / "bad.py").write_text("raise RuntimeError('boom')\n")
    assert exec_target(str(tmp_path / "bad.py"), []) == 1
    assert "RuntimeError: boom" in capsys.readouterr().err
    (tmp_path / "msg.py").write_text("raise SystemExit('failed politely')\n")
    assert exec_target(str(tmp_path / "msg.py"), []) == 1
    assert exec_target(str(tmp_path / "missing.py"), []) == 2
    assert exec_target("json.tool", ["--help"], module=True) == 0


def test_dask_cli_entry_point():
    eps = importlib.metadata.entry_points(group="dask_cli")
    spark = [ep for ep in eps if ep.name == "spark"]
    if not spark or spark[0].value != "spark_dask.cli:main":
        pytest.skip("spark-dask is not installed (pip install -e .) in this environment")
    out = subprocess.run([sys.executable, "-m", "dask", "spark", "--help"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "run" in out.stdout and "info" in out.stdout


def test_the_documented_script_is_the_command_line():
    """A Databricks "Python script" task and spark-submit run the file the docs name,
    ``spark_dask/cli.py`` of the installed package: it stays that file (a package
    ``spark_dask/cli/`` would leave such a job without its script)."""
    assert os.path.relpath(cli.__file__, ROOT) == os.path.join("spark_dask", "cli.py")
    with open(os.path.join(ROOT, "docs", "databricks.md")) as f:
        assert "script `.../site-packages/spark_dask/cli.py`" in f.read()


# -------------------------------------------------------------------------- real Spark


@pytest.mark.spark
@pytest.mark.timeout(120)
def test_info_plans_without_starting_anything(spark):
    before = spark.sparkContext.statusTracker().getJobIdsForGroup(None)
    result = CliRunner().invoke(cli.main, ["info", "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["executors"] == 2 and out["task slots"] == 2
    assert out["workers"] == 2 and out["worker kind"] == "cpu" and out["threads per worker"] == 1
    assert out["memory per worker"].endswith("(auto)")
    # the gang holds both one-core executors: no slot left for Spark jobs, and said so
    assert out["free slots while running"] == 0
    assert "every task slot Spark jobs can use" in out["warnings"][0]
    assert spark.sparkContext.statusTracker().getJobIdsForGroup(None) == before
    assert not active_jobs(spark)
    bad = CliRunner().invoke(cli.main, ["info", "--n-workers", "5"])
    assert bad.exit_code == 1 and "needs 5 Spark task slots" in bad.output


@pytest.mark.spark
@pytest.mark.timeout(120)
def test_info_shows_the_worker_command(spark):
    """The command line each Spark task would start its Dask worker with (like
    dask-jobqueue's job_script()), in --json and in the text."""
    import shlex

    result = CliRunner().invoke(cli.main, ["info", "--json", "--n-workers", "1", "--threads-per-worker", "1",
                                           "--memory-limit", "1GiB"])  # fmt: skip
    assert result.exit_code == 0, result.output
    cmd = shlex.split(json.loads(result.output)["worker command"])
    assert cmd[:4] == ["<python>", "-m", "distributed.cli.dask_worker", "<scheduler-address>"]
    for flag, value in (("--nthreads", "1"), ("--memory-limit", str(2**30)), ("--death-timeout", "60"),
                        ("--tls-ca-file", "<ca.pem>")):  # fmt: skip
        assert cmd[cmd.index(flag) + 1] == value, (flag, cmd)
    assert "--nanny" in cmd and "--no-dashboard" in cmd
    text = CliRunner().invoke(cli.main, ["info", "--n-workers", "1"])
    assert text.exit_code == 0, text.output
    line = next(ln for ln in text.output.splitlines() if ln.startswith("worker command"))
    assert "<python> -m distributed.cli.dask_worker <scheduler-address> --name <name>" in line
    bad = CliRunner().invoke(cli.main, ["info", "--memory-limit", "lots"])
    assert bad.exit_code == 2 and "Error: spark-dask: memory_limit must be" in bad.output


@pytest.mark.spark
@pytest.mark.timeout(180)
def test_run_in_process_shares_session_and_config(spark, tmp_path, capfd):
    import dask.config

    script = tmp_path / "job.py"
    script.write_text(CLIENT_SCRIPT)
    code = run_script(str(script), ["4", "--spark"], spark=spark, n_workers=1, progress=False)
    assert code == 4
    out = capfd.readouterr()
    assert "CLIENT tls://" in out.out and "['spark-0']" in out.out
    assert "RESULT 6" in out.out and "SPARK 50" in out.out and "ARGS ['4', '--spark']" in out.out
    assert "Spark barrier job ended: yes" in out.err
    assert dask.config.get("scheduler-address", None) is None  # restored
    assert not active_jobs(spark) and no_workers_left(out.err)
    assert not spark.sparkContext._jsc.sc().isStopped()  # not ours to stop


def _spark_submit(tmp_path, exit_status: int) -> tuple[subprocess.CompletedProcess, float]:
    script = tmp_path / "job.py"
    script.write_text(CLIENT_SCRIPT)
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    cmd = [
        SPARK_SUBMIT, *submit_confs(), "--master", "local-cluster[2,1,1024]",
        "--conf", "spark.ui.enabled=false", "--conf", "spark.log.level=WARN",
        cli.__file__, "run", "--n-workers", "1", "--no-progress", str(script), str(exit_status), "--spark",
        "--leave-open",
    ]  # fmt: skip
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=280, env=env, cwd=str(tmp_path))
    return proc, time.monotonic() - t0


@pytest.mark.spark
@pytest.mark.timeout(300)
@pytest.mark.parametrize("status", [3])  # a non-zero status: exit 0 is the same path
def test_run_under_spark_submit(tmp_path, status):
    proc, _ = _spark_submit(tmp_path, status)
    output = proc.stdout + proc.stderr  # spark-submit merges the Python driver's stderr
    assert proc.returncode == status, output[-3000:]
    assert "CLIENT tls://" in output and "GET_CLIENT tls://" in output, output[-3000:]
    assert "RESULT 6" in output and "SPARK 50" in output
    assert f"Spark barrier job ended: yes); exit status {status}" in output
    assert no_workers_left(output)
    # the script's own Client, left open, is closed before the cluster: no reconnect
    # tracebacks after the exit status; no Spark console progress bar in the output
    for noise in ("Traceback", "ConnectionRefusedError", "CancelledError", "[Stage "):
        assert noise not in output, output[-3000:]


def test_client_config_keys_for_the_script():
    """The script's in-memory config: flat keys for ``dask.config.set`` (a nested
    ``distributed`` would replace all of distributed's settings), the same keys as the
    connection files' YAML (one ``connection.client_config``)."""
    from types import SimpleNamespace

    from spark_dask.connection import client_config as yaml_config

    def parts(dashboard_settings):  # what client_config reads of a cluster's parts
        return SimpleNamespace(dashboard_settings=dashboard_settings)

    plain = SimpleNamespace(scheduler_address="tcp://h:1", security=None, dashboard_link="http://h:2/status")
    assert client_config(plain, parts(None)) == {"scheduler-address": "tcp://h:1"}
    sec = SimpleNamespace(require_encryption=True, tls_ca_file="CA", tls_client_cert="CERT", tls_client_key="KEY")
    databricks = parts(SimpleNamespace(databricks=object()))
    tls = SimpleNamespace(scheduler_address="tls://h:1", security=sec,
                          dashboard_link="https://x/driver-proxy/o/1/c/{port}/status")  # fmt: skip
    want = {
        "scheduler-address": "tls://h:1",
        "distributed.comm.require-encryption": True,
        "distributed.comm.tls.ca-file": "CA",
        "distributed.comm.tls.client.cert": "CERT",
        "distributed.comm.tls.client.key": "KEY",
        "distributed.dashboard.link": "https://x/driver-proxy/o/1/c/{{port}}/status",
    }
    assert client_config(tls, databricks) == want
    assert list(client_config(tls, databricks)) == list(want)
    off_databricks = parts(SimpleNamespace(databricks=None))
    assert "distributed.dashboard.link" not in client_config(tls, off_databricks)
    nested = yaml_config("tls://h:1", {"ca": "CA", "cert": "CERT", "key": "KEY"}, "https://x/{p}")
    assert nested == {
        "scheduler-address": "tls://h:1",
        "distributed": {
            "comm": {"require-encryption": True, "tls": {"ca-file": "CA", "client": {"cert": "CERT", "key": "KEY"}}},
            "dashboard": {"link": "https://x/{{p}}"},
        },
    }


# ------------------------------------------------ the real entry point, in a subprocess


def _entry_point() -> list[str]:
    """The installed ``spark-dask`` console script (by absolute path, as a user runs
    ``.venv/bin/spark-dask``), else ``python -m spark_dask.cli``."""
    script = os.path.join(os.path.dirname(sys.executable), "spark-dask")
    return [script] if os.path.exists(script) else [sys.executable, "-m", "spark_dask.cli"]


def _cli(args, env=None, timeout=60, cwd=None) -> subprocess.CompletedProcess:
    """The CLI in a subprocess, this checkout's code first on ``sys.path``."""
    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([*_entry_point(), *args], capture_output=True, text=True, timeout=timeout,
                          env=env, cwd=cwd or ROOT, check=False)  # fmt: skip


# Output that only a started Spark (or a traceback) prints.
SPARK_NOISE = ("Traceback", "SparkContext", "log4j", "WARN", "jdk.incubator", "spark-dask: 0/")


def test_version():
    import spark_dask

    out = _cli(["--version"])
    assert out.returncode == 0 and out.stdout.strip() == f"spark-dask {spark_dask.__version__}", out


def test_top_level_help_wording():
    out = _cli(["--help"]).stdout
    assert "``" not in out and "'dask spark'" in out, out
    assert "dynamic allocation" in out and "one Spark barrier stage" not in out, out


@pytest.mark.parametrize(
    "args, env, message",
    [
        (["run", "--master", "local[2]", "--n-worker", "2", "examples/job_task.py"], {},
         "No such option '--n-worker'. (Did you mean one of: '--n-workers'"),
        (["run", "--master", "local[2]", "no-such-job.py", "--rows", "1"], {}, "Error: no such script: no-such-job.py"),
        (["run", "-m", "no_such_module_xyz"], {}, "Error: no such module: no_such_module_xyz"),
        (["run", "--memory-limit", "lots", "examples/job_task.py"], {}, "Error: spark-dask: memory_limit must be 'auto'"),
        (["info", "--memory-limit", "lots"], {}, "Error: spark-dask: memory_limit must be 'auto'"),
        (["info"], {"DASK_SPARK_DASK__MEMORY_LIMIT": "lots"}, "Error: spark-dask: memory_limit must be 'auto'"),
        # a bare number is bytes in Dask, MiB in Spark: refused below what a worker needs, the intent named
        (["serve", "--memory-limit", "512"], {}, "was read as 512 B per Dask worker"),
        (["run", "--memory-limit", "512", "examples/job_task.py"], {}, "Did you mean memory_limit='512MiB'?"),
        (["run", "examples/job_task.py"], {"DASK_SPARK_DASK__TIMEOUT": "soon"}, "Error: spark-dask: timeout must be seconds"),
    ],
)  # fmt: skip
def test_usage_errors_before_anything_starts(args, env, message):
    """A mistyped option, a missing script, a bad value (flag or config): click's
    "Error: ..." with exit status 2, before a SparkSession exists (no Spark output)."""
    t0 = time.monotonic()
    out = _cli(args, env=dict(os.environ, **env))
    took = time.monotonic() - t0
    assert out.returncode == 2, out
    assert message in out.stderr, out.stderr
    for noise in SPARK_NOISE:
        assert noise not in out.stdout + out.stderr, (noise, out.stderr, took)
    assert out.stderr.count("\n") <= 4, out.stderr


def test_misspelled_config_keys_are_named():
    """``DASK_SPARK_DASK__N_WORKER`` (a typo of n-workers) and a nested ``rapids.*``
    typo are said with the close match; the command still goes on (here to a usage
    error, so nothing starts)."""
    env = dict(os.environ, DASK_SPARK_DASK__N_WORKER="1", DASK_SPARK_DASK__RAPIDS__DASK_FRACTON="0.5")
    out = _cli(["info", "--memory-limit", "lots"], env=env)
    assert out.returncode == 2, out
    assert (
        "spark-dask: unknown config key spark-dask.n-worker (did you mean spark-dask.n-workers?); it is ignored"
        in out.stderr
    ), out.stderr
    assert "spark-dask.rapids.dask-fracton (did you mean spark-dask.rapids.dask-fraction?)" in out.stderr
    assert "Traceback" not in out.stderr


def test_unknown_config_keys_warn_once_per_key(monkeypatch):
    import warnings

    import dask.config

    from spark_dask import options
    from spark_dask.options import resolving

    monkeypatch.setattr(resolving, "_WARNED", set())
    given = {o.name: None for o in options.keyword_options() if o.config}
    with dask.config.set({"spark-dask.n-worker": 1, "spark-dask.rapids.rmm-pool": "1GB", "spark-dask.zzqqxx": 1}):
        with warnings.catch_warnings(record=True) as first:
            warnings.simplefilter("always")
            options.resolve(**given)
        with warnings.catch_warnings(record=True) as again:
            warnings.simplefilter("always")
            options.resolve(**given)
    said = sorted(str(w.message) for w in first)
    assert said == [
        "spark-dask: unknown config key spark-dask.n-worker (did you mean spark-dask.n-workers?); it is ignored",
        (
            "spark-dask: unknown config key spark-dask.rapids.rmm-pool (did you mean "
            "spark-dask.rapids.rmm-pool-size?); it is ignored"
        ),
        "spark-dask: unknown config key spark-dask.zzqqxx; it is ignored",
    ], said
    assert not again
    # the table's own keys, however spelled in the config (n_workers), are no typo
    with dask.config.set({"spark-dask.n_workers": 2, "spark-dask.worker-options": {"nanny": False}}):
        assert options.unknown_keys() == []


def _python_without_distributed(tmp_path) -> str:
    """A directory whose ``python3`` is the system Python, which lacks distributed."""
    system = "/usr/bin/python3"
    if not os.path.exists(system):
        pytest.skip("no /usr/bin/python3 here")
    if subprocess.run([system, "-c", "import distributed"], capture_output=True, check=False).returncode == 0:
        pytest.skip("/usr/bin/python3 has distributed: it cannot stand for a bare system Python")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "python3").symlink_to(system)
    (bindir / "python").symlink_to(system)
    return str(bindir)


@pytest.mark.spark
@pytest.mark.newest
@pytest.mark.timeout(300)
def test_documented_run_without_an_activated_venv(tmp_path):
    """docs/getting-started/local.md's command with the venv's spark-dask by absolute
    path, no venv activated: ``python3`` on PATH lacks distributed, and the local
    session's executors must get the command's own interpreter."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    env["PATH"] = _python_without_distributed(tmp_path) + os.pathsep + "/usr/bin:/bin"
    args = ["run", "--master", "local-cluster[2,1,1024]", "--n-workers", "1", "--no-progress",
            "examples/job_task.py", "--rows", "2000"]  # fmt: skip
    out = _cli(args, env=env, timeout=280)
    output = out.stdout + out.stderr
    assert out.returncode == 0, output[-3000:]
    assert "Spark barrier job ended: yes); exit status 0" in output, output[-3000:]
    assert "cannot import" not in output and "Traceback" not in output, output[-3000:]
    assert no_workers_left(output)


THREADS_SCRIPT = textwrap.dedent(
    """
    import json
    from distributed import Client
    from pyspark.sql import SparkSession
    from spark_dask.commands.info import describe

    workers = Client().scheduler_info()["workers"].values()
    print("THREADS", json.dumps(sorted(w["nthreads"] for w in workers)), flush=True)
    info = describe(SparkSession.builder.getOrCreate(), n_workers=3)  # what `info --json` prints
    print("INFO", json.dumps(info["threads per worker"]), flush=True)
    """
)


@pytest.mark.spark
@pytest.mark.newest
@pytest.mark.timeout(300)
def test_info_threads_agree_with_the_started_cluster(tmp_path):
    """3 workers on local-cluster[2,4,1024]: Spark puts two tasks on one executor (1
    thread each) and one alone (all 4 cores); info cannot know which executor gets
    which, so it gives the range and says why, instead of "4"."""
    script = tmp_path / "threads.py"
    script.write_text(THREADS_SCRIPT)
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    args = ["run", "--master", "local-cluster[2,4,1024]", "--n-workers", "3", "--no-progress", str(script)]
    out = _cli(args, env=env, timeout=280)
    output = out.stdout + out.stderr
    assert out.returncode == 0, output[-3000:]
    started = json.loads(re.search(r"^THREADS (.*)$", out.stdout, re.MULTILINE).group(1))
    said = json.loads(re.search(r"^INFO (.*)$", out.stdout, re.MULTILINE).group(1))
    assert started == [1, 1, 4], started
    assert said == "1-4 (depends on how Spark places the tasks on the executors)", said
    low, high = (int(x) for x in said.split(" ")[0].split("-"))
    assert low == min(started) and high == max(started)
    assert no_workers_left(output)


def test_gang_threads_follow_the_task_rule():
    """plan.gang_threads (info) against worker_threads per placement (the tasks)."""
    from spark_dask.capacity import ClusterFacts
    from spark_dask.plan import gang_threads, plan_gang

    def facts(executors, cores, **kw):
        return ClusterFacts(master="local-cluster", executors=executors, executor_cores=cores,
                            executor_memory=2**30, executor_gpus=0, task_cpus=1, task_gpus=0.0, **kw)  # fmt: skip

    two_by_four = facts(2, 4, slots=8)
    assert gang_threads(two_by_four, plan_gang(two_by_four, 3), None) == (1, 4)
    assert gang_threads(two_by_four, plan_gang(two_by_four, 3), 2) == (2, 2)  # threads_per_worker wins
    assert gang_threads(two_by_four, plan_gang(two_by_four, 8), None) == (1, 1)  # every slot taken
    # one task per executor: each alone, with all its executor's cores
    assert gang_threads(two_by_four, plan_gang(two_by_four, 2), None) == (4, 4)
    profiles = facts(2, 4, slots=8, task_profiles=True)  # the default: tasks of 3 CPUs, one per executor
    assert plan_gang(profiles).task_cpus == 3 and gang_threads(profiles, plan_gang(profiles), None) == (4, 4)
    one_core = facts(2, 1, slots=2)
    assert gang_threads(one_core, plan_gang(one_core, 2), None) == (1, 1)


@pytest.mark.spark
@pytest.mark.timeout(300)
def test_executor_python_the_user_named_is_kept(tmp_path):
    """PYSPARK_PYTHON set by the user wins over the command's interpreter; when it lacks
    distributed the one message names PYSPARK_PYTHON, with no Java/Python traceback."""
    python = os.path.join(_python_without_distributed(tmp_path), "python3")
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    env["PYSPARK_PYTHON"] = python
    args = ["run", "--master", "local[2]", "--n-workers", "1", "--no-progress", "--timeout", "120",
            "examples/job_task.py", "--rows", "10"]  # fmt: skip
    out = _cli(args, env=env, timeout=280)
    assert out.returncode == 1, out.stderr[-3000:]
    assert f"({python}) cannot import distributed" in out.stderr, out.stderr[-3000:]
    assert "point PYSPARK_PYTHON (spark.pyspark.python) at a Python that has them" in out.stderr
    for noise in ("Traceback", "\tat org.apache", "PythonException"):
        assert noise not in out.stderr, (noise, out.stderr[-3000:])
