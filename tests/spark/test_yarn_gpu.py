"""GPU workers on YARN, through Spark's resource discovery script (YARN does not tell
Spark which GPUs a container got: Spark's "Running on YARN" page). The bed declares
``yarn.io/gpu`` as a YARN resource type, one per NodeManager, which is what Spark asks
YARN for when an executor wants GPUs (``spark.yarn.resourceGpuDeviceName``); YARN's own
GPU plugin (discovery with nvidia-smi, isolation with cgroups) cannot run here. The
discovery script is the fake one's kind: each container's executor gets the GPU its
container's number gives it, as each would see only its own under YARN's isolation."""

from __future__ import annotations

import stat

import pytest

import spark_dask
from tests.support.spark import assert_no_leftovers
from tests.support.yarn_fixtures import session_on, yarn_bed

pytestmark = [pytest.mark.spark, pytest.mark.timeout(240)]

GPU = "yarn.io/gpu"
SETTINGS = {
    "yarn.resource-types": GPU,  # the RM's, the NMs' and the clients' (every conf directory)
    f"yarn.nodemanager.resource-type.{GPU}": "1",  # each NM offers one
    # the default calculator counts memory only, and the RM refuses other resource types with it
    "yarn.scheduler.capacity.resource-calculator": ("org.apache.hadoop.yarn.util.resource.DominantResourceCalculator"),
}
# YARN's container ids end in the container's number; executors get 2, 3, ... (1: the AM)
SCRIPT = """#!/usr/bin/env bash
n=${CONTAINER_ID##*_}
echo "{\\"name\\": \\"gpu\\", \\"addresses\\": [\\"$(( (10#$n) % 2 ))\\"]}"
"""


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    with yarn_bed(str(tmp_path_factory.mktemp("yarn-gpu")), settings=SETTINGS) as b:
        yield b


@pytest.fixture(scope="module")
def spark(bed, tmp_path_factory):
    script = tmp_path_factory.mktemp("gpu-script") / "gpus.sh"
    script.write_text(SCRIPT)
    script.chmod(stat.S_IRWXU)
    conf = {
        "spark.executor.resource.gpu.amount": "1",
        "spark.executor.resource.gpu.discoveryScript": str(script),
        "spark.task.resource.gpu.amount": "1",
    }
    with session_on(bed, executors=2, cores=2, **conf) as s:
        yield s


def _make_device():
    def device():
        import os

        return os.environ.get("CUDA_VISIBLE_DEVICES"), os.environ.get("CONTAINER_ID")

    return device


_device = _make_device()


def _gpus_in_use(bed) -> int:
    """The ``yarn.io/gpu`` the RM has handed out, over its nodes."""
    used = 0
    for node in bed.nodes():
        resources = node.get("usedResource", {}).get("resource", {}).get("resources", [])
        used += sum(int(r.get("value", 0)) for r in resources if r.get("name") == GPU)
    return used


def test_one_worker_per_yarn_gpu_pinned_to_it(spark, bed):
    assert _gpus_in_use(bed) == 2  # YARN gave each executor's container its GPU
    with spark_dask.start(spark, worker="cpu") as client:
        cluster = client.cluster
        seen = client.run(_device)
        assert sorted(gpu for gpu, _ in seen.values()) == ["0", "1"], seen
        for gpu, container in seen.values():
            assert int(container.rsplit("_", 1)[1]) % 2 == int(gpu), seen  # its own container's GPU
        for addr, w in client.scheduler_info()["workers"].items():
            assert w["name"].endswith(f"-gpu{seen[addr][0]}") and w["spark"]["gpu"] == seen[addr][0]
    assert_no_leftovers(spark, cluster)
