"""The RMM pool of a dask-cuda worker, sized inside the Spark task: from the GPU memory
actually free there minus a reserve (:func:`rmm_pool_size`, :func:`gpu_free_memory`),
its spill limit from that pool (:func:`spill_limit`), and the check that ``rmm`` is
installed when a pool would be used (:func:`rmm_problem`, :func:`rmm_installed`).
The Spark RAPIDS plugin's side (its confs, read on the driver) is :mod:`spark_dask.rapids`.

Standard library only at module level: shipped by value with the task code;
``pynvml`` is imported inside the task only.
"""

from __future__ import annotations

from spark_dask.sizes import parse_size

POOL_ALIGN = 256 * 2**20  # RMM pool sizes are rounded down to this


MIN_POOL = 2**30  # below this an RMM pool is not worth making


def rmm_pool_size(free: int, reserve: int, fraction: float = 1.0, align: int = POOL_ALIGN) -> int | None:
    """The RMM pool for a dask-cuda worker, from the GPU memory free in its task.

    ``(free - reserve) * fraction``, rounded down to ``align``; None when that is
    below 1 GiB (then the worker runs without a pool rather than with a useless one).

    >>> rmm_pool_size(40 * 2**30, 2**30, 0.9) / 2**30
    35.0
    >>> rmm_pool_size(2**30, 2**30) is None
    True
    """
    usable = int((int(free) - int(reserve)) * float(fraction))
    size = usable // align * align
    return size if size >= MIN_POOL else None


def gpu_free_memory(gpu: str) -> tuple[int, int] | None:
    """(free, total) bytes of one physical GPU (index or UUID) through NVML, or None.

    Runs in the Spark task. ``pynvml`` (package ``nvidia-ml-py``, installed with
    dask-cuda) is imported here only; without it, or without a driver, None.
    """
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:  # no NVIDIA driver here  # noqa: BLE001
        return None
    try:
        if str(gpu).isdigit():
            handle = pynvml.nvmlDeviceGetHandleByIndex(int(gpu))
        else:
            handle = pynvml.nvmlDeviceGetHandleByUUID(str(gpu))
        info = pynvml.nvmlDeviceGetMemoryInfo(handle)
        return int(info.free), int(info.total)
    except Exception:  # noqa: BLE001
        return None
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass


# worker_options that make dask-cuda import rmm (dask_cuda/plugins.py RMMSetup.setup and
# dask_cuda/cuda_worker.py, dask-cuda 24.08-26.10); dask-cuda does not depend on rmm.
RMM_OPTIONS = (
    "rmm_pool_size",
    "rmm_managed_memory",
    "rmm_async",
    "rmm_track_allocations",
    "set_rmm_allocator_for_libs",
)


DEFAULT_SPILL_FRACTION = 0.8


def _device_fraction(value) -> float | None:
    """dask-cuda's reading of a size as a fraction of the device's total memory: a float
    (or float text) in (0, 1], but not the integer 1 nor the text "1"."""
    if isinstance(value, bool) or value in (1, "1") and not isinstance(value, float):
        return None
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    if isinstance(value, int) and not isinstance(value, float):
        return None
    return v if 0.0 < v <= 1.0 else None


def spill_limit(pool, fraction: float):
    """``--device-memory-limit`` for an RMM pool: ``fraction`` of the pool, in the pool's
    own form (a fraction of the device's memory stays a fraction, a size becomes bytes).

    dask-cuda's default limit is 80 % of the GPU's *total* memory, whatever the pool;
    with a pool sized from the *free* memory that is above the pool, so the worker
    runs out of pool memory before it spills. None when ``pool`` cannot be read.

    >>> spill_limit(10 * 2**30, 0.8) / 2**30
    8.0
    >>> spill_limit("0.9", 0.8), spill_limit("10GB", 0.5)
    (0.72, 5000000000)
    """
    if pool is None or isinstance(pool, bool):
        return None
    share = _device_fraction(pool)
    if share is not None:
        return round(share * float(fraction), 6)
    try:
        size = parse_size(pool)
    except ValueError:
        return None
    limit = int(size * float(fraction))
    return limit if limit >= 1 else None


def rmm_installed() -> bool:
    """Whether this Python can import ``rmm`` (looked up, not imported): what a new
    worker process finds on ``sys.path``, not what this process imported earlier (a
    Python worker Spark reuses has ``rmm`` in ``sys.modules`` once it imported
    ``distributed``, whose ``distributed.diagnostics.rmm`` imports it where it can)."""
    import importlib
    import sys

    try:
        importlib.invalidate_caches()  # a directory listing cached by an earlier task
        # importlib.util.find_spec without its sys.modules short cut
        return any(getattr(f, "find_spec", None) and f.find_spec("rmm", None) is not None for f in sys.meta_path)
    except (ImportError, ValueError):
        return False


def _key(options: dict, name: str):
    """The key of ``options`` that spells ``name`` (``rmm-pool-size`` or ``rmm_pool_size``)."""
    for k in options:
        if str(k).replace("-", "_") == name:
            return k
    return None


def rmm_problem(options: dict | None, has_rmm: bool, python: str = "") -> str | None:
    """Why worker options the user gave cannot work without ``rmm``, or None.

    An RMM option in ``worker_options`` is an explicit request: without ``rmm`` the
    worker would die at start with dask-cuda's ``RMM pool requested but module 'rmm'
    is not available``; the task reports it first, naming its executor.
    """
    options = options or {}
    asked = [k for k in options if str(k).replace("-", "_") in RMM_OPTIONS and options[k] not in (None, False)]
    if not asked or has_rmm:
        return None
    where = f" ({python})" if python else ""
    return (
        f"worker_options {', '.join(map(str, asked))} need the package rmm, which dask-cuda does "
        f"not install, but the executor's Python{where} cannot import rmm. Install rmm on every "
        f"executor (it comes with cudf: %pip install cudf-cu12, or rmm-cu12 alone), or drop those "
        f"options."
    )


def _with_spill_limit(options: dict, pool, fraction) -> tuple[dict, str]:
    """Add ``device_memory_limit`` = ``fraction`` x ``pool`` unless the user set one."""
    if fraction in (None, False) or _key(options, "device_memory_limit") is not None:
        return options, ""
    limit = spill_limit(pool, fraction)
    if limit is None:
        return options, f"; device memory limit: dask-cuda default (pool size {pool!r} not understood)"
    options["device_memory_limit"] = limit
    shown = f"{limit:g} of the GPU" if isinstance(limit, float) else f"{limit / 2**30:.2f} GiB"
    return options, f"; spills at {shown} ({float(fraction):g} x pool)"


def rmm_option(
    spec: dict | None, gpu: str | None, options: dict | None, has_rmm: bool | None = None
) -> tuple[dict, str, str | None]:
    """Worker options with the RMM pool and the spill limit of a dask-cuda worker.

    Parameters
    ----------
    spec : dict or None
        ``{"pool": "auto" | bytes | None, "reserve": bytes, "fraction": float,
        "spill_fraction": float | None, "share": float | None}`` (``spark-dask.rapids.*``).
        ``share``: when Spark's own tasks use the same GPU (``gpu_mode="shared"``), an
        auto-sized pool takes at most this share of the GPU's total memory
        (``spark-dask.rapids.dask-fraction``), so a Spark pool that has not been made yet
        (or none at all: ``spark.rapids.memory.gpu.pool=NONE``) keeps the rest.
    gpu : str or None
        The worker's physical GPU.
    options : dict or None
        The user's worker options; an ``rmm_pool_size`` there always wins.
    has_rmm : bool, optional
        Whether ``rmm`` can be imported (default: look it up in this Python).

    Returns
    -------
    (dict, str, str or None)
        The options to use, what was decided (for the task's status row), and a
        warning for the user, or None. With a pool and no ``device_memory_limit`` of
        the user's, ``device_memory_limit`` is ``spill_fraction`` x pool.
    """
    options = dict(options or {})
    spill = (spec or {}).get("spill_fraction", DEFAULT_SPILL_FRACTION)
    key = _key(options, "rmm_pool_size")
    if key is not None and options[key] is not None:
        options, limit = _with_spill_limit(options, options[key], spill)
        return options, "rmm pool: worker_options" + limit, None
    if not spec or spec.get("pool") in (None, False, "none", "None"):
        return options, "rmm pool: off", None
    if has_rmm is None:
        has_rmm = rmm_installed()
    if not has_rmm:
        warning = (
            f"rmm is not installed, so the dask-cuda worker starts without the RMM pool that "
            f"spark-dask.rapids.rmm-pool-size={spec['pool']} asks for (dask-cuda does not "
            f"install rmm). Install it on the executors (it comes with cudf: %pip install "
            f"cudf-cu12), or set spark-dask.rapids.rmm-pool-size to null."
        )
        return options, "rmm pool: none, rmm is not installed", warning
    if spec["pool"] != "auto":
        size = int(spec["pool"])
        options["rmm_pool_size"] = size
        options, limit = _with_spill_limit(options, size, spill)
        return options, f"rmm pool: {size} bytes (configured)" + limit, None
    if gpu is None:
        return options, "rmm pool: no GPU", None
    mem = gpu_free_memory(gpu)
    if mem is None:
        return options, "rmm pool: dask-cuda default (pynvml or the GPU driver unavailable)", None
    size = rmm_pool_size(mem[0], int(spec.get("reserve", 0)), float(spec.get("fraction", 1.0)))
    shared = ""
    if size is not None and spec.get("share"):
        cap = int(mem[1] * float(spec["share"])) // POOL_ALIGN * POOL_ALIGN
        if size > cap:
            size, shared = (
                (cap if cap >= MIN_POOL else None),
                f", at most {float(spec['share']):.0%} of the GPU (shared with Spark)",
            )
    if size is None:
        return options, f"rmm pool: none, only {mem[0] / 2**30:.1f} GiB free on GPU {gpu}{shared}", None
    options["rmm_pool_size"] = size
    options, limit = _with_spill_limit(options, size, spill)
    note = f"rmm pool: {size / 2**30:.2f} GiB of {mem[0] / 2**30:.1f} GiB free on GPU {gpu}{shared}"
    return options, note + limit, None
