"""Every option of spark-dask, described once.

This table is the one source of:

- the ``Parameters`` section of :class:`spark_dask.SparkCluster`'s docstring,
- the options of ``spark-dask run`` and ``spark-dask info`` (click, built from it by :mod:`spark_dask.cli`),
- ``spark_dask/spark_dask.yaml`` (the ``dask.config`` defaults, ``spark-dask.*``),
- ``docs/configuration.md`` and the options table of ``README.md``.

The generated files are written by ``python tools/generate.py`` and checked by
``tests/unit/test_generated.py`` (which also checks that ``SparkCluster.__init__``'s keyword
arguments, this table and the YAML agree). Texts use Markdown: single backticks for
code; the docstring generator turns them into reStructuredText literals.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

GROUPS = {
    "workers": "Workers: how many, what they run, their size",
    "startup": "Start-up, teardown and faults",
    "security": "Network and security",
    "output": "Dashboard, progress and logs",
    "gpu": "GPUs and RAPIDS",
}


@dataclass(frozen=True)
class Cli:
    """How ``spark-dask run`` / ``info`` / ``doctor`` spell an option.

    ``flag`` is the click declaration (``"--tls/--no-tls"`` for a switch pair);
    ``kind`` one of ``str``, ``int>=1``, ``int>=0``, ``choice``, ``switch``,
    ``key-values`` (``KEY=VALUE``, repeatable), ``typed-key-values`` (``KEY=VALUE`` with
    YAML-typed values), ``bool-choice`` (``auto|true|false``), ``groups``
    (``NAME:KEY=VALUE,...``, repeatable: :func:`spark_dask.options.groups.parse_flag`).
    """

    flag: str
    kind: str = "str"
    commands: tuple[str, ...] = ("run",)
    metavar: str | None = None
    choices: tuple[str, ...] = ()
    help: str = ""  # where the option's own one-liner does not fit a command line

    @property
    def name(self) -> str:
        """The first long flag, e.g. ``--tls`` for ``--tls/--no-tls``."""
        return self.flag.split("/")[0]


@dataclass(frozen=True)
class Option:
    """One option.

    Parameters
    ----------
    key : str
        The ``dask.config`` key under ``spark-dask.`` (``n-workers``, ``rapids.rmm-pool-size``).
    default
        The default, as ``spark_dask.yaml`` holds it.
    type : str
        The numpydoc type of the keyword argument (``"int, optional"``).
    help : str
        One line (CLI help, README, YAML comment, first line of the docstring entry).
    doc : str
        Everything else worth knowing (docstring entry and configuration page).
    group : str
        Section of the configuration page (a key of :data:`GROUPS`).
    keyword : bool
        Whether ``SparkCluster()`` / ``start()`` take it as a keyword argument.
    config : bool
        Whether it is a ``dask.config`` key (``env`` is a keyword argument only).
    default_text : str
        The default in words where the value alone does not say it (``null`` ...).
    cli : Cli or None
        The command-line option, if any.
    """

    key: str
    default: Any
    type: str
    help: str
    doc: str = ""
    group: str = "workers"
    keyword: bool = False
    config: bool = True
    default_text: str = ""
    cli: Cli | None = None
    time: bool = field(default=False)  # a duration, read with dask.utils.parse_timedelta

    @property
    def name(self) -> str:
        """The keyword argument's name (``n_workers``); for config-only keys the
        key with ``_`` (``close_timeout``)."""
        return self.key.replace("-", "_")

    @property
    def env_var(self) -> str:
        return "DASK_SPARK_DASK__" + self.key.upper().replace("-", "_").replace(".", "__")

    @property
    def shown_default(self) -> str:
        """The default as the docs show it."""
        if self.default_text:
            return self.default_text
        return yaml_scalar(self.default)


def yaml_scalar(value) -> str:
    """A default as YAML writes it (``null``, ``true``, ``{}``, ``180s``, ``0.8``)."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value == {}:
        return "{}"
    return str(value)


OPTIONS: tuple[Option, ...] = (
    # ------------------------------------------------------------------ workers
    Option(
        "n-workers",
        None,
        "int, optional",
        "Number of Dask workers at start; `cluster.scale(n)` / `cluster.adapt(...)` change it later.",
        "The gang needs one Spark task slot per barrier task at once; more than the application "
        "has is a `PlanError` at once (instead of Spark's ten minutes of retries). Under dynamic "
        "allocation the default is one per executor present now (at least one).",
        keyword=True,
        default_text="one per executor GPU, else one per executor",
        cli=Cli("--n-workers", "int>=1", ("run", "info")),
    ),
    Option(
        "worker",
        "auto",
        "{'auto', 'cuda', 'cpu'}, optional",
        "Worker program: `cuda` (dask-cuda), `cpu` (nanny + worker); `auto`: `cuda` when the Spark tasks own GPUs.",
        "`cuda` runs `python -m dask cuda worker` (one worker per GPU, pinned with "
        "`CUDA_VISIBLE_DEVICES`); `cpu` runs `python -m distributed.cli.dask_worker` under a nanny. "
        "Both with the Spark task's own interpreter (`sys.executable`), never a script from `PATH`.",
        keyword=True,
        cli=Cli("--worker", "choice", ("run", "info"), choices=("auto", "cuda", "cpu")),
    ),
    Option(
        "threads-per-worker",
        None,
        "int, optional",
        "Threads per worker.",
        "dask-cuda workers get dask-cuda's own default, 1: tasks on one worker share its GPU, and "
        "more threads make them compete for device memory rather than run faster. CPU workers get "
        "the CPUs of their Spark task, or the executor's cores when the gang has one task on that "
        "executor, divided over the task's workers. More than `spark.executor.cores` is a "
        "`PlanError`.",
        keyword=True,
        default_text="dask-cuda: 1; CPU: the task's CPUs (executor cores with one gang task per executor)",
        cli=Cli("--threads-per-worker", "int>=1", ("run", "info")),
    ),
    Option(
        "memory-limit",
        "auto",
        "int or str, optional",
        "Memory per worker: bytes, a size such as `8GiB`, or `auto`.",
        "`auto`: the host's memory (cgroup-aware) left after the executor JVMs placed on it (every "
        "executor of the host, whether it runs one of the cluster's tasks or not: `spark-dask info` "
        "predicts what the start gives), split "
        "over the Dask workers on that host, at least 256 MiB. A number of bytes or a string such "
        'as `"8GiB"` sets it for every worker; more than the host has is refused (before anything '
        "is submitted on `local`/`local-cluster` masters, else by the task on its host).",
        keyword=True,
        cli=Cli("--memory-limit", "str", ("run", "info"), metavar="auto|SIZE"),
    ),
    Option(
        "worker-options",
        {},
        "dict, optional",
        'Extra worker command-line options, e.g. `{"rmm_pool_size": "10GB"}` → `--rmm-pool-size 10GB`.',
        "Checked on the driver against the worker program (`dask worker`, or `dask cuda worker`) "
        "before anything starts: an unknown option, a value of the wrong shape, or an option "
        "spark-dask sets itself (`name`, `nthreads`, TLS, ...) is a `PlanError` naming the keyword "
        "to use instead. Not checked with a `worker_command` template. The rules (switches, lists, "
        "`resources`, `preload`, `nanny=False`) are in [Workers](workers.md#worker-options).",
        keyword=True,
        cli=Cli(
            "--worker-option",
            "typed-key-values",
            metavar="KEY=VALUE",
            help="Extra worker command-line option, e.g. `rmm_pool_size=10GB` or `nanny=false` "
            "(repeatable; values are read as YAML).",
        ),
    ),
    Option(
        "worker-command",
        None,
        "str or list, optional",
        "A command template (string or list) that replaces the default worker command.",
        "Any program that speaks Dask's protocol. Placeholders: `{python}` `{scheduler_address}` "
        "`{name}` `{nthreads}` `{memory_limit}` `{local_directory}` `{tls_ca_file}` `{tls_cert}` "
        "`{tls_key}` `{preload}` `{death_timeout}`; `worker_options` are appended as flags. See "
        "[Workers](workers.md#the-worker-command-template).",
        keyword=True,
        cli=Cli("--worker-command", "str", metavar="TEMPLATE"),
    ),
    Option(
        "env",
        None,
        "dict, optional",
        "Environment variables for the worker processes.",
        "Workers pinned to a GPU also get `CUDA_VISIBLE_DEVICES` and `CUDA_DEVICE_ORDER=PCI_BUS_ID` "
        "(a `CUDA_DEVICE_ORDER` of yours wins).",
        keyword=True,
        config=False,
        default_text="none",
        cli=Cli(
            "--env",
            "key-values",
            metavar="KEY=VALUE",
            help="Environment variable for the worker processes (repeatable).",
        ),
    ),
    Option(
        "worker-groups",
        {},
        "dict, optional",
        "More kinds of worker beside the default ones: `{name: {worker, n_workers, ...}}`.",
        "Each group is a name (letters, digits, `_`) and a dict of `worker` (`cpu` or `cuda`), "
        "`n_workers`, `threads_per_worker`, `memory_limit`, `resources`, `worker_options` and "
        "`env`; its gangs run beside the default group's, each with a Spark task profile of its "
        "own (a `cpu` group on GPU executors holds no GPU). Its workers carry the Dask resource "
        '`group-<name>` for `client.submit(..., resources={"group-<name>": 1})`. '
        "`cluster.add_worker_group(...)`, `scale(n, group=...)` and `remove_worker_group(...)` "
        "change them later. See [Worker groups](user-guide.md#worker-groups).",
        keyword=True,
        default_text="none",
        cli=Cli(
            "--worker-group",
            "groups",
            ("run", "info"),
            metavar="NAME:KEY=VALUE,...",
            help="A worker group, e.g. `cpu:worker=cpu,n_workers=2,threads_per_worker=8` (repeatable; "
            "values are read as YAML).",
        ),
    ),
    Option(
        "multiprocessing-method",
        "fork",
        "str",
        "How the nanny of a CPU worker starts the worker process (`fork` | `spawn` | `forkserver`).",
        "`fork` skips a Python start-up and an import of distributed: faster start-up and restarts "
        "([Benchmarks](benchmarks.md#what-the-figures-mean)). Set `spawn` if a preload or worker "
        "plugin starts threads that must not be forked. For CPU workers "
        "`DASK_DISTRIBUTED__WORKER__MULTIPROCESSING_METHOD` in `env` wins. Not used for dask-cuda workers: `dask cuda worker` has its own option "
        "`--multiprocessing-method` (default `spawn`: CUDA does not survive fork), which it writes "
        "over `distributed.worker.multiprocessing-method`, so neither this key nor the environment "
        'variable changes it; use `worker_options={"multiprocessing_method": "forkserver"}`.',
    ),
    Option(
        "fork-nanny",
        True,
        "bool",
        "The Spark task forks a CPU worker's nanny from its own Python process instead of starting a new Python.",
        "Saves the interpreter start and, where Spark reuses the task's Python worker (a cluster "
        "started again within a minute), the import of distributed: about half of a warm start "
        "([Benchmarks](benchmarks.md#what-the-figures-mean)). Only for CPU workers with the default "
        "command, a nanny and `multiprocessing-method` `fork`, and only when the task's Python "
        "process runs no other Python thread; otherwise, and with `false`, the task starts "
        "`python -m distributed.cli.dask_worker`. `ps` shows a forked nanny and its worker under "
        "the Python worker's command line (`-m pyspark.daemon`), named `dask-nanny` / "
        "`dask-worker`.",
    ),
    Option(
        "task-profile",
        "auto",
        "{'auto', True, False}, optional",
        "Ask Spark for a stage-level task resource profile for the gang.",
        "`auto`: where Spark supports it (Spark ≥ 3.4 on standalone/`local-cluster`, ≥ 3.5 on "
        "YARN/Kubernetes, dynamic allocation off; Spark Connect ≥ 4.0): whole GPUs per task "
        "(exclusive GPU mode), a CPU-only profile (shared GPU mode with whole-GPU Spark tasks), or "
        "`cores // 2 + 1` CPUs per task on CPU clusters, which puts one gang task on each executor "
        "and leaves the other cores to Spark. `true` asks for one even where it changes nothing; "
        "`false` never.",
        keyword=True,
        cli=Cli("--task-profile", "bool-choice", ("run", "info"), choices=("auto", "true", "false")),
    ),
    Option(
        "barrier",
        "auto",
        "{'auto', True, False}, optional",
        "Run the workers as one Spark barrier stage (`true`) or each as a Spark job of its own (`false`).",
        "`true`: one barrier stage per start or scale-up: its tasks start together or not at all, "
        "and one lost task or executor fails the whole stage, so Spark also ends the workers on "
        "healthy hosts (the cluster relaunches them). `false`: every worker is a Spark job of one "
        "task, all started together at start-up (every worker connected within `timeout`, or "
        "everything cancelled); a lost executor or host then costs only its own workers and their "
        "data, the cluster replaces them. `auto`: `true`, except under dynamic allocation, where "
        'Spark runs no barrier stages. See the design page\'s "Faults" section for the trade-off.',
        keyword=True,
        cli=Cli("--barrier", "bool-choice", ("run", "info"), choices=("auto", "true", "false")),
    ),
    # ------------------------------------------------------------------ start-up and teardown
    Option(
        "timeout",
        "180s",
        "str or float, optional",
        "How long `start()` waits for every worker before it fails.",
        'Seconds or a Dask time string (`"5m"`). On expiry `start()` raises with what is known '
        "(the barrier stage's job group, where to look) and nothing is left running.",
        group="startup",
        keyword=True,
        time=True,
        cli=Cli("--timeout", "str", metavar="DURATION"),
    ),
    Option(
        "name",
        None,
        "str, optional",
        "The cluster's name: other Python processes of this user on this host join it with "
        "`SparkCluster.from_name(name)`; `spark-dask list` shows it.",
        "Letters, digits, `.`, `_` and `-`, at most 64, starting with a letter or digit. Two "
        "running clusters of one user on one host cannot share a name (the second `start()` "
        "fails at once). The widget, `repr()` and the start-up line show it. See "
        "[Sharing a cluster](user-guide.md#sharing-a-cluster-between-processes).",
        group="startup",
        keyword=True,
        default_text="the Spark job tag, `spark-dask-<id>`",
        cli=Cli("--name", "str", metavar="NAME"),
    ),
    Option(
        "idle-timeout",
        None,
        "str or float, optional",
        "Close the cluster after this long without Dask tasks or work from its clients; its Spark "
        "task slots return to Spark.",
        'Seconds or a Dask time string (`"30m"`); `null`: never. Idle as distributed\'s '
        "scheduler counts it (`distributed.scheduler.idle-timeout`): no task queued, processing or "
        "changing state, no graph arriving; a client connecting or leaving counts as activity too. "
        "The owner's output and the log say when it closes, and why. Off by default; see "
        "[Databricks](databricks.md#shared-clusters) for a value on shared clusters.",
        group="startup",
        keyword=True,
        time=True,
        cli=Cli("--idle-timeout", "str", metavar="DURATION"),
    ),
    Option(
        "executor-wait",
        "30s",
        "str",
        "How long `start()` waits for executors to register before it checks the free task slots.",
        "Right after a Spark application starts its executors may not be registered yet. With "
        "Spark Connect, the first start in a session runs a short probe job until that many "
        "executors have answered (at most this long).",
        group="startup",
        time=True,
    ),
    Option(
        "slot-wait",
        "15s",
        "str",
        "The starting gang without any running task after this long fails `start()`; a scale-up "
        "gang still waiting for slots after this long is reported once, and waits on.",
        "Spark checks a barrier stage against the application's *total* slots; when they exist "
        "but are busy (another spark-dask cluster, a long Spark job) the stage would wait "
        "silently. The error names the stages that hold the slots.",
        group="startup",
        time=True,
    ),
    Option(
        "close-timeout",
        "10s",
        "str",
        "How long `close()` lets the gangs' Spark jobs end by themselves (all in the same window) "
        "before cancelling them.",
        "Also how long `close()` waits for the nannies to terminate their workers, and the bound of "
        "every wait on a worker while the cluster runs: a nanny asked to end its worker (scale-down, "
        "drain), a retiring worker's heartbeat, the workers' logs (`get_logs()`), the removal of "
        "transfer files. A worker that does not answer within it (frozen: SIGSTOP, a hang holding "
        "the GIL) is said and ended through its Spark task; the scaling, drain or close goes on.",
        group="startup",
        time=True,
    ),
    Option(
        "death-timeout",
        "60s",
        "str",
        "A worker that loses (or never finds) its scheduler exits after this long.",
        "Passed as `--death-timeout` to every worker; `worker_options` cannot set it.",
        group="startup",
        time=True,
    ),
    Option(
        "kill-grace",
        "5s",
        "str",
        "Seconds a worker process gets to exit after SIGTERM before SIGKILL (inside the Spark task).",
        "Also how long a worker whose nanny did not answer (its Spark task's line cut by the driver) "
        "gets to exit before its processes are killed.",
        group="startup",
        time=True,
    ),
    Option(
        "relaunch-attempts",
        3,
        "int, optional",
        "How often failed gangs (a lost executor) are relaunched while the cluster runs; each "
        "relaunch replaces only the failed gang's workers.",
        "A lost task or executor fails the whole barrier stage; the cluster notices at once, logs "
        "it and submits a new stage for the workers. Running Dask computations continue once the "
        "workers are back.",
        group="startup",
        keyword=True,
        cli=Cli("--relaunch-attempts", "int>=0"),
    ),
    Option(
        "lost-worker-grace",
        "20s",
        "str",
        "How long a Dask worker that lost its connection may take to come back before it is replaced.",
        "A worker whose connection broke (its host cut off or lost, its process killed) usually "
        "comes back by itself within seconds (its nanny restarts it in the same Spark task). One "
        "that has not after this long is replaced by a new Spark job (barrier stage) for it, so "
        "that a host that was cut off for a while costs its workers for about this long after "
        "the link is back.",
        group="startup",
        time=True,
    ),
    Option(
        "no-workers-timeout",
        "10 minutes",
        "str",
        "How long a running cluster may wait with 0 Dask workers (all lost, none placeable) before it fails.",
        "After lost executors or hosts the cluster relaunches what the executors left can hold "
        "and grows back when Spark has capacity again (a host replaced, an executor added). While "
        "it has no worker at all it says so; after this long it fails: every computation waiting "
        "for a worker fails with the reason and the cluster closes (no Spark job is left).",
        group="startup",
        time=True,
    ),
    Option(
        "drain-timeout",
        "30s",
        "str",
        "How long Dask may move a worker's data away when Spark decommissions its executor.",
        "With `spark.decommission.enabled` (spot reclaims, scale-down) the driver learns that an "
        "executor will go before it goes. Its Dask workers are retired at once: Dask moves the data "
        "only they hold to the other workers, then their Spark tasks end, so that the executor can "
        "leave without failing the barrier stage of the workers elsewhere; as many workers start "
        "again once Spark has a free task slot. After this long (or Spark's "
        "`spark.executor.decommission.forceKillTimeout` / `killInterval` less 5 s, where shorter) "
        "the workers are closed anyway and what was not moved is recomputed when needed. `0`: no "
        "data is moved. Spark Connect sessions cannot see decommissions (no driver access).",
        group="startup",
        time=True,
    ),
    Option(
        "close-on-sigterm",
        "auto",
        "str or bool",
        "Close running clusters when this Python process gets SIGTERM, then run the handler installed before.",
        "A detached or restarted notebook gets SIGTERM. The handler closes every running cluster "
        "with a one-second grace for the barrier job, at most about three seconds in all. `auto`: "
        "in interactive sessions (IPython/Jupyter, Databricks notebooks, `python -i`); `true`, "
        "`false`: always, never.",
        group="startup",
    ),
    # ------------------------------------------------------------------ network and security
    Option(
        "tls",
        True,
        "bool, optional",
        "TLS with fresh per-cluster credentials between scheduler, workers and clients.",
        "`false`: plain TCP, with a warning: anyone who can reach the driver's scheduler port can "
        "run code on the cluster.",
        group="security",
        keyword=True,
        cli=Cli("--tls/--no-tls", "switch"),
    ),
    Option(
        "require-encryption",
        False,
        "bool, optional",
        "Refuse to start unless Spark encrypts its own RPC.",
        "The cluster's TLS key reaches the executors inside the Spark task, i.e. over Spark's RPC. "
        "`true` refuses unless `spark.network.crypto.enabled` (with `spark.authenticate`) or "
        "`spark.ssl.enabled` is on, and needs `tls=True`.",
        group="security",
        keyword=True,
        cli=Cli("--require-encryption/--no-require-encryption", "switch"),
    ),
    Option(
        "scheduler-host",
        None,
        "str, optional",
        "Address of this machine that the executors use to reach the scheduler (it listens there).",
        "Unset: the Spark driver's address; with Spark Connect, this machine's address on the "
        "route to the Connect server (a connected UDP socket picks it; nothing is sent). It must "
        "be an address of this machine (not a NAT or port-forwarded one). See "
        "[Spark Connect](connect.md).",
        group="security",
        keyword=True,
        default_text="the driver's address; Connect: this machine's address towards the server",
        cli=Cli("--scheduler-host", "str", ("run", "doctor"), metavar="HOST"),
    ),
    Option(
        "state-dir",
        "auto",
        "str or bool",
        "Where running clusters are listed for `SparkCluster.from_name()` and `spark-dask list`.",
        "Each cluster writes its entry there when it starts (a directory of its own, mode 0700: "
        "owner, scheduler address, dashboard, worker count and its connection files with the "
        "client TLS credentials) and removes it when it closes; entries whose owner process is "
        "gone are ignored and removed. `auto`: `$XDG_RUNTIME_DIR/spark-dask` where that is set, "
        "else `spark-dask-<uid>` in the temporary directory (both private to the user, mode "
        "0700, and per host; where another user made `spark-dask-<uid>` first, "
        "`~/.cache/spark-dask/state-<host>` instead, with a warning). `false`: clusters are not "
        "listed (nor found by name).",
        group="security",
    ),
    Option(
        "databricks-credentials",
        False,
        "bool, optional",
        "Give the workers the notebook's Databricks workspace host and token (`DATABRICKS_HOST`, "
        "`DATABRICKS_TOKEN`), for MLflow and the Databricks SDK in Dask tasks.",
        "From the driver's own `DATABRICKS_HOST` with `DATABRICKS_TOKEN` (or `DATABRICKS_CLIENT_ID` "
        "and `DATABRICKS_CLIENT_SECRET`) where set, else from the notebook's context (its API URL and "
        "token), read on the driver again for each gang, so that added and relaunched workers get a "
        "current token; a variable that `env` names wins. They reach only the worker processes' "
        "environment: never logs, the widget, `get_logs()`, connection files, the Spark jobs' "
        "descriptions and properties, the Spark conf or error messages. Off a Databricks driver "
        "only the environment counts; `true` where neither source exists fails `start()` at once. See "
        "[Databricks](databricks.md#credentials-for-workers).",
        group="security",
        keyword=True,
        cli=Cli("--databricks-credentials/--no-databricks-credentials", "switch"),
    ),
    Option(
        "connect-timeout",
        "5s",
        "str",
        "How long each Spark task tries to reach the scheduler before it reports it unreachable.",
        "Each task opens (and closes) a TCP connection to the scheduler before it starts any "
        "worker; if it cannot, the gang stops and `start()` says which executor could not reach "
        "which address.",
        group="security",
        time=True,
    ),
    # ------------------------------------------------------------------ output
    Option(
        "dashboard",
        True,
        "bool, optional",
        "Serve the scheduler's dashboard.",
        "Off Databricks: on the driver address, a port the OS picks. On Databricks: at the root of "
        "a free port in 9000-9999 on all driver interfaces (the driver proxy connects to the "
        "driver's IP; 9000-9999 is the range Ray-on-Spark uses behind the proxy, which refuses "
        "8787), linked through the driver proxy. See [Databricks](databricks.md#notebooks).",
        group="output",
        keyword=True,
        cli=Cli("--dashboard/--no-dashboard", "switch"),
    ),
    Option(
        "log-directory",
        None,
        "str, optional",
        "A directory where the scheduler's, the workers' and the Spark tasks' logs are kept, also "
        "after the cluster closed or a worker crashed.",
        "Each cluster writes a directory of its own there, `<name>-<id>/` (`spark-dask-<id>/` for a "
        "cluster without a name): the driver writes `scheduler.log`, `cluster.log` and "
        "`spark-tasks.log`; each Spark task writes its workers' logs, `workers/<worker>.log`, when "
        "they end (a crash included), so the path must be writable from the executors too, e.g. a "
        "Unity Catalog volume, `/Volumes/<catalog>/<schema>/<volume>/dask-logs`, on Databricks. A "
        "path the executors cannot write costs a warning, not the workers. `get_logs()` after "
        "`close()` reads them back. See "
        "[Logs that outlive the cluster](user-guide.md#logs-that-outlive-the-cluster).",
        group="output",
        keyword=True,
        cli=Cli("--log-directory", "str", metavar="PATH"),
    ),
    Option(
        "dashboard-prefix",
        "auto",
        "str",
        "URL path prefix the dashboard is served under.",
        '`auto` (or `""`): the root, right for the Databricks driver proxy, which strips its '
        "`/driver-proxy/o/<org>/<cluster>/<port>` prefix before forwarding. `driver-proxy`: under "
        "`/driver-proxy/o/<org>/<cluster>/<port>`, for a proxy that forwards the full path (on "
        "Databricks only; the root elsewhere). Any other string is used as the prefix, e.g. `/dask`.",
        group="output",
    ),
    Option(
        "progress",
        True,
        "bool, optional",
        'Show "2/4 Dask workers connected" while starting (terminal and notebook).',
        group="output",
        keyword=True,
        cli=Cli("--progress/--no-progress", "switch"),
    ),
    Option(
        "silence-logs",
        "warning",
        "str or False, optional",
        "Level below which the scheduler's log lines are not printed; `false` prints them all.",
        "The scheduler runs in this (driver) process, as with `LocalCluster`. `get_logs()` keeps the lines either way.",
        group="output",
        keyword=True,
        cli=Cli("--silence-logs", "str", metavar="LEVEL|false"),
    ),
    Option(
        "mlflow",
        "auto",
        "{'auto', True, False}, optional",
        "Keep what the cluster did in the MLflow run: its workers and versions (params), its "
        "workers, memory, tasks and GPUs over time (metrics), its performance report and logs "
        "(artifacts at close).",
        "`auto`: on when an MLflow run is active in the thread that starts the cluster (the "
        "`with spark_dask.start(...)` block inside `mlflow.start_run()`); off, at no cost, where "
        "MLflow was never imported. `true`: on; without an active run the cluster makes a run of "
        "its own in the current experiment and ends it at close; refused at once where MLflow is "
        "not installed (`pip install 'spark-dask[mlflow]'`). `false`: off. Any tracking URI MLflow "
        "takes; a tracking server that cannot be reached costs one line, not the cluster. "
        "`spark_dask.log_cluster(cluster)` does the same for a running cluster. See "
        "[MLflow](user-guide.md#the-cluster-in-your-mlflow-run).",
        group="output",
        keyword=True,
        cli=Cli("--mlflow", "bool-choice", ("run",), choices=("auto", "true", "false")),
    ),
    Option(
        "mlflow-interval",
        "5s",
        "str",
        "Time between two samples of the cluster's metrics in the MLflow run.",
        "Each sample is one snapshot of the scheduler's state in the driver (no call to the "
        "workers) and one `log_batch` to the tracking server, sent from a thread of its own.",
        group="output",
        time=True,
    ),
    # ------------------------------------------------------------------ GPUs
    Option(
        "gpu-mode",
        "auto",
        "{'auto', 'shared', 'exclusive'}, optional",
        "GPU executors: run the workers beside Spark's own GPU tasks (`shared`) or hold their GPUs whole (`exclusive`).",
        "`shared`: the Dask workers (one per GPU) run beside Spark's own GPU tasks (the RAPIDS "
        "Accelerator): the gang holds one Spark task's GPU share per worker (fractional "
        "`spark.task.resource.gpu.amount`) or no GPU at all (whole-GPU Spark tasks, through a "
        "CPU-only task profile). `exclusive`: each worker's Spark task holds its GPU whole. "
        "`auto`: shared when Spark's task GPU amount is fractional or the RAPIDS SQL plugin is on, "
        "else exclusive. See [RAPIDS](rapids.md#sparks-gpu-tasks-beside-the-dask-workers-gpu_mode).",
        group="gpu",
        keyword=True,
        cli=Cli("--gpu-mode", "choice", ("run", "info"), choices=("auto", "shared", "exclusive")),
    ),
    Option(
        "rapids.rmm-pool-size",
        "auto",
        "str",
        "RMM pool of each dask-cuda worker: `auto`, `null` (no pool) or a size.",
        "`auto`: sized from the GPU memory free in its Spark task (pynvml), minus `rmm-reserve`, "
        "times `rmm-fraction`, rounded down to 256 MiB (in shared GPU mode at most `dask-fraction` "
        'of the GPU). `null`: no pool (dask-cuda\'s default). A size (`"20GiB"`) sets it. '
        '`worker_options={"rmm_pool_size": ...}` always wins. The pool needs the `rmm` package '
        "(cudf brings it; dask-cuda does not): without it the workers start without a pool and a "
        "warning says so.",
        group="gpu",
    ),
    Option(
        "rapids.rmm-reserve",
        "1GiB",
        "str",
        "GPU memory left free when the RMM pool is sized automatically.",
        group="gpu",
    ),
    Option(
        "rapids.rmm-fraction",
        0.95,
        "float",
        "Share of the free GPU memory (after `rmm-reserve`) an automatic RMM pool takes.",
        group="gpu",
    ),
    Option(
        "rapids.spill-fraction",
        0.8,
        "float",
        "`--device-memory-limit` of each dask-cuda worker as a share of its RMM pool.",
        "With a pool (this one or `worker_options`' `rmm_pool_size`) and no `device_memory_limit` "
        "in `worker_options`, each worker spills device memory to host at this share of its pool. "
        "dask-cuda's own default is 80 % of the GPU's total memory, above a pool sized from the "
        "free memory. `null`: dask-cuda's default.",
        group="gpu",
    ),
    Option(
        "rapids.dask-fraction",
        0.4,
        "float",
        "GPU share kept for Dask: the RAPIDS plugin check and the cap of a shared-mode pool.",
        "spark-dask warns when the Spark RAPIDS memory pool (`spark.rapids.memory.gpu.*`) leaves "
        "less than this share of each GPU; in shared GPU mode an automatic RMM pool takes at most "
        "this share of the GPU's total memory.",
        group="gpu",
    ),
)

BY_NAME: dict[str, Option] = {o.name: o for o in OPTIONS}

# Keyword arguments of SparkCluster() that are not options (no config key, no CLI flag).
EXTRA_PARAMETERS: tuple[tuple[str, str, str], ...] = (
    (
        "spark",
        "SparkSession, optional",
        "Classic or Spark Connect session; defaults to the active session (looked up now). "
        "With Spark Connect the scheduler runs in this Python process, not on the Spark driver.",
    ),
)
TRAILING_PARAMETERS: tuple[tuple[str, str, str], ...] = (
    ("asynchronous", "bool", "Use `await SparkCluster(..., asynchronous=True)` inside an event loop."),
    ("loop", "IOLoop, optional", "The event loop to run on (as for any `distributed.deploy.Cluster`)."),
    ("quiet", "bool", "No progress line and no slot warning."),
)


def keyword_options() -> list[Option]:
    """The options that are keyword arguments of ``SparkCluster()``, in table order."""
    return [o for o in OPTIONS if o.keyword]


def config_options() -> list[Option]:
    return [o for o in OPTIONS if o.config]


def time_keys(keyword: bool = False) -> tuple[str, ...]:
    """Config keys read as durations (``keyword``: those that are keyword arguments too)."""
    return tuple(o.key for o in OPTIONS if o.time and o.keyword == keyword)


def defaults() -> dict:
    """The nested ``{"spark-dask": {...}}`` defaults the table describes."""
    out: dict = {}
    for o in config_options():
        node = out
        *parents, leaf = o.key.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = o.default
    return {"spark-dask": out}


__all__ = [
    "BY_NAME",
    "EXTRA_PARAMETERS",
    "GROUPS",
    "OPTIONS",
    "TRAILING_PARAMETERS",
    "Cli",
    "Option",
    "config_options",
    "defaults",
    "keyword_options",
    "time_keys",
    "yaml_scalar",
]
