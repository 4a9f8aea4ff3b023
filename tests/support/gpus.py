"""Fake GPUs for Spark (a discovery script per set of addresses) and a fake dask-cuda
for the executors (``dask cuda worker``, ``pynvml``, ``rmm``), so the GPU paths run
without a GPU."""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import stat
import tempfile
import textwrap


def fake_gpu_script(addresses) -> str:
    """A GPU discovery script, the mechanism Spark's own tests use for fake GPUs."""
    fd, path = tempfile.mkstemp(prefix="gpus-", suffix=".sh")
    with os.fdopen(fd, "w") as f:
        f.write("#!/usr/bin/env bash\n")
        f.write("echo '" + json.dumps({"name": "gpu", "addresses": list(addresses)}) + "'\n")
    os.chmod(path, stat.S_IRWXU)
    atexit.register(_remove, path)  # Spark workers may run it until the session stops
    return path


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def gpu_conf(n_gpus: int, task_amount: str, **extra) -> dict:
    """Spark conf for one Spark worker (and executor) that owns ``n_gpus`` fake GPUs."""
    script = fake_gpu_script([str(i) for i in range(n_gpus)])
    return {
        "spark.worker.resource.gpu.amount": str(n_gpus),
        "spark.worker.resource.gpu.discoveryScript": script,
        "spark.executor.resource.gpu.amount": str(n_gpus),
        "spark.task.resource.gpu.amount": task_amount,
        **extra,
    }


# ------------------------------------------------------------------- a fake dask-cuda
FAKE_CLI = '''
"""Stand-in for dask-cuda's `dask cuda worker` in spark-dask's tests (no GPU)."""
import asyncio
import json
import os
import sys

import click


@click.group()
def cuda():
    """Fake dask-cuda."""


@cuda.command(name="worker", context_settings=dict(ignore_unknown_options=True))
@click.argument("scheduler")
@click.option("--name")
@click.option("--nthreads", type=int, default=1)
@click.option("--memory-limit", default="auto")
@click.option("--local-directory")
@click.option("--death-timeout")
@click.option("--preload", multiple=True)
@click.option("--tls-ca-file")
@click.option("--tls-cert")
@click.option("--tls-key")
@click.option("--rmm-pool-size")
@click.option("--resources")
@click.argument("rest", nargs=-1, type=click.UNPROCESSED)
def worker(scheduler, name, nthreads, memory_limit, local_directory, death_timeout, preload,
           tls_ca_file, tls_cert, tls_key, rmm_pool_size, resources, rest):
    if rmm_pool_size is not None:
        try:
            import rmm  # noqa: F401
        except ImportError:
            raise ValueError("RMM pool requested but module 'rmm' is not available.")
    os.environ["FAKE_DASK_CUDA_ARGV"] = json.dumps(sys.argv[1:])
    from distributed import Worker
    from distributed.security import Security

    security = None
    if tls_ca_file:
        security = Security(tls_ca_file=tls_ca_file, tls_worker_cert=tls_cert, tls_worker_key=tls_key,
                            require_encryption=True)

    async def run():
        given = (r.split("=", 1) for r in (resources or "").replace(",", " ").split())
        w = await Worker(scheduler, name=name, nthreads=nthreads, memory_limit=memory_limit,
                         local_directory=local_directory, death_timeout=death_timeout,
                         preload=list(preload), security=security,
                         resources={k: float(v) for k, v in given} or None)
        await w.finished()

    asyncio.run(run())
'''

FAKE_PYNVML = '''
"""Stand-in for pynvml: two GPUs with 30 GiB free of 40 GiB each, a CUDA 12.4 driver."""
class _Mem:
    free, total, used = 30 * 2**30, 40 * 2**30, 10 * 2**30
def nvmlInit(): pass
def nvmlShutdown(): pass
def nvmlDeviceGetHandleByIndex(i): return i
def nvmlDeviceGetHandleByUUID(u): return u
def nvmlDeviceGetMemoryInfo(h): return _Mem
def nvmlDeviceGetCount(): return 2
def nvmlDeviceGetName(h): return "Fake GPU"
def nvmlSystemGetCudaDriverVersion(): return 12040
'''


# The fake pynvml is only good for the task's sizing; keep distributed's own GPU
# diagnostics in the workers away from it.
FAKE_CUDA_ENV = {"DASK_DISTRIBUTED__DIAGNOSTICS__NVML": "False"}


def _write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(textwrap.dedent(text).lstrip())


def fake_dask_cuda(root) -> dict:
    """The fake ``dask_cuda`` (its ``dask cuda worker`` records its command line in the
    worker's ``FAKE_DASK_CUDA_ARGV`` and runs a plain Dask worker), ``pynvml`` and a
    removable ``rmm`` under ``root`` (a ``pathlib.Path``): ``path`` for the executors'
    ``PYTHONPATH``, ``rmm`` and ``rmm_off`` to take ``rmm`` away (rename) and back."""
    pkgs, extra = root / "pkgs", root / "rmm-here"
    _write(str(pkgs / "dask_cuda" / "__init__.py"), '__version__ = "26.8.0"\n')
    _write(str(pkgs / "dask_cuda" / "cli.py"), FAKE_CLI)
    _write(
        str(pkgs / "dask_cuda-26.8.0.dist-info" / "METADATA"),
        "Metadata-Version: 2.1\nName: dask-cuda\nVersion: 26.8.0\n",
    )
    _write(str(pkgs / "dask_cuda-26.8.0.dist-info" / "entry_points.txt"), "[dask_cli]\ncuda = dask_cuda.cli:cuda\n")
    _write(str(pkgs / "pynvml.py"), FAKE_PYNVML)
    _write(str(extra / "rmm" / "__init__.py"), "")
    return {"path": f"{pkgs}:{extra}", "rmm": extra / "rmm", "rmm_off": extra / "rmm_off"}


def worker_argv(client) -> dict[str, list[str]]:
    """Each stand-in dask-cuda worker's command line, by worker name."""
    runs = client.run(lambda: os.environ["FAKE_DASK_CUDA_ARGV"])
    info = client.scheduler_info()["workers"]
    return {info[addr]["name"]: json.loads(v) for addr, v in runs.items()}


def worker_flag(argv: list[str], flag: str):
    """The value given to ``flag`` in a worker's command line (None when absent)."""
    assert argv.count(flag) <= 1, argv  # never given twice
    return argv[argv.index(flag) + 1] if flag in argv else None
