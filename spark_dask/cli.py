"""``spark-dask`` command line (also ``dask spark ...``): run a script on a Dask cluster
inside the Spark application, or show what that cluster would look like.

::

    spark-dask run [OPTIONS] SCRIPT [ARGS]...     # or: spark-dask run -m MODULE [ARGS]...
    spark-dask serve [OPTIONS]                    # a cluster other processes join by name
    spark-dask list [--json]                      # the clusters running on this host
    spark-dask info [OPTIONS]

This module parses the command line: the click commands, and the click adapter that
turns the option table (:mod:`spark_dask.options`) into their options. What the
commands do is :mod:`spark_dask.commands` (``run``, ``serve``, ``info``),
:mod:`spark_dask.named` (``list``) and :mod:`spark_dask.commands.doctor` (``doctor``).

Under ``spark-submit`` (which needs a ``.py`` file) submit this module's file::

    spark-submit --master ... "$(python -c 'import spark_dask.cli as m; print(m.__file__)')" run job.py
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys
import warnings

import click
import yaml

from spark_dask import __version__, named, options
from spark_dask.commands.doctor import doctor as run_doctor
from spark_dask.commands.info import describe
from spark_dask.commands.run import run_script
from spark_dask.commands.serve import serve_cluster
from spark_dask.errors import PlanError, SparkDaskError
from spark_dask.options import OPTIONS, Option
from spark_dask.options.groups import parse_flag
from spark_dask.spark import databricks
from spark_dask.spark.builder import get_or_create_session
from spark_dask.spark.session import require_pyspark

# --------------------------------------------------------------------------------------
# Options. Those of spark_dask.start() come from the option table (spark_dask/options/table.py),
# which also writes their docs: the click adapter below turns its rows into click
# options. --master/--conf/--app-name are the CLI's own.
# --------------------------------------------------------------------------------------


def _plain(text: str) -> str:
    """Markdown to the plain text of click's help (backticks off, links to their text)."""
    text = re.sub(r"\[([^\]]+)\]\([^)]+\)", r"\1", text)
    return text.replace("`", "'")


def cli_help(option: Option) -> str:
    """The option's click help: its one line, the default and the config key."""
    text = option.cli.help or option.help
    default = "none" if option.cli.kind.endswith("key-values") else option.shown_default
    where = f"; spark-dask.{option.key}" if option.config else ""
    return f"{_plain(text)} [default: {_plain(default)}{where}]"


def key_values(ctx, param, values) -> dict:
    """click callback: ``KEY=VALUE`` items (repeatable option) to a dict of strings."""
    out = {}
    for item in values or ():
        if "=" not in item:
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r}", ctx=ctx, param=param)
        key, value = item.split("=", 1)
        out[key.strip()] = value
    return out


def typed_key_values(ctx, param, values) -> dict:
    """KEY=VALUE with YAML-typed values: ``nanny=false`` is False, ``n=2`` is 2."""
    return {k: yaml.safe_load(v) if v != "" else "" for k, v in key_values(ctx, param, values).items()}


def group_values(ctx, param, values) -> dict:
    """click callback: ``NAME:KEY=VALUE,...`` items (repeatable) to ``worker_groups``."""
    out = {}
    for item in values or ():
        try:
            name, spec = parse_flag(item)
        except PlanError as e:
            raise click.BadParameter(str(e), ctx=ctx, param=param) from None
        out[name] = spec
    return out


def bool_choice(ctx, param, value):
    """click callback: ``auto|true|false`` to ``"auto"``, True, False."""
    if value is None:
        return None
    return {"auto": "auto", "true": True, "false": False}[value.lower()]


def click_options(command: str):
    """A decorator adding the click options of ``command`` (``run`` or ``info``), in
    table order; each option's parameter is its keyword argument's name."""

    def build(option: Option):
        c = option.cli
        kw: dict = {"default": None, "help": cli_help(option)}
        if c.metavar:
            kw["metavar"] = c.metavar
        if c.kind == "int>=1":
            kw["type"] = click.IntRange(min=1)
        elif c.kind == "int>=0":
            kw["type"] = click.IntRange(min=0)
        elif c.kind == "choice":
            kw["type"] = click.Choice(list(c.choices))
        elif c.kind == "bool-choice":
            kw["type"] = click.Choice(list(c.choices), case_sensitive=False)
            kw["callback"] = bool_choice
        elif c.kind in ("key-values", "typed-key-values"):
            kw["multiple"] = True
            kw["default"] = ()
            kw["callback"] = key_values if c.kind == "key-values" else typed_key_values
        elif c.kind == "groups":
            kw["multiple"] = True
            kw["default"] = ()
            kw["callback"] = group_values
        return click.option(c.flag, option.name, **kw)

    chosen = [o for o in OPTIONS if o.cli is not None and command in o.cli.commands]

    def decorate(f):
        for option in reversed(chosen):  # click lists options in decorator order
            f = build(option)(f)
        return f

    return decorate


def session_options(f):
    """--master, --conf, --app-name: how to get or create the SparkSession."""
    f = click.option("--app-name", default=None, help="Application name when a new SparkSession is created.")(f)
    f = click.option(
        "--conf",
        "spark_conf",
        multiple=True,
        metavar="KEY=VALUE",
        callback=key_values,
        help="Spark conf for a new SparkSession (repeatable). Ignored by an existing one for static confs.",
    )(f)
    f = click.option(
        "--master",
        default=None,
        help="Spark master for a new SparkSession, e.g. 'local-cluster[2,1,1024]'. Default: "
        "the active session, or what spark-submit / the Databricks cluster provides.",
    )(f)
    return f


plan_options = click_options("info")  # the size and shape of the cluster (run and info)
run_options = click_options("run")  # every start() option
doctor_options = click_options("doctor")  # where the scheduler would listen


def _start_kwargs(options: dict) -> dict:
    """start() keyword arguments from the parsed options (None: the configured default)."""
    kwargs = {k: v for k, v in options.items() if v is not None and v != {}}
    silence = kwargs.get("silence_logs")
    if isinstance(silence, str) and silence.lower() in ("false", "no", "off"):
        kwargs["silence_logs"] = False
    return kwargs


def _require_pyspark_or_exit() -> None:
    """Without pyspark: one line that says what to install, exit status 1 (no traceback)."""
    try:
        require_pyspark()
    except ImportError as e:
        raise click.ClickException(str(e)) from None


def check_options(given: dict) -> dict:
    """The options resolved (:func:`spark_dask.options.resolve`) before anything starts:
    a bad value (``--memory-limit lots``, ``DASK_SPARK_DASK__MEMORY_LIMIT=lots``) is a
    usage error now, not after a SparkSession was made; a misspelled ``spark-dask.*``
    config key is said on stderr, one line each."""
    names = {o.name for o in options.keyword_options() if o.config}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            return options.resolve(**{**dict.fromkeys(names), **{k: v for k, v in given.items() if k in names}})
        except PlanError as e:
            raise click.UsageError(str(e)) from None
        finally:
            for w in caught:
                click.echo(str(w.message), err=True)


def _check_target(target: str, module: bool) -> None:
    """A missing script (or module) is a usage error before anything starts."""
    if not module:
        if not os.path.isfile(target):
            raise click.UsageError(f"no such script: {target}")
        return
    try:
        found = importlib.util.find_spec(target) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise click.UsageError(f"no such module: {target}")


@click.group(name="spark", context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="spark-dask", message="%(prog)s %(version)s")
def main():
    """Dask clusters inside a Spark application: the scheduler on the Spark driver, the
    workers in Spark tasks on the executors (a barrier stage, or under dynamic allocation
    one plain one-task Spark job per worker). Also available as 'dask spark'."""


@main.command(context_settings={"allow_interspersed_args": False})
@session_options
@run_options
@click.option(
    "-m",
    "--module",
    "as_module",
    is_flag=True,
    help="Run TARGET as a module, like 'python -m TARGET'.",
)
@click.argument("target")
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def run(target, args, as_module, master, spark_conf, app_name, **options):
    """Run a Python script (or -m module) with a Dask cluster in this Spark application.

    Gets or creates the SparkSession, starts the cluster, runs TARGET in this process
    with ARGS as its arguments, then tears the cluster down and exits with the
    script's exit status. Inside the script a plain distributed.Client() or
    dask.distributed.get_client() connects to the cluster, and
    SparkSession.builder.getOrCreate() returns the same session. The script's child
    processes get DASK_CONFIG (the directory of the cluster's connection files:
    scheduler.json, TLS credentials, a Dask config file) and SPARK_DASK_SCHEDULER_FILE,
    so a plain Client() there, or a client in another language, joins too. Options
    after TARGET belong to the script.

    Exit status: the script's; 1 when the cluster cannot start or the script raises;
    143 on SIGTERM (after teardown); 2 for a usage error (an unknown option, a bad
    value, a missing script), said before anything starts.
    """
    _require_pyspark_or_exit()
    _check_target(target, as_module)
    check_options(options)
    code = run_script(
        target,
        args,
        module=as_module,
        master=master,
        conf=spark_conf,
        app_name=app_name,
        **_start_kwargs(options),
    )
    sys.exit(code)


@main.command()
@session_options
@run_options
def serve(master, spark_conf, app_name, **options):
    """Start a Dask cluster that other processes join by name, and keep it running.

    Gets or creates the SparkSession, starts the cluster (--name NAME, default its Spark
    job tag) and prints how to join it: SparkCluster.from_name(NAME) in any Python
    process of this user on this host (scale, adapt and close carried out here), the
    dashboard link and the directory of its connection files (DASK_CONFIG). Runs until
    SIGTERM, Ctrl-C or a close() from a process that joined; then tears the cluster down
    and exits 0.

    Exit status: 0 after the teardown; 1 when the cluster cannot start (a name already
    taken, no slots, ...); 2 for a usage error (said before anything starts).
    """
    _require_pyspark_or_exit()
    check_options(options)
    sys.exit(serve_cluster(master=master, conf=spark_conf, app_name=app_name, **_start_kwargs(options)))


@main.command(name="list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
def list_command(as_json):
    """List the spark-dask clusters of this user running on this host.

    Name, status, workers, owner pid, start time, scheduler address and dashboard link of
    every cluster any process started here (spark-dask serve, run, a notebook), as found
    in the state directory (spark-dask.state-dir); entries whose owner process is gone
    are removed. Needs no Spark, starts nothing.
    """
    try:
        rows = named.list_clusters()
    except SparkDaskError as e:  # a state directory that is not the user's
        raise click.ClickException(str(e)) from None
    if as_json:
        click.echo(json.dumps(rows, indent=2))
    else:
        click.echo(named.format_rows(rows, named.configured_root()))


@main.command()
@session_options
@doctor_options
@click.option(
    "--timeout",
    default=None,
    type=float,
    metavar="SECONDS",
    help="How long the check's Spark job may wait for task slots (default: executor-wait, at least 30).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
def doctor(master, spark_conf, app_name, scheduler_host, timeout, as_json):
    """Check every executor before a Dask cluster starts there.

    Runs one short Spark job (no Dask process) and reports per executor host: Python
    and the versions of dask, distributed, cloudpickle, msgpack, pandas and pyarrow
    against the driver's, whether spark-dask's task code unpickles there, whether a
    process started there reaches the driver's scheduler address, the free space
    under Spark's local directories; on GPU executors the GPUs NVML sees, the CUDA
    driver, dask-cuda, cudf, rmm, CuPy and nvJitLink (and their import errors), the
    RAPIDS Accelerator's jar against this Spark and the gpu_mode 'auto' picks. The last
    line says ready, or how many problems to fix (each with its fix above it).

    Exit status: 0 ready; 1 a problem found, or the check could not run; 2 a usage error.
    """
    _require_pyspark_or_exit()
    spark, created = get_or_create_session(master, spark_conf, app_name)
    try:
        result = run_doctor(spark, timeout=timeout, scheduler_host=scheduler_host)
    except SparkDaskError as e:
        raise click.ClickException(str(e)) from None
    finally:
        if created and databricks.detect(spark) is None:
            spark.stop()
    click.echo(json.dumps(result.to_dict(), indent=2, default=str) if as_json else result.render())
    sys.exit(0 if result.ready else 1)


@main.command()
@session_options
@plan_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
def info(master, spark_conf, app_name, as_json, **options):
    """Show the cluster that 'run' (or spark_dask.start()) would start here.

    Executors, task slots, GPUs, planned workers, threads and memory per worker, the
    command line each worker would run, and on Databricks the dashboard URL pattern.
    Starts no Spark job and no Dask process. Exit status 1 when no cluster could start
    with these options; 2 for a usage error (said before anything starts).
    """
    _require_pyspark_or_exit()
    check_options(options)
    spark, created = get_or_create_session(master, spark_conf, app_name)
    try:
        out = describe(spark, **options)
    finally:
        if created and databricks.detect(spark) is None:
            spark.stop()
    if as_json:
        click.echo(json.dumps(out, indent=2, default=str))
    else:
        width = max(len(k) for k in out)
        for key, value in out.items():
            if isinstance(value, list):
                value = "\n".join(value)
            click.echo(f"{key:<{width}}  {value}")
    sys.exit(1 if "error" in out else 0)


if __name__ == "__main__":
    main()
