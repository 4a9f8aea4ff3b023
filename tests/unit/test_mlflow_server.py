"""tests/support/mlflow_server.py without MLflow: the command line, the environment, and
the process handling (the port found from the process group, the bounded wait for
``/health``, the group ended, a server that exits) against a stand-in ``python`` that
serves ``/health`` from a child process, as ``mlflow server`` does from uvicorn's. The real
server: tests/spark/test_mlflow_ui.py and the tests of the tracking (the ``mlflow_server``
fixture of tests/conftest.py)."""

from __future__ import annotations

import os
import stat
import sys
import textwrap
import time

import pytest

from tests.support import mlflow_server as ms

# A stand-in for the server environment's Python: `-m mlflow server ... --port N` starts a
# child that serves /health on N (0: a port the OS picks), and waits for it.
STAND_IN = f"""#!{sys.executable}
import http.server, os, subprocess, sys
if os.environ.get("STAND_IN_FAIL"):
    print("Error initializing backend store: no such table", flush=True)
    sys.exit(3)
port = sys.argv[sys.argv.index("--port") + 1]
serve = '''
import http.server, sys
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()
        self.wfile.write(b"OK")
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Health).serve_forever()
'''
print("mlflow-like server env:", sorted(k for k in os.environ if k.startswith("MLFLOW_")), flush=True)
sys.exit(subprocess.call([sys.executable, "-c", serve, port]))
"""


@pytest.fixture
def stand_in(tmp_path):
    path = tmp_path / "python"
    path.write_text(textwrap.dedent(STAND_IN))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_command_and_environment():
    cmd = ms.server_command("/env/bin/python", "/tmp/m", 0)
    assert cmd[:4] == ["/env/bin/python", "-m", "mlflow", "server"]
    assert cmd[cmd.index("--backend-store-uri") + 1] == "sqlite:////tmp/m/mlflow.db"
    assert cmd[cmd.index("--artifacts-destination") + 1] == "/tmp/m/artifacts"
    assert (cmd[cmd.index("--port") + 1], cmd[cmd.index("--workers") + 1]) == ("0", "1")
    assert ms.server_command("p", "/d", 5123)[-3] == "5123"
    env = ms.server_environment({"PATH": "/bin", "MLFLOW_PORT": "5000", "MLFLOW_TRACKING_URI": "http://x"})
    assert env == {"PATH": "/bin", **ms.SERVER_ENV}
    assert env["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] == "false"


def test_has_server_needs_the_full_package():
    assert not ms.has_server("/nonexistent/python")
    installed = os.path.join(ms.environment_dir(), "bin", "python")
    if os.path.exists(os.path.join(ms.environment_dir(), "installed")):
        assert ms.has_server(installed) and ms.server_python() == installed


def test_start_finds_the_port_waits_and_ends_the_group(stand_in, tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_PORT", "5000")  # not the server's business
    server = ms.MLflowServer(stand_in, str(tmp_path / "server"))
    with server:
        pgid = server.proc.pid
        assert server.uri.startswith("http://127.0.0.1:") and server.port not in (0, 5000)
        assert len(ms.group_processes(pgid)) == 2  # the leader and the child that listens
        assert ms.answers(server.uri)
        with server.down():
            assert not ms.group_processes(pgid) and not ms.answers(server.uri)
            port = server.port
        assert server.port == port and ms.answers(server.uri)  # again on the same port
        pgid = server.proc.pid
    assert not ms.group_processes(pgid)
    assert not ms.answers(f"http://127.0.0.1:{port}")
    log = open(server.log).read()
    ours = sorted(k for k in ms.SERVER_ENV if k.startswith("MLFLOW_"))
    assert log.count(f"mlflow-like server env: {ours}") == 2, log  # MLFLOW_PORT not passed on


def test_a_server_that_exits_fails_the_start_at_once(stand_in, tmp_path, monkeypatch):
    monkeypatch.setenv("STAND_IN_FAIL", "1")
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match=r"(?s)mlflow server exited \(3\).*no such table"):
        ms.MLflowServer(stand_in, str(tmp_path)).start(timeout=60)
    assert time.monotonic() - t0 < 30


def test_a_server_that_never_answers_is_waited_for_at_most_the_timeout(tmp_path):
    silent = tmp_path / "python"
    silent.write_text(f"#!{sys.executable}\nimport time\ntime.sleep(600)\n")
    silent.chmod(0o755)
    server = ms.MLflowServer(str(silent), str(tmp_path))
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match="did not answer /health in time"):
        server.start(timeout=1.5)
    assert time.monotonic() - t0 < 15 and server.proc is None


def test_uri_before_the_start():
    with pytest.raises(RuntimeError, match="has not started"):
        _ = ms.MLflowServer("python", "/tmp").uri
    assert "stopped" in repr(ms.MLflowServer("python", "/tmp"))


def test_environment_dir(monkeypatch):
    monkeypatch.setenv("SPARK_DASK_MLFLOW_SERVER", "/opt/mlflow-server")
    assert ms.environment_dir() == "/opt/mlflow-server"
    monkeypatch.delenv("SPARK_DASK_MLFLOW_SERVER")
    assert ms.environment_dir().endswith(os.path.join(".cache", "spark-dask", f"mlflow-server-{ms.VERSION}"))
