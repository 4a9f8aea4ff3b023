"""``spark-dask doctor``: check every executor before a Dask cluster starts there.

:func:`doctor` opens a listener where the scheduler would listen, runs one short Spark
job (one task per task slot, :mod:`spark_dask.executor.checkup`) and reads back, per
executor host, what would otherwise surface as a worker dying at start: another Python,
``distributed`` missing or of another release, Dask's other packages of other versions,
the gang's task code not unpickling, the driver's port out of reach, little local disk,
and on GPU executors NVML, the CUDA driver, dask-cuda, cudf, rmm, CuPy and nvJitLink,
and the RAPIDS Accelerator's jar against the running Spark. No Dask process starts.

The judgement is pure (:func:`findings`, :func:`rapids_jar_problem`): tested without
Spark. Every message is on docs/troubleshooting.md.
"""

from __future__ import annotations

import contextlib
import json
import platform
import re
import socket
import sys
import threading
import zipfile
from dataclasses import dataclass, field

from dask.utils import format_bytes, parse_timedelta

from spark_dask import executor
from spark_dask.errors import DoctorError
from spark_dask.executor import checkup, gang_task
from spark_dask.executor.command import unreachable_message, version_problem
from spark_dask.options import config
from spark_dask.plan import gpu_sharing, memory_advice
from spark_dask.sizes import plural
from spark_dask.spark import daemon
from spark_dask.spark.compat import jvm_reachable
from spark_dask.spark.conf import conf
from spark_dask.spark.session import cluster_facts, collect_within, driver_host, executor_ids
from spark_dask.spark.shipping import ship_by_value, spark_dumps

# Free bytes under an executor's Spark local directories below which the doctor warns
# (the hand-off's files and the workers' spill go there).
LOW_DISK = 2 * 1024**3
# Packages whose version differs between driver and executors: what follows.
SAME_RELEASE = ("dask",)  # like distributed: the protocol between releases is not kept
SHOULD_MATCH = ("cloudpickle", "msgpack", "pandas", "pyarrow")  # Dask warns; the hand-off's frames


@dataclass(frozen=True)
class Finding:
    """One thing the doctor found: ``problem`` (the cluster would fail) or not (it would
    start, with the consequence the text says); ``fix``: what to run or set."""

    text: str
    fix: str
    problem: bool = True
    hosts: tuple[str, ...] = ()


@dataclass
class Checkup:
    """What :func:`doctor` found; :meth:`render` is what ``spark-dask doctor`` prints,
    :meth:`to_dict` what ``spark-dask doctor --json`` prints.

    Attributes
    ----------
    spark : dict
        The application: ``master``, ``version``, ``executors``, ``slots``,
        ``executor_gpus``, ``scheduler`` (the address checked), and with GPUs
        ``gpu_mode_auto``.
    driver : dict
        The driver's ``python``, ``executable`` and package ``versions``.
    hosts : dict
        Per executor host what its executors answered (``python``, ``versions``,
        ``import_errors``, ``unpickles``, ``reach``, ``local_dirs``, ``gpu``) and
        which ``executors`` answered.
    findings : list of Finding
        Problems first (``problem=True``: a cluster would fail), then warnings; each
        with its ``fix`` and the ``hosts`` it was seen on.
    ready : bool
        No problem found.
    """

    spark: dict
    driver: dict
    hosts: dict[str, dict] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)

    @property
    def ready(self) -> bool:
        return not any(f.problem for f in self.findings)

    def to_dict(self) -> dict:
        return {
            "ready": self.ready,
            "spark": self.spark,
            "driver": self.driver,
            "hosts": self.hosts,
            "findings": [f.__dict__ | {"hosts": list(f.hosts)} for f in self.findings],
        }

    def render(self) -> str:
        return render(self)


def _release(version: str | None) -> str | None:
    return ".".join(version.split(".")[:2]) if version else None


def version_findings(driver: dict, answer: dict, host: str) -> list[Finding]:
    """The executor's Python and package versions against the driver's.

    >>> d = {"python": "3.11.7", "versions": {"distributed": "2026.8.0", "pandas": "2.3.1", "pyarrow": "21.0.0"}}
    >>> e = {"python": "3.12.1", "versions": {"distributed": "2026.8.0", "pandas": "2.2.0", "pyarrow": "21.0.0"}}
    >>> [(f.problem, f.text.split(": ")[1]) for f in version_findings(d, e, "h")]
    [(True, 'Spark refuses Python tasks across minor versions'), (False, 'pandas 2.2.0 there, 2.3.1 here')]
    """
    out = []
    if _release(driver["python"]) != _release(answer["python"]):
        out.append(
            Finding(
                f"the executors' Python is {answer['python']} ({answer.get('executable')}), the driver's "
                f"{driver['python']}: Spark refuses Python tasks across minor versions",
                f"run the executors and the driver on one Python {_release(driver['python'])} "
                "(spark.pyspark.python / PYSPARK_PYTHON on every node)",
                hosts=(host,),
            )
        )
    error = answer.get("import_errors", {}).get("distributed")
    mine, theirs = driver["versions"], answer["versions"]
    if error:
        out.append(
            Finding(
                f"distributed does not import on the executors ({error})",
                f"install the driver's version on every executor: pip install distributed=={mine.get('distributed')} "
                "(Databricks: %pip install in the notebook installs it on the executors too)",
                hosts=(host,),
            )
        )
    else:
        said = version_problem(mine.get("distributed") or "", theirs.get("distributed"), f"the executors on {host}")
        if said is not None:
            out.append(
                Finding(
                    said[1],
                    f"pip install distributed=={mine.get('distributed')} on every executor",
                    problem=said[0] == "error",
                    hosts=(host,),
                )
            )
    for name in SAME_RELEASE + SHOULD_MATCH:
        if theirs.get(name) is None and name == "pyarrow":
            out.append(
                Finding(
                    "pyarrow is not installed on the executors (Spark's Arrow exchange and the hand-off need it)",
                    f"pip install pyarrow=={mine.get(name)} on every executor",
                    hosts=(host,),
                )
            )
        elif theirs.get(name) not in (None, mine.get(name)):
            problem = name in SAME_RELEASE and _release(theirs[name]) != _release(mine.get(name))
            out.append(
                Finding(
                    f"a package's version differs between the executors and the driver: {name} {theirs[name]} "
                    f"there, {mine.get(name)} here"
                    + (
                        ": Dask's scheduler and workers of other releases do not work together"
                        if problem
                        else ": Dask warns of it when the workers join, and frames may not travel between them"
                    ),
                    f"pip install {name}=={mine.get(name)} on every executor",
                    problem=problem,
                    hosts=(host,),
                )
            )
    out += delta_findings(driver, answer, host)
    return out


def delta_findings(driver: dict, answer: dict, host: str) -> list[Finding]:
    """Where the driver has ``spark-dask[delta]`` (pyroaring) and an executor does not:
    ``read_delta`` of a table with deletion vectors fails there (issue 55).

    >>> e = {"import_errors": {"pyroaring": "ModuleNotFoundError: No module named 'pyroaring'"}}
    >>> [f.text[:45] for f in delta_findings({"pyroaring": "1.0.0"}, e, "h")], delta_findings({}, e, "h")
    (['pyroaring does not import on the executors (M'], [])
    """
    error = answer.get("import_errors", {}).get("pyroaring")
    if not driver.get("pyroaring") or not error:
        return []
    return [
        Finding(
            f"pyroaring does not import on the executors ({error}): read_delta cannot apply a Delta table's deletion "
            "vectors on the Dask workers there",
            "pip install 'spark-dask[delta]' on every executor",
            problem=False,
            hosts=(host,),
        )
    ]


def host_findings(answer: dict, scheduler: str) -> list[Finding]:
    """The task code, the scheduler's port and the local disk, as one executor saw them."""
    host, out = answer["host"], []
    if answer.get("unpickles"):
        out.append(
            Finding(
                f"spark-dask's task code does not unpickle on the executors ({answer['unpickles']})",
                "run the executors on the driver's Python and cloudpickle versions",
                hosts=(host,),
            )
        )
    if answer.get("reach"):
        out.append(
            Finding(
                unreachable_message(f"a process on executor host {host}", scheduler, answer["reach"]),
                "scheduler_host=<an address of the driver the executors route to>, or open the "
                "driver's ports to the executors",
                hosts=(host,),
            )
        )
    for path, free in answer.get("local_dirs", {}).items():
        if free is not None and free < LOW_DISK:
            out.append(
                Finding(
                    f"{format_bytes(free)} free under the Spark local directory {path}: the hand-off's "
                    "files and the workers' spill go there",
                    "free space there or point SPARK_LOCAL_DIRS to a larger disk",
                    problem=False,
                    hosts=(host,),
                )
            )
    return out


def gpu_findings(answer: dict, host: str) -> list[Finding]:
    """A GPU executor's NVML, CUDA driver and RAPIDS packages.

    >>> a = {"nvml": {"gpus": ["H200"], "cuda_driver": "12.4"}, "spark_gpus": ["0"],
    ...      "versions": {"dask_cuda": "26.8.0", "cudf": None, "nvJitLink": "12.9.86"},
    ...      "import_errors": {"dask_cuda": None, "cudf": "ModuleNotFoundError: No module named 'cudf'"}}
    >>> [(f.problem, f.text.split(":")[0]) for f in gpu_findings(a, "h")]
    [(True, "nvJitLink 12.9.86 is newer than the driver's CUDA 12.4"), (False, "the GPU executors' cudf is not installed")]
    """
    out, nvml = [], answer["nvml"]
    if nvml.get("error"):
        out.append(
            Finding(
                f"NVML cannot be read on a GPU executor ({nvml['error']}): dask-cuda needs it",
                "pip install nvidia-ml-py on every executor; check the NVIDIA driver (nvidia-smi)",
                hosts=(host,),
            )
        )
    elif not nvml.get("gpus"):
        out.append(
            Finding(
                "NVML sees no GPU on an executor that Spark gave GPUs",
                "check spark.executor.resource.gpu.discoveryScript and the NVIDIA driver",
                hosts=(host,),
            )
        )
    versions, errors = answer["versions"], answer["import_errors"]
    cuda = nvml.get("cuda_driver")
    jit = versions.get("nvJitLink")
    if cuda and jit and tuple(map(int, jit.split(".")[:2])) > tuple(map(int, cuda.split(".")[:2])):
        out.append(
            Finding(
                f"nvJitLink {jit} is newer than the driver's CUDA {cuda}: cudf and CuPy fail to compile kernels",
                f"pip install 'nvidia-nvjitlink-cu{cuda.split('.')[0]}<{_next_minor(cuda)}' on every executor, "
                "or a newer NVIDIA driver",
                hosts=(host,),
            )
        )
    for name in checkup.GPU:
        error = errors.get(name)
        if error is None:
            continue
        missing = versions.get(name) is None and "No module named" in error
        needed = name in ("dask_cuda", "pynvml")
        out.append(
            Finding(
                f"the GPU executors' {name} "
                + ("is not installed" if missing else f"is installed but does not import ({error})")
                + ("" if needed or not missing else ": dask-cudf and RAPIDS work need it"),
                f"pip install {gpu_wheel(name, cuda)} on every executor"
                + ("" if missing else " (the wheel for the driver's CUDA, here " + (cuda or "unknown") + ")"),
                problem=needed or not missing,
                hosts=(host,),
            )
        )
    return out


def gpu_wheel(name: str, cuda: str | None) -> str:
    """What to pip install for import ``name`` with the driver's CUDA ``cuda``.

    >>> gpu_wheel("cudf", "12.4"), gpu_wheel("cupy", "13.0"), gpu_wheel("rmm", None)
    ('cudf-cu12 dask-cudf-cu12', 'cupy-cuda13x', 'rmm-cu12')
    """
    major = cuda.split(".")[0] if cuda else "12"
    return {
        "dask_cuda": "dask-cuda",
        "cudf": f"cudf-cu{major} dask-cudf-cu{major}",
        "rmm": f"rmm-cu{major}",
        "cupy": f"cupy-cuda{major}x",
        "pynvml": "nvidia-ml-py",
    }[name]


def _next_minor(version: str) -> str:
    major, minor = (int(p) for p in version.split(".")[:2])
    return f"{major}.{minor + 1}"


SHIM = re.compile(r"^(spark\d{3,}(?:db\d*)?)/")


def rapids_jar_problem(jar_entries, spark_version: str, databricks: bool) -> str | None:
    """Whether a RAPIDS Accelerator jar (its entries' names) has a shim for this Spark.

    >>> rapids_jar_problem(["spark350/a.class", "spark351/b.class"], "3.5.1", False) is None
    True
    >>> rapids_jar_problem(["spark350/a.class"], "3.5.5", False)
    'has no shim for Spark 3.5.5 (it has spark350)'
    """
    shims = sorted({m.group(1) for e in jar_entries if (m := SHIM.match(e))})
    if not shims:
        return None  # not a shimmed jar (a thin jar, or another layout): nothing to judge
    want = "spark" + "".join(spark_version.split("-")[0].split(".")[:3])
    have = [s for s in shims if (s.startswith(want + "db") if databricks else s == want)]
    if have:
        return None
    return f"has no shim for Spark {spark_version} (it has {', '.join(shims)})"


def rapids_findings(spark, version: str) -> list[Finding]:
    """The RAPIDS Accelerator's jar, where the plugin is on, against the running Spark."""
    if "com.nvidia.spark.SQLPlugin" not in (conf(spark, "spark.plugins") or ""):
        return []
    paths = [p for key in ("spark.jars", "spark.driver.extraClassPath") for p in (conf(spark, key) or "").split(",")]
    jars = [p.split(":", 1)[-1] if p.startswith("file:") else p for p in paths if "rapids-4-spark" in p]
    out = []
    for jar in jars:
        try:
            with zipfile.ZipFile(jar) as z:
                problem = rapids_jar_problem(
                    z.namelist(), version, bool(conf(spark, "spark.databricks.clusterUsageTags.sparkVersion"))
                )
        except (OSError, zipfile.BadZipFile):
            continue
        if problem:
            out.append(
                Finding(
                    f"the RAPIDS Accelerator jar {jar} {problem}: NoSuchMethodError at the first GPU query",
                    "use the rapids-4-spark jar built for this Spark (NVIDIA's support matrix lists the "
                    "runtimes of each release)",
                )
            )
    return out


def daemon_findings(daemon_module: str | None, answers: list[dict]) -> list[Finding]:
    """Where every executor has spark_dask installed and the application runs Spark's
    own Python daemon: the preloading one would make each cluster's first start warm.

    >>> [f.fix.split(" when")[0] for f in daemon_findings(None, [{"spark_dask_installed": True}])]
    ['set spark.python.daemon.module=spark_dask.spark.daemon']
    >>> daemon_findings("sentry_daemon", [{"spark_dask_installed": True}])  # someone else's daemon
    []
    """
    if daemon_module not in (None, "pyspark.daemon") or not answers:
        return []
    if not all(a.get("spark_dask_installed") for a in answers):
        return []
    return [
        Finding(
            "a Dask cluster's first start in this application imports distributed in each Spark task's new "
            "Python worker (a cold start: about a second of CPU per worker on the executors' cores)",
            f"set {daemon.CONF}={daemon.MODULE} when the application starts (on Databricks: the cluster's "
            "Spark config); spark_dask is installed on every executor, so its Python daemon can preload "
            "distributed (docs/workers.md)",
            problem=False,
        )
    ]


def memory_findings(facts) -> list[Finding]:
    """What the start would warn of the workers' memory (one worker per executor, with
    ``memory_limit="auto"``): room in the executors' containers (YARN, Kubernetes),
    PySpark's address-space limit. Not problems: the workers would start.

    >>> from spark_dask.capacity import ClusterFacts
    >>> f = ClusterFacts(executors=2, executor_cores=2, executor_memory=0, master="yarn", container_room=0)
    >>> [x.fix.split(" when")[0] for x in memory_findings(f)]
    ['raise spark.executor.memoryOverhead']
    """
    return [Finding(what, fix[0].lower() + fix[1:], problem=False) for what, fix in memory_advice(facts, "auto", 1)]


def findings(driver: dict, answers: list[dict], scheduler: str, unseen: list[str]) -> list[Finding]:
    """Everything the answers say, each finding once with the hosts it was seen on."""
    found: dict[tuple, Finding] = {}
    for answer in answers:
        host = answer["host"]
        items = version_findings(driver, answer, host) + host_findings(answer, scheduler)
        if answer.get("gpu"):
            items += gpu_findings(answer["gpu"], host)
        for f in items:
            key = (f.text.replace(host, "<host>"), f.fix, f.problem)
            old = found.get(key)
            found[key] = (
                f if old is None else Finding(old.text, old.fix, old.problem, tuple(sorted({*old.hosts, host})))
            )
    out = list(found.values())
    if unseen:
        out.append(
            Finding(
                f"no check ran on executor(s) {', '.join(unseen)}: their task slots were busy, or they joined late",
                "run the doctor again when the application is idle",
                problem=False,
            )
        )
    return sorted(out, key=lambda f: not f.problem)


def driver_side() -> dict:
    return {
        "python": platform.python_version(),
        "executable": sys.executable,
        "versions": {name: checkup.version_of(dist) for name, dist in checkup.CORE.items()},
        "pyroaring": checkup.version_of("pyroaring"),
    }


class Listener:
    """A TCP listener where the scheduler would listen; accepts and closes, in a thread."""

    def __init__(self, bind: str, port: int = 0):
        try:
            self.sock = socket.create_server((bind, port), backlog=128)
        except OSError as e:
            raise DoctorError(
                f"spark-dask: the doctor cannot listen on {bind}:{port} as the scheduler would ({e}): "
                "scheduler_host (--scheduler-host) must be an address of this machine"
            ) from None
        self.port = self.sock.getsockname()[1]
        self.thread = threading.Thread(target=self._accept, name="spark-dask-doctor-listener", daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            conn.close()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes the accept(); a close() alone does not
        self.sock.close()
        self.thread.join(5)


def doctor(
    spark, *, timeout: float | None = None, dial_timeout: float = 5.0, scheduler_host: str | None = None, port: int = 0
) -> Checkup:
    """Check every executor of ``spark`` before a Dask cluster starts there.

    Runs one short Spark job (one task per task slot; no Dask process) and returns a
    :class:`Checkup`: per executor host the Python and package versions against the
    driver's, import errors, whether the gang's task code unpickles, whether a process
    started there reaches a listener on the driver's scheduler address, the free local
    disk, and on GPU executors NVML, the CUDA driver and the RAPIDS packages; then what
    to fix. ``print(checkup.render())`` shows it as ``spark-dask doctor`` does.

    Parameters
    ----------
    spark : SparkSession
        Classic or Spark Connect.
    timeout : float, optional
        Seconds the check's job may take (default: ``spark-dask.executor-wait``, at
        least 30 s); a job still waiting for task slots then is cancelled.
    dial_timeout : float
        Seconds each executor's process tries to reach the driver's listener.
    scheduler_host : str, optional
        The address to check, as ``start(scheduler_host=...)`` would use.
    port : int
        The port to listen on (0: any free one, as the scheduler's).

    Returns
    -------
    Checkup

    Raises
    ------
    DoctorError
        The check's job failed on the executors (their Python could not run it), or
        did not end within ``timeout`` (cancelled).

    Examples
    --------
    >>> print(spark_dask.doctor(spark).render())        # doctest: +SKIP
    spark-dask doctor: local-cluster[2,1,1024], Spark 4.3.0, 2 executors on 1 host; ...
    ready: every executor can start Dask workers.
    """
    wait = timeout if timeout is not None else max(30.0, parse_timedelta(config.get("executor-wait")))
    facts = cluster_facts(spark, wait)
    version = spark.version
    bind, host = driver_host(spark, config.get("scheduler-host", scheduler_host))
    listener = Listener(bind, port)
    scheduler = f"{host}:{listener.port}"
    try:
        ship_by_value(*executor.SHIPPED)
        spec = {
            "host": host,
            "port": listener.port,
            "timeout": dial_timeout,
            "gpu": facts.executor_gpus > 0,
            "code": _task_code(),
        }
        rows = run_checkup(spark, checkup.checkup_partition(spec), max(facts.slots or facts.executors, 1), wait)
    finally:
        listener.close()
    answers, hosts = group_answers(json.loads(r["info"]) for r in rows)
    expected = executor_ids(spark.sparkContext) if jvm_reachable(spark) else []
    unseen = sorted(set(expected) - set(answers)) if set(answers) <= set(expected) else []
    driver = driver_side()
    found = findings(driver, list(answers.values()), scheduler, unseen)
    found += daemon_findings(conf(spark, daemon.CONF), list(answers.values()))
    found += memory_findings(facts)
    if facts.executor_gpus > 0:
        found += rapids_findings(spark, version)
    info = {
        "master": facts.master,
        "version": version,
        "executors": facts.executors,
        "slots": facts.slots,
        "executor_gpus": facts.executor_gpus,
        "scheduler": scheduler,
    }
    if facts.executor_gpus > 0:
        info["gpu_mode_auto"] = gpu_sharing(facts, "auto", facts.task_profiles)[0]
    return Checkup(info, driver, hosts, found)


def group_answers(rows) -> tuple[dict[str, dict], dict[str, dict]]:
    """The tasks' answers, one per executor (with the GPUs of all its tasks), and per
    host the first executor's answer with the list of its ``executors``."""
    answers: dict[str, dict] = {}
    for a in rows:
        first = answers.setdefault(a["executor"], a)
        if first is not a and a.get("gpu") and first.get("gpu"):
            first["gpu"]["spark_gpus"] = sorted({*first["gpu"]["spark_gpus"], *a["gpu"]["spark_gpus"]})
    hosts: dict[str, dict] = {}
    for a in answers.values():
        hosts.setdefault(a["host"], {**a, "executors": []})["executors"].append(a["executor"])
    return answers, hosts


def _task_code() -> bytes:
    """The gang's task function pickled as the launcher ships it (by value)."""
    return spark_dumps(gang_task.run_task)


PYTHON_ERROR = re.compile(r"^\s*([A-Za-z_][\w.]*(?:Error|Exception|Exit)\b.*)$")


def job_error(error: BaseException) -> str:
    """A failed Spark job's cause in one line: the Python worker's own exception where
    the text carries its traceback (the last ``...Error: ...`` line), else the first line.

    >>> job_error(RuntimeError("An exception was thrown from the Python worker:\\n"
    ...     "Traceback (most recent call last):\\n  ...\\nModuleNotFoundError: No module named 'pyarrow'\\n"))
    "ModuleNotFoundError: No module named 'pyarrow'"
    """
    lines = str(error).strip().splitlines()
    found = [m.group(1).strip() for line in lines if (m := PYTHON_ERROR.match(line))]
    return found[-1] if found else checkup.one_line(error)


def run_checkup(spark, fn, tasks: int, wait: float) -> list:
    """The check's job: ``tasks`` tasks, each one row; cancelled (an error saying so)
    when it has not ended within ``wait`` seconds."""
    try:
        rows = collect_within(spark, fn, tasks, wait, "spark-dask: doctor")
    except Exception as e:
        raise DoctorError(
            f"spark-dask: the doctor's check job failed on the executors ({job_error(e)}): their Python "
            "could not run even the check. Install pyarrow there, and run the executors on the driver's Python "
            "(spark.pyspark.python, PYSPARK_PYTHON)."
        ) from e
    if rows is None:
        raise DoctorError(
            f"spark-dask: the doctor's check job did not end within {wait:g}s (its {plural(tasks, 'task')} waited "
            "for task slots held by other jobs?): cancelled. Run it again when the application is idle, or "
            "give it longer (--timeout)."
        )
    return rows


def local_dir(path: str) -> str:
    """The directory a user set (``SPARK_LOCAL_DIRS``, ``spark.local.dir``) of the block
    manager directory Spark gives its Python workers.

    >>> local_dir("/local_disk0/spark-4d9d/executor-f3ad/blockmgr-a154")
    '/local_disk0'
    """
    return re.sub(r"/spark-[^/]+/.*$", "", path) or path


def render(c: Checkup) -> str:
    """What ``spark-dask doctor`` prints: the application, each host, what to fix."""
    s = c.spark
    lines = [
        f"spark-dask doctor: {s['master']}, Spark {s['version']}, {plural(s['executors'], 'executor')} on "
        f"{plural(len(c.hosts), 'host')}; driver Python {c.driver['python']}; scheduler address {s['scheduler']}"
    ]
    if "gpu_mode_auto" in s:
        lines.append(f"GPUs per executor: {s['executor_gpus']:g}; gpu_mode='auto' picks {s['gpu_mode_auto']}")
    for host, a in sorted(c.hosts.items()):
        lines.append(f"{host} (executors {', '.join(sorted(a['executors']))}):")
        versions = ", ".join(f"{k} {v or '-'}" for k, v in a["versions"].items())
        lines.append(f"  Python {a['python']} ({a['executable']}); {versions}")
        lines.append(
            f"  scheduler reached: {'yes' if not a['reach'] else 'no: ' + a['reach']}; task code unpickles: "
            f"{'yes' if not a['unpickles'] else 'no'}; local disk free: "
            + (
                ", ".join(
                    f"{local_dir(p)} {format_bytes(f) if f is not None else '?'}" for p, f in a["local_dirs"].items()
                )
                or "-"
            )
        )
        if a.get("gpu"):
            g = a["gpu"]
            nv = (
                g["nvml"].get("error")
                or f"{len(g['nvml'].get('gpus', []))} GPU(s), CUDA driver {g['nvml'].get('cuda_driver')}"
            )
            lines.append(
                f"  GPUs: Spark {', '.join(g['spark_gpus']) or '-'}; NVML {nv}; "
                + ", ".join(f"{k} {v or '-'}" for k, v in g["versions"].items())
            )
    problems = [f for f in c.findings if f.problem]
    for f in c.findings:
        where = f" [{', '.join(f.hosts)}]" if f.hosts else ""
        lines.append(f"{'problem' if f.problem else 'warning'}{where}: {f.text}.\n  fix: {f.fix}")
    lines.append(
        "ready: every executor can start Dask workers."
        if not problems
        else f"not ready: {plural(len(problems), 'problem')} to fix (above)."
    )
    return "\n".join(lines)
