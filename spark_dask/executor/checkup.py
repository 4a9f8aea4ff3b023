"""What ``spark-dask doctor`` looks at on each executor, from inside a Spark task.

One task per task slot runs :func:`checkup_partition`'s function (``mapInArrow``: classic
and Spark Connect sessions alike) and answers one JSON row: the executor's Python and
package versions, what fails to import (the import's own error, one line), whether
spark_dask is installed there (the preloading Python daemon needs it), whether the
gang's task code unpickles, whether a fresh process started there reaches the driver's
listener (as a Dask worker must reach the scheduler), the free space under Spark's local
directories, and on executors with GPUs what NVML, CUDA and the RAPIDS packages say (the
packages imported in a child process: a CUDA context that importing cudf or CuPy may
create ends with it, not in a Python worker Spark keeps).
Nothing here imports more than the standard library at module level: the check must
answer on an executor whose Python lacks exactly what it looks for.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import json
import os
import pickle
import platform
import shutil
import socket
import subprocess
import sys

from spark_dask.executor.task_context import executor_id

# The packages whose versions the driver's must match (distributed warns of these
# after workers joined; the doctor names them first): import name -> distribution.
CORE = {
    "dask": "dask",
    "distributed": "distributed",
    "cloudpickle": "cloudpickle",
    "msgpack": "msgpack",
    "pandas": "pandas",
    "pyarrow": "pyarrow",
}
# GPU executors: import name -> the distributions it comes as (the first installed wins).
GPU = {
    "dask_cuda": ("dask-cuda",),
    "cudf": ("cudf-cu13", "cudf-cu12", "cudf-cu11", "cudf"),
    "rmm": ("rmm-cu13", "rmm-cu12", "rmm-cu11", "rmm"),
    "cupy": ("cupy-cuda13x", "cupy-cuda12x", "cupy-cuda11x", "cupy"),
    "pynvml": ("nvidia-ml-py", "pynvml"),
}
# Libraries without an import of their own: distribution names.
GPU_LIBRARIES = {"nvJitLink": ("nvidia-nvjitlink-cu13", "nvidia-nvjitlink-cu12", "nvidia-nvjitlink")}
# The child process that dials the driver's listener: what a Dask worker process does first.
DIAL = (
    "import socket, sys\n"
    "try:\n"
    "    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=float(sys.argv[3])).close()\n"
    "except OSError as e:\n"
    "    print(f'{type(e).__name__}: {e}'); sys.exit(1)\n"
)


def one_line(error: BaseException | str) -> str:
    """An error as one line: its type and its first line of text.

    >>> one_line(ImportError("libnvrtc.so.12: cannot open shared object file\\nmore"))
    'ImportError: libnvrtc.so.12: cannot open shared object file'
    """
    if isinstance(error, BaseException):
        text = str(error).strip().splitlines()
        return f"{type(error).__name__}: {text[0]}" if text else type(error).__name__
    return error.strip().splitlines()[0] if error.strip() else ""


def version_of(*distributions: str) -> str | None:
    """The version of the first of ``distributions`` that is installed."""
    for name in distributions:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def imports(modules) -> dict[str, str | None]:
    """Each module's import error as one line; None for a module that imports."""
    out = {}
    for name in modules:
        try:
            importlib.import_module(name)
            out[name] = None
        except BaseException as e:  # noqa: BLE001 - a broken native library raises anything
            out[name] = one_line(e)
    return out


# The child process that imports the GPU packages: importing cudf or CuPy may create a
# CUDA context, which must not outlive the check in a Python worker Spark keeps.
IMPORT_EACH = (
    "import importlib, json, sys\n"
    "out = {}\n"
    "for name in sys.argv[1:]:\n"
    "    try:\n"
    "        importlib.import_module(name); out[name] = None\n"
    "    except BaseException as e:\n"
    "        lines = str(e).strip().splitlines()\n"
    "        out[name] = type(e).__name__ + (': ' + lines[0] if lines else '')\n"
    "print(json.dumps(out))\n"
)


def imports_apart(modules, timeout: float = 120) -> dict[str, str | None]:
    """:func:`imports` in a child process of its own (what it loads ends with it)."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", IMPORT_EACH, *modules], capture_output=True, text=True, timeout=timeout
        )
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError) as e:
        return dict.fromkeys(modules, f"the import check could not run: {one_line(e)}")


def dial(host: str, port: int, timeout: float) -> str | None:
    """Start a Python process here and have it open a TCP connection to ``host:port``;
    None when it did, else what went wrong (the process's start or its connect)."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", DIAL, host, str(port), str(timeout)],
            capture_output=True,
            text=True,
            timeout=timeout + 30,
        )
    except (OSError, subprocess.SubprocessError) as e:
        return f"could not start a process: {one_line(e)}"
    if done.returncode != 0:
        return one_line(done.stdout or done.stderr) or f"exit status {done.returncode}"
    return None


def local_dirs() -> dict[str, int | None]:
    """Free bytes under each of Spark's local directories (``SPARK_LOCAL_DIRS``, which
    Spark gives its Python workers), None for one that cannot be read."""
    out: dict[str, int | None] = {}
    for path in filter(None, os.environ.get("SPARK_LOCAL_DIRS", "").split(",")):
        try:
            out[path] = shutil.disk_usage(path).free
        except OSError:
            out[path] = None
    return out


def nvml() -> dict:
    """GPUs NVML sees and the driver's CUDA version; ``error`` where NVML cannot answer."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except BaseException as e:  # noqa: BLE001
        return {"error": one_line(e)}
    try:
        cuda = pynvml.nvmlSystemGetCudaDriverVersion()
        names = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            name = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(i))
            names.append(name.decode() if isinstance(name, bytes) else str(name))
        return {"gpus": names, "cuda_driver": f"{cuda // 1000}.{cuda % 1000 // 10}"}
    except BaseException as e:  # noqa: BLE001
        return {"error": one_line(e)}
    finally:
        try:
            pynvml.nvmlShutdown()
        except BaseException:  # noqa: BLE001
            pass


def gpu_part(assigned: list[str]) -> dict:
    """The GPU executor's part: Spark's GPU addresses of this task, NVML, the RAPIDS
    packages' versions and import errors."""
    versions = {name: version_of(*dists) for name, dists in {**GPU, **GPU_LIBRARIES}.items()}
    return {"spark_gpus": assigned, "nvml": nvml(), "versions": versions, "import_errors": imports_apart(GPU)}


def check(spec: dict, gpus: list[str]) -> dict:
    """This executor's answers (see the module's text); ``spec``: the driver's listener
    (``host``, ``port``), the dial's ``timeout``, the gang task code pickled (``code``),
    whether to look at GPUs (``gpu``)."""
    try:
        pickle.loads(spec["code"])
        unpickles = None
    except BaseException as e:  # noqa: BLE001
        unpickles = one_line(e)
    return {
        "host": socket.gethostname(),
        "executor": executor_id() or f"{socket.gethostname()}:{os.getppid()}",
        "python": platform.python_version(),
        "executable": sys.executable,
        "versions": {name: version_of(dist) for name, dist in CORE.items()},
        "import_errors": imports(("distributed", "pyarrow", "pyroaring")),  # pyroaring: read_delta's DVs
        "spark_dask_installed": importlib.util.find_spec("spark_dask") is not None,  # the preloading daemon's
        "unpickles": unpickles,
        "reach": dial(spec["host"], spec["port"], spec["timeout"]),
        "local_dirs": local_dirs(),
        "gpu": gpu_part(gpus) if spec.get("gpu") else None,
    }


def checkup_partition(spec: dict):
    """The ``mapInArrow`` function of the doctor's job: one JSON row per task."""

    def fn(batches):
        import pyarrow as pa
        from pyspark import TaskContext

        for _ in batches:
            pass
        context = TaskContext.get()
        resources = context.resources() if context is not None else {}
        gpus = list(resources["gpu"].addresses) if "gpu" in resources else []
        row = json.dumps(check(spec, gpus))
        yield pa.RecordBatch.from_pydict({"info": [row]}, schema=pa.schema([("info", pa.string())]))

    return fn
