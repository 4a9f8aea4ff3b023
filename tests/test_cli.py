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

from .conftest import active_jobs, dask_processes, make_spark, stop_spark, wait_until

pytestmark = pytest.mark.core


def no_workers_left(output: str) -> bool:
    """No worker process of the clusters named in ``output`` is left (other test runs on
    this machine may have their own)."""
    tags = set(re.findall(r"spark-dask-[0-9a-f]{10}", output))
    assert tags, output[-2000:]
    return wait_until(lambda: not any(dask_processes(t) for t in tags), timeout=20)

HERE = os.path.dirname(__file__)
ROOT = os.path.dirname(HERE)
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
    assert cli._typed_key_values(None, None, ["rmm_pool_size=10GB", "nanny=false"]) == {
        "rmm_pool_size": "10GB",
        "nanny": False,
    }
    assert [cli.exit_code(c) for c in (None, 0, 3, True, 256, -1)] == [0, 0, 3, 1, 0, 255]


def test_exec_target_exit_codes(tmp_path, capsys):
    ok = tmp_path / "ok.py"
    ok.write_text("import sys; assert sys.argv[1:] == ['a', '--b']\n")
    assert cli.exec_target(str(ok), ["a", "--b"]) == 0
    (tmp_path / "bad.py").write_text("raise RuntimeError('boom')\n")
    assert cli.exec_target(str(tmp_path / "bad.py"), []) == 1
    assert "RuntimeError: boom" in capsys.readouterr().err
    (tmp_path / "msg.py").write_text("raise SystemExit('failed politely')\n")
    assert cli.exec_target(str(tmp_path / "msg.py"), []) == 1
    assert cli.exec_target(str(tmp_path / "missing.py"), []) == 2
    assert cli.exec_target("json.tool", ["--help"], module=True) == 0


def test_dask_cli_entry_point():
    eps = importlib.metadata.entry_points(group="dask_cli")
    spark = [ep for ep in eps if ep.name == "spark"]
    if not spark or spark[0].value != "spark_dask.cli:main":
        pytest.skip("spark-dask is not installed (pip install -e .) in this environment")
    out = subprocess.run(
        [sys.executable, "-m", "dask", "spark", "--help"], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0 and "run" in out.stdout and "info" in out.stdout


# -------------------------------------------------------------------------- real Spark


@pytest.fixture(scope="module")
def spark():
    s = make_spark("local-cluster[2,1,1024]")
    yield s
    stop_spark(s)


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
    assert "take every task slot" in out["warnings"][0]
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
    assert bad.exit_code == 1 and "memory_limit must be" in bad.output


@pytest.mark.spark
@pytest.mark.timeout(180)
def test_run_in_process_shares_session_and_config(spark, tmp_path, capfd):
    import dask.config

    script = tmp_path / "job.py"
    script.write_text(CLIENT_SCRIPT)
    code = cli.run_script(str(script), ["4", "--spark"], spark=spark, n_workers=1, progress=False)
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
        SPARK_SUBMIT, "--master", "local-cluster[2,1,1024]",
        "--conf", "spark.ui.enabled=false", "--conf", "spark.log.level=WARN",
        cli.__file__, "run", "--n-workers", "1", "--no-progress", str(script), str(exit_status), "--spark",
        "--leave-open",
    ]  # fmt: skip
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=280, env=env, cwd=str(tmp_path))
    return proc, time.monotonic() - t0


@pytest.mark.spark
@pytest.mark.timeout(300)
@pytest.mark.parametrize("status", [0, 3])
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

    plain = SimpleNamespace(scheduler_address="tcp://h:1", security=None, dashboard_settings=None, dashboard_link="http://h:2/status")
    assert cli.client_config(plain) == {"scheduler-address": "tcp://h:1"}
    sec = SimpleNamespace(require_encryption=True, tls_ca_file="CA", tls_client_cert="CERT", tls_client_key="KEY")
    databricks = SimpleNamespace(databricks=object())
    tls = SimpleNamespace(scheduler_address="tls://h:1", security=sec, dashboard_settings=databricks,
                          dashboard_link="https://x/driver-proxy/o/1/c/{port}/status")  # fmt: skip
    want = {
        "scheduler-address": "tls://h:1",
        "distributed.comm.require-encryption": True,
        "distributed.comm.tls.ca-file": "CA",
        "distributed.comm.tls.client.cert": "CERT",
        "distributed.comm.tls.client.key": "KEY",
        "distributed.dashboard.link": "https://x/driver-proxy/o/1/c/{{port}}/status",
    }
    assert cli.client_config(tls) == want
    assert list(cli.client_config(tls)) == list(want)
    off_databricks = SimpleNamespace(**{**vars(tls), "dashboard_settings": SimpleNamespace(databricks=None)})
    assert "distributed.dashboard.link" not in cli.client_config(off_databricks)
    nested = yaml_config("tls://h:1", {"ca": "CA", "cert": "CERT", "key": "KEY"}, "https://x/{p}")
    assert nested == {
        "scheduler-address": "tls://h:1",
        "distributed": {
            "comm": {"require-encryption": True, "tls": {"ca-file": "CA", "client": {"cert": "CERT", "key": "KEY"}}},
            "dashboard": {"link": "https://x/{{p}}"},
        },
    }
