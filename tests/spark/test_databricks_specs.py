"""The Databricks specifications in examples/databricks, checked without a workspace.

- ``cluster-gpu.json`` (Clusters API ``clusters/create``), ``libraries-gpu.json``
  (Libraries API ``libraries/install``), ``job-gpu.json`` (Jobs API ``jobs/create``):
  read by the Databricks SDK's own types (``databricks-sdk``; a key it does not know is
  dropped, so a round trip that changes the document means an unknown key);
- ``databricks.yml`` (a bundle): its job read by the bundle schema's types
  (``databricks-bundles``, generated from the Databricks CLI's bundle schema; an
  unknown key or a value of the wrong type raises);
- the four agree with each other, the RAPIDS memory settings pass spark-dask's own
  check, spark-dask plans the intended gang on such a cluster, ``spark-dask run``
  accepts the task's parameters, and the job script runs under ``spark-dask run`` on
  ``local-cluster`` (CPU workers).
"""

from __future__ import annotations

import copy
import json
import os
import re

import pytest
import yaml

from spark_dask import cli, rapids
from spark_dask.capacity import ClusterFacts
from spark_dask.commands.run import run_script
from spark_dask.plan import plan_gang
from tests.support.extras import needs
from tests.support.paths import ROOT

HERE = os.path.join(ROOT, "examples", "databricks")


# Fixtures, not module-level imports: the pyspark 3.5 environment (test-core extra) runs
# `pytest -m core`, which collects this module without selecting its tests.
@pytest.fixture(scope="module")
def compute():
    return needs("databricks.sdk.service.compute", "test")


@pytest.fixture(scope="module")
def jobs():
    return needs("databricks.sdk.service.jobs", "test")


@pytest.fixture(scope="module")
def bundle_jobs():
    return needs("databricks.bundles.jobs", "test")


# Access modes whose notebooks and jobs get a classic session that can start processes
# (docs/databricks.md, "Standard access mode, serverless, Databricks Connect").
WORKING_ACCESS_MODES = {"DATA_SECURITY_MODE_DEDICATED", "SINGLE_USER", "NONE"}
# Top-level keys of a bundle configuration (Databricks bundle configuration reference).
BUNDLE_KEYS = {"bundle", "artifacts", "experimental", "include", "permissions", "presets", "python",
               "resources", "run_as", "scripts", "sync", "targets", "variables", "workspace"}  # fmt: skip


def load_json(name):
    with open(os.path.join(HERE, name)) as f:
        return json.load(f)


def load_bundle():
    with open(os.path.join(HERE, "databricks.yml")) as f:
        return yaml.safe_load(f)


def substitute(value, variables: dict, file_path: str):
    """The bundle's ``${var.x}`` and ``${workspace.file_path}`` references, resolved."""
    if isinstance(value, dict):
        return {k: substitute(v, variables, file_path) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v, variables, file_path) for v in value]
    if isinstance(value, str):
        value = value.replace("${workspace.file_path}", file_path)
        return re.sub(r"\$\{var\.([a-z_]+)\}", lambda m: str(variables[m.group(1)]), value)
    return value


def test_cluster_spec_is_a_clusters_api_document(compute):
    spec = load_json("cluster-gpu.json")
    assert compute.ClusterSpec.from_dict(spec).as_dict() == spec  # every key known to the API types
    assert spec["data_security_mode"] in WORKING_ACCESS_MODES
    assert "autoscale" not in spec and spec["num_workers"] >= 1  # barrier mode: no autoscaling
    assert "-gpu-ml-" in spec["spark_version"]
    conf = spec["spark_conf"]
    assert 0 < float(conf["spark.task.resource.gpu.amount"]) < 1  # Spark SQL tasks share the GPU
    assert rapids.plugin_enabled(conf["spark.plugins"])
    # the RAPIDS plugin's pool leaves dask-fraction (0.4) of each GPU for the Dask workers
    assert rapids.check_rapids(conf.get, 0.4) == []
    # one g5.4xlarge executor per worker node: 16 cores, 1 GPU
    facts = ClusterFacts(
        executors=spec["num_workers"], executor_cores=16, executor_memory=48 * 2**30, executor_gpus=1,
        task_gpus=float(conf["spark.task.resource.gpu.amount"]), slots=spec["num_workers"] * 4,
        task_profiles=True, master="spark://driver:7077", rapids_plugin=True,
    )  # fmt: skip
    plan = plan_gang(facts)
    assert (plan.kind, plan.gpu_mode, plan.n_workers, plan.pinned) == ("cuda", "shared", 2, True)


def test_libraries_are_the_cuda12_extra(compute):
    body = load_json("libraries-gpu.json")
    for lib in body["libraries"]:
        assert compute.Library.from_dict(lib).as_dict() == lib
    packages = {re.split(r"[\[<>=]", lib["pypi"]["package"])[0] for lib in body["libraries"] if "pypi" in lib}
    with open(os.path.join(ROOT, "pyproject.toml")) as f:
        extra = re.search(r"^cuda12 = \[(.*)\]$", f.read(), re.M).group(1)
    wanted = {re.split(r"[\[<>=]", p.strip().strip('"'))[0] for p in extra.split(",")}
    assert wanted <= packages, wanted - packages
    assert body["libraries"][0]["whl"].endswith("spark_dask-0.1.0-py3-none-any.whl")


def test_job_spec_is_a_jobs_api_document_and_runs_spark_dask(jobs, bundle_jobs):
    job = load_json("job-gpu.json")
    assert jobs.JobSettings.from_dict(job).as_dict() == job
    bundle_jobs.Job.from_dict(job)  # the bundle schema's job type accepts it too (strict)
    (task,) = job["tasks"]
    wheel = task["python_wheel_task"]
    with open(os.path.join(ROOT, "pyproject.toml")) as f:
        assert f'{wheel["entry_point"]} = "spark_dask.cli:main"' in f.read()
    assert wheel["package_name"] == "spark_dask"
    params = wheel["parameters"]
    assert params[0] == "run"
    ctx = cli.run.make_context("run", list(params[1:]))  # spark-dask run accepts them
    assert ctx.params["n_workers"] == 2 and ctx.params["target"].endswith("/job.py")
    assert ctx.params["args"] == ("--rows", "1000000", "--path", "/Volumes/main/default/scratch/spark-dask-job")
    cluster = load_json("cluster-gpu.json")
    new = job["job_clusters"][0]["new_cluster"]
    assert new == {k: v for k, v in cluster.items() if k not in ("cluster_name", "autotermination_minutes")}
    assert task["libraries"] == load_json("libraries-gpu.json")["libraries"]


def test_bundle_is_valid_and_agrees_with_the_api_documents(bundle_jobs):
    bundle = load_bundle()
    assert set(bundle) <= BUNDLE_KEYS, set(bundle) - BUNDLE_KEYS
    (job,) = bundle["resources"]["jobs"].values()
    bundle_jobs.Job.from_dict(job)  # strict: unknown keys or wrong types raise
    broken = copy.deepcopy(job)
    broken["tasks"][0]["python_wheel_tsk"] = broken["tasks"][0].pop("python_wheel_task")
    with pytest.raises(ValueError, match="python_wheel_tsk"):
        bundle_jobs.Job.from_dict(broken)
    variables = {k: v["default"] for k, v in bundle["variables"].items()}
    resolved = substitute(job, variables, "/Workspace/Users/someone@example.com/spark-dask")
    assert resolved == load_json("job-gpu.json")


@pytest.mark.spark
@pytest.mark.timeout(240)
def test_the_job_script_runs_under_spark_dask_run(spark, tmp_path, capfd):
    """The bundle's task, CPU variant: `spark-dask run job.py` on local-cluster."""
    code = run_script(
        os.path.join(HERE, "job.py"), ["--rows", "20000", "--path", str(tmp_path)],
        spark=spark, n_workers=1, progress=False,
    )  # fmt: skip
    out = capfd.readouterr().out
    assert code == 0, out
    assert "spark wrote 20000 rows" in out and "(CPU workers: 1) sum of x per k: correct" in out
