"""The GPU check's pure parts and its refusal on machines without GPUs (no GPU needed)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time

import pytest

from tools import gpu_check

SMI = """\
0, 00000000:18:00.0, NVIDIA H200, 143771
1, 00000000:3B:00.0, NVIDIA H200, 143771
"""


def fake_nvidia_smi(directory, indices) -> str:
    """An ``nvidia-smi`` that answers the two queries the check makes."""
    full = os.path.join(directory, "smi-full.txt")
    with open(full, "w") as f:
        f.writelines(f"{i}, 00000000:{18 + int(i):02X}:00.0, Fake GPU, 1024\n" for i in indices)
    short = os.path.join(directory, "smi-index.txt")
    with open(short, "w") as f:
        f.writelines(f" {i} \n" for i in indices)  # nvidia-smi pads its columns
    path = os.path.join(directory, "nvidia-smi")
    with open(path, "w") as f:
        f.write(
            "#!/usr/bin/env bash\n"
            'case "$*" in\n'
            f"  *index,pci.bus_id*) cat {full} ;;\n"
            f"  *--query-gpu=index*) cat {short} ;;\n"
            "  *) exit 9 ;;\n"
            "esac\n"
        )
    os.chmod(path, stat.S_IRWXU)
    return path


def test_parse_nvidia_smi():
    gpus = gpu_check.parse_nvidia_smi(SMI + "\n")
    assert [(g.index, g.pci_bus_id, g.name, g.memory_mib) for g in gpus] == [
        ("0", "00000000:18:00.0", "NVIDIA H200", 143771),
        ("1", "00000000:3B:00.0", "NVIDIA H200", 143771),
    ]
    assert gpu_check.parse_nvidia_smi("0, 0000:01:00.0, GPU, [N/A]")[0].memory_mib == 0
    with pytest.raises(ValueError, match="unexpected nvidia-smi line"):
        gpu_check.parse_nvidia_smi("No devices were found")


@pytest.mark.parametrize("indices", [["0", "1", "2"], ["0"], []])
def test_discovery_script_prints_what_spark_expects(tmp_path, indices):
    fake_nvidia_smi(str(tmp_path), indices)
    script = tmp_path / "gpus.sh"
    script.write_text(gpu_check.discovery_script())
    script.chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}
    out = subprocess.run([str(script)], capture_output=True, text=True, env=env, timeout=30)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == gpu_check.discovery_json(indices) == {"name": "gpu", "addresses": indices}


def test_spark_conf_gives_every_gpu_to_one_executor_and_one_to_each_task():
    conf = gpu_check.spark_conf("/tmp/gpus.sh", 4, "/venv/bin/python")
    assert conf["spark.worker.resource.gpu.amount"] == conf["spark.executor.resource.gpu.amount"] == "4"
    assert conf["spark.task.resource.gpu.amount"] == "1"
    assert conf["spark.worker.resource.gpu.discoveryScript"] == "/tmp/gpus.sh"
    assert conf["spark.executorEnv.PYSPARK_PYTHON"] == "/venv/bin/python"
    shared = gpu_check.spark_conf("/tmp/gpus.sh", 1, "/venv/bin/python", gpu_amount=0.5)
    assert shared["spark.task.resource.gpu.amount"] == "0.5"
    assert shared["spark.executor.resource.gpu.amount"] == "1"


def test_gpu_amount_outside_zero_to_one_is_refused(capsys):
    with pytest.raises(SystemExit) as exc:
        gpu_check.main(["--gpu-amount", "1.5"])
    assert exc.value.code == 2
    assert "--gpu-amount must be in (0, 1]" in capsys.readouterr().err


def test_checks_without_their_packages_are_skipped_and_say_what_to_install(monkeypatch):
    """cudf, dask-cudf, XGBoost and CuPy are optional: their checks are rows that say
    'skipped' and name the package (the client is never touched)."""
    monkeypatch.setattr(gpu_check, "_has", lambda module: False)
    for check, names in ((gpu_check._groupby_check, ["cudf", "dask_cudf"]),
                         (gpu_check._xgboost_check, ["xgboost", "cudf"]),
                         (gpu_check._cupy_check, ["cupy"])):  # fmt: skip
        ok, text = check(None)
        assert ok is None and text.startswith("skipped: "), text
        for name in names:
            assert f"{name} is not installed" in text and gpu_check.OPTIONAL[name] in text


def test_pci_ids_from_nvml_and_cuda_compare():
    assert gpu_check.same_pci("00000000:3B:00.0", "0000:3b:00.0")
    assert not gpu_check.same_pci("00000000:3B:00.0", "0000:18:00.0")
    assert not gpu_check.same_pci(None, "0000:18:00.0")


def test_table_aligns_and_indents_continuations():
    text = gpu_check.table([("a", "1"), ("long key", "x\ny")], "title")
    assert text.splitlines() == ["title", "  a        1", "  long key x", "           y"]


def test_missing_prerequisites_are_listed():
    found = gpu_check.missing_prerequisites(which=lambda n: None, find_spec=lambda m: None, env={})
    text = "\n".join(found)
    assert "nvidia-smi" in text and "java" in text and "dask_cuda" in text and "rmm" in text
    assert "module cudf" not in text and "module xgboost" not in text  # optional: their checks are skipped
    ready = gpu_check.missing_prerequisites(which=lambda n: "/bin/" + n, find_spec=lambda m: object(), env={})
    assert ready == []


def _run_check(path: str) -> tuple[subprocess.CompletedProcess, float]:
    env = {**os.environ, "PATH": path}
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "tools.gpu_check"], capture_output=True, text=True,
                          env=env, timeout=60)  # fmt: skip
    return proc, time.monotonic() - t0


@pytest.mark.skipif(all(gpu_check.importlib.util.find_spec(m) for m in gpu_check.REQUIRED), reason="a GPU-ready Python")
def test_without_gpus_it_stops_at_once_and_says_what_is_missing(tmp_path):
    proc, took = _run_check(os.path.dirname(sys.executable) + ":/usr/bin:/bin")
    if "nvidia-smi" not in proc.stderr and gpu_check.shutil.which("nvidia-smi", path="/usr/bin:/bin"):
        pytest.skip("this machine has nvidia-smi")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "cannot run on this machine" in proc.stderr
    assert "nvidia-smi" in proc.stderr and "dask_cuda" in proc.stderr
    assert took < 20, took
    # with an nvidia-smi, what is still missing are the packages
    fake_nvidia_smi(str(tmp_path), ["0"])
    proc, _ = _run_check(f"{tmp_path}:{os.path.dirname(sys.executable)}:/usr/bin:/bin")
    assert proc.returncode == 2
    assert "nvidia-smi" not in proc.stderr and "dask_cuda" in proc.stderr


def test_delta_jars_are_a_comma_separated_list_of_files(tmp_path, capsys):
    jars = [tmp_path / "delta-spark_2.12-3.3.2.jar", tmp_path / "delta-storage-3.3.2.jar"]
    for jar in jars:
        jar.write_bytes(b"PK")
    args = gpu_check._arguments(["--delta-jars", f"{jars[0]}, {jars[1]},"])
    assert args.delta_jars == [str(j) for j in jars]
    assert gpu_check._arguments([]).delta_jars == []
    with pytest.raises(SystemExit) as exc:
        gpu_check._arguments(["--delta-jars", f"{jars[0]},{tmp_path / 'gone.jar'}"])
    assert exc.value.code == 2
    assert f"--delta-jars: no file {tmp_path / 'gone.jar'}" in capsys.readouterr().err


def test_spark_conf_with_delta_jars_loads_delta_lakes_connector():
    jars = ["/jars/delta-spark_2.12-3.3.2.jar", "/jars/delta-storage-3.3.2.jar"]
    conf = gpu_check.spark_conf("/tmp/gpus.sh", 1, "/venv/bin/python", 0.5, jars)
    assert conf["spark.jars"] == ",".join(jars)
    assert conf["spark.sql.extensions"] == "io.delta.sql.DeltaSparkSessionExtension"
    assert conf["spark.sql.catalog.spark_catalog"] == "org.apache.spark.sql.delta.catalog.DeltaCatalog"
    assert conf["spark.task.resource.gpu.amount"] == "0.5"  # the GPU confs stay
    plain = gpu_check.spark_conf("/tmp/gpus.sh", 1, "/venv/bin/python", 0.5)
    assert not any(k in plain for k in ("spark.jars", "spark.sql.extensions", "spark.sql.catalog.spark_catalog"))
    assert plain.items() <= conf.items()


def test_the_read_delta_row_without_delta_jars_or_packages_is_skipped_and_says_how_to_enable_it(monkeypatch):
    """Nothing is written (the Spark session is never touched) and the row says why."""
    args = gpu_check._arguments([])
    monkeypatch.setattr(gpu_check, "_has", lambda module: True)
    skipped = gpu_check._prepared_delta(None, args, "/nonexistent")
    assert skipped == gpu_check.DELTA_SKIPPED
    ok, text = gpu_check._read_delta_check(None, skipped)
    assert ok is None and text.startswith("skipped: ") and "--delta-jars" in text
    assert "io.delta:delta-spark_2.12" in text and "io.delta:delta-storage" in text
    monkeypatch.setattr(gpu_check, "_has", lambda module: module != "pyroaring")
    ok, text = gpu_check._read_delta_check(None, gpu_check._prepared_delta(None, args, "/nonexistent"))
    assert ok is None and text == f"skipped: pyroaring is not installed ({gpu_check.OPTIONAL['pyroaring']})"


def test_a_delta_table_spark_could_not_write_fails_the_row():
    ok, text = gpu_check._read_delta_check(None, {"error": "AnalysisException: no delta"})
    assert ok is False and text == "Spark could not write the Delta table: AnalysisException: no delta"


def test_rows_compare_by_value_whatever_the_dtypes():
    """cudf's to_pandas, the pandas backend and Spark's collect() give other dtypes for one
    table: nulls become None, timestamps microseconds since the epoch, rows go in id order."""
    pd = pytest.importorskip("pandas")
    ts = pd.to_datetime([1_700_000_000_000_001, 1_700_000_000_000_000], unit="us")
    naive = pd.DataFrame({"id": [2, 1], "x": [float("nan"), 0.25], "s": [None, "a"], "ts": ts})
    aware = naive.astype({"x": "Float64", "s": "string"}).assign(ts=ts.tz_localize("UTC").tz_convert("Asia/Tokyo"))
    want = {"id": [1, 2], "x": [0.25, None], "s": ["a", None], "ts": [1_700_000_000_000_000, 1_700_000_000_000_001]}
    assert gpu_check._by_column(naive) == gpu_check._by_column(aware) == want
