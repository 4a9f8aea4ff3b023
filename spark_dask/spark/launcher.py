"""Submit the Spark job that runs a gang's Dask workers, and cancel it.

One :class:`GangLauncher` is one Spark job: a barrier stage of ``n_tasks`` tasks (or,
under dynamic allocation, a plain job of one task), each running
:func:`spark_dask.executor.gang_task.run_task`. ``collect()`` blocks for as long as the workers
run, so it happens in a background thread; the job carries a unique job group
and job tag (classic) or session tag (Spark Connect) so it can be cancelled.
:mod:`spark_dask.gangs.gang` builds on it.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections.abc import Callable

from spark_dask import executor
from spark_dask.capacity import GangPlan
from spark_dask.errors import TaskFailed
from spark_dask.executor import gang_task
from spark_dask.executor.task_spec import TaskSpec
from spark_dask.spark import databricks, jobtags
from spark_dask.spark.compat import ready_connect_profile
from spark_dask.spark.conf import is_connect, kept
from spark_dask.spark.shipping import ship_by_value

logger = logging.getLogger(__name__)

_unregistered_warned = False

# Seconds between two looks at Spark's status tracker for a gang's ended job: the first
# after LISTED_POLL_FIRST, each next one twice as late, at most LISTED_POLL_MAX apart
# (the job's end usually reaches the tracker within milliseconds of the collect).
LISTED_POLL_FIRST = 0.002
LISTED_POLL_MAX = 0.1


def resource_profile(plan: GangPlan):
    """The stage-level task resource request of the gang, or None for the default."""
    if not plan.uses_profile:
        return None
    from pyspark.resource import ResourceProfileBuilder, TaskResourceRequests

    req = TaskResourceRequests()
    if plan.task_cpus is not None:
        req = req.cpus(plan.task_cpus)
    if plan.task_gpus is not None:
        req = req.resource("gpu", plan.task_gpus)
    return ResourceProfileBuilder().require(req).build


def gang_rdd(sc, plan: GangPlan, fn):
    """The RDD whose collect runs the gang: ``plan.n_tasks`` partitions, ``fn`` on each
    (a barrier stage unless ``plan.barrier`` is False), the plan's task profile if any.

    The profile goes on the last RDD. On ``sc.parallelize(range(n))`` (a Python pipeline
    of its own) it would stop PySpark from pipelining ``fn`` into that RDD: each task
    would then run two Python workers, the second freshly forked (what that cost:
    docs/benchmarks.md, "What the figures mean").
    """
    n = plan.n_tasks
    rdd = sc.parallelize(range(n), n)
    rdd = rdd.barrier().mapPartitions(fn) if plan.barrier else rdd.mapPartitions(fn)
    profile = resource_profile(plan)
    if profile is not None:
        rdd = rdd.withResources(profile)
    return rdd


# Our task's message ends where Spark's decoration of it begins: its SQLSTATE suffix,
# the JVM stack trace, or a blank line.
_WORKER_ERROR = re.compile(r"WorkerStartError: (spark-dask: .*?)(?:\s*SQLSTATE: \w+|\n\s+at |\n\n|\Z)", re.S)


def summarize_spark_error(exc: BaseException) -> str:
    """The part of a Spark job failure a user needs: our task's message if it raised one."""
    text = str(exc)
    m = _WORKER_ERROR.search(text)
    if m:
        return m.group(1).strip()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith("at ")]
    keep = [ln for ln in lines if "Exception" in ln or "Error" in ln] or lines
    return "\n".join(keep[:6])


def session_closed(exc: BaseException | None) -> bool:
    """Whether a failed collect means the session itself is gone (``spark.stop()``).

    Under Spark Connect the client may learn that from the server's error before
    ``spark.is_stopped`` says so.
    """
    if exc is None:
        return False
    text = str(exc)
    return any(
        marker in text
        for marker in ("SESSION_CLOSED", "SparkContext was shut down", "Cannot call methods on a stopped SparkContext")
    )


class GangLauncher:
    """Run one barrier stage of Dask-worker tasks in a background thread.

    Parameters
    ----------
    spark : SparkSession
        Classic or Spark Connect session.
    plan : GangPlan
        How many tasks, with which resource request.
    spec : TaskSpec
        What each task needs (scheduler address, credentials, sizing overrides).
    tag : str
        Unique job group / tag of this stage, for the Spark UI and cancellation.
    description : str
        Shown as the job description in the Spark UI.
    on_done : callable
        Called from the thread once the stage has ended, for any reason.
    """

    def __init__(
        self,
        spark,
        plan: GangPlan,
        spec: TaskSpec,
        tag: str,
        description: str,
        on_done: Callable[[GangLauncher], None] | None = None,
    ):
        self.spark = spark
        self.plan = plan
        self.spec = spec
        self.tag = tag
        self.description = description
        self.on_done = on_done
        self.connect = is_connect(spark)
        self.rows: list[dict] = []
        self.error: BaseException | None = None
        self.done = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"spark-dask-{tag}", daemon=True)

    def start(self) -> None:
        ship_by_value(*executor.SHIPPED)
        self._thread.start()

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the stage to end; True if it did."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _run(self) -> None:
        try:
            raw = self._collect_connect() if self.connect else self._collect_classic()
            self.rows = [json.loads(r) for r in raw]
            failed = [r for r in self.rows if r.get("status") == "failed"]
            if failed:
                self.error = TaskFailed(failed[0].get("error") or "a Spark task failed")
        except BaseException as e:  # noqa: BLE001 - reported to the cluster
            self.error = e
        finally:
            self.done.set()
            if self.on_done is not None:
                try:
                    self.on_done(self)
                except Exception:  # pragma: no cover - must not kill the thread silently
                    logger.exception("spark-dask: gang completion callback failed")

    def _collect_classic(self) -> list[str]:
        sc = self.spark.sparkContext
        # Job group and tags are thread-local in PySpark's pinned-thread mode: set in
        # this thread, which submits the job.
        with jobtags.tagged(self.spark, self.tag, self.description, job_group=True, gang=True):
            self._register_with_databricks()
            return gang_rdd(sc, self.plan, gang_task.classic_partition(self.spec)).collect()

    def _register_with_databricks(self) -> None:
        """On Databricks, have the REPL's detach / restart cancel this job group."""
        global _unregistered_warned
        if databricks.register_background_job_group(self.tag) is False and not _unregistered_warned:
            _unregistered_warned = True
            logger.warning(
                "spark-dask: could not register the Dask cluster's Spark job group with "
                "Databricks: if this notebook is detached without closing the cluster, its "
                "workers stay until their death-timeout (60 s). Close the cluster first."
            )

    def _collect_connect(self) -> list[str]:
        spark = self.spark
        with jobtags.tagged(spark, self.tag, self.description, gang=True):  # thread-local: this thread submits it
            n = self.plan.n_tasks
            kwargs = {"barrier": True} if self.plan.barrier else {}
            profile = resource_profile(self.plan)
            if profile is not None:
                ready_connect_profile(spark)
                kwargs["profile"] = profile
            df = spark.range(0, n, 1, n).mapInArrow(gang_task.arrow_partition(self.spec), "status string", **kwargs)
            return [r["status"] for r in df.collect()]

    def wait_job_listed_ended(self, timeout: float) -> bool:
        """After the collect returned: wait (at most ``timeout`` s) until Spark's status
        tracker no longer lists this gang's job as active. The job's end reaches the
        tracker through Spark's listener bus, a little after the collect returns
        (seen on Spark 3.5); ``close()`` promises no active Spark job of the cluster.
        Classic sessions only (Spark Connect has no status tracker); True when gone."""
        if self.connect:
            return True
        try:
            tracker = self.spark.sparkContext.statusTracker()
            deadline = time.monotonic() + timeout
            # the group's jobs are known: it is one collect's, ended (one gateway call a look)
            ours = set(tracker.getJobIdsForGroup(self.tag))
            pause = LISTED_POLL_FIRST
            while ours & set(tracker.getActiveJobsIds()):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                time.sleep(min(pause, left))
                pause = min(pause * 2, LISTED_POLL_MAX)
            return True
        except Exception as e:  # stopped context, gone gateway: no job can be active  # noqa: BLE001
            logger.debug("spark-dask: status of %s unknown: %s", self.tag, e)
            return True

    def cancel(self) -> None:
        """Cancel the barrier stage (tasks are interrupted, then killed by Spark)."""
        jobtags.cancel(self.spark, self.tag)


def stage_snapshot(spark, tags) -> tuple[list[dict], set[int]]:
    """(active stages of the application, the stage ids of the jobs of ``tags``, i.e.
    the job groups of a cluster's gangs). Classic sessions only.

    Each stage is its ``SparkStageInfo`` as a dict, with ``gang``: whether it is a
    spark-dask gang's, this cluster's or another's (:data:`spark_dask.spark.jobtags.GANG`);
    a stage that waits with no task running, and another cluster's gang, also get the
    ``description`` of their job (the user's ``setJobDescription``, a gang's own words),
    which names them better than Spark's call site.

    The watches read it every few seconds while the cluster runs: only the active jobs
    are looked up (Spark's tracker keeps every gang job of the application's past, up to
    ``spark.ui.retainedJobs``), and each array of ids comes over py4j in one call
    (:func:`java_ints`), not one call per element."""
    from pyspark import StatusTracker  # here: the package imports without pyspark

    sc = spark.sparkContext
    jtracker, scala_tracker = status_trackers(sc)
    active = java_ints(sc, jtracker.getActiveJobIds())
    mine = {j for tag in tags for j in java_ints(sc, jtracker.getJobIdsForGroup(tag))} & active
    tagged = java_ints(sc, scala_tracker.getJobIdsForTag(jobtags.GANG)) & active if active else set()
    ours = _stage_ids(sc, jtracker, mine)
    gangs = ours | _stage_ids(sc, jtracker, tagged - mine)
    tracker = StatusTracker(jtracker)
    stages = []
    for sid in sorted(java_ints(sc, jtracker.getActiveStageIds())):
        info = tracker.getStageInfo(sid)
        if info is None:
            continue
        st = {**info._asdict(), "gang": sid in gangs}
        waiting = not st["numActiveTasks"] and st["numTasks"] > st["numCompletedTasks"]
        if sid not in ours and (waiting or st["gang"]):
            st["description"] = _description(sc, sid)
        stages.append(st)
    return stages, ours


def active_stage_ids(spark) -> set[int]:
    """The ids of the application's active stages (a classic session): two py4j calls,
    the tracker looked up once per SparkContext. What the slot watch reads each round
    while Spark runs no stage but the cluster's own (:class:`spark_dask.gangs.waits.OwnStages`)."""
    sc = spark.sparkContext
    return java_ints(sc, status_trackers(sc)[0].getActiveStageIds())


def status_trackers(sc) -> tuple:
    """The JVM's status trackers of ``sc``: the Java API's (``JavaSparkStatusTracker``)
    and Scala's (``SparkStatusTracker``, which knows job tags), looked up once per
    SparkContext (two py4j calls, and two to release them, each round otherwise)."""
    return kept(sc, "status trackers", lambda sc: (sc._jsc.statusTracker(), sc._jsc.sc().statusTracker()))


def _stage_ids(sc, jtracker, jobs) -> set[int]:
    out: set[int] = set()
    for job in jobs:
        info = jtracker.getJobInfo(job)
        if info is not None:
            out |= java_ints(sc, info.stageIds())
    return out


def java_ints(sc, array) -> set[int]:
    """The ints of a JVM ``int[]`` (a py4j ``JavaArray``) in one py4j call:
    ``java.util.Arrays.toString`` (looked up once per SparkContext) and parsed here;
    iterating the array asks the JVM for each element."""
    if array is None:
        return set()
    text = kept(sc, "Arrays.toString", lambda sc: sc._jvm.java.util.Arrays.toString)
    return {int(i) for i in str(text(array)).strip("[]").split(",") if i.strip()}


def _description(sc, stage_id: int) -> str | None:
    """The description of the job a stage belongs to (Spark's status store), if set."""
    try:
        text = sc._jsc.sc().statusStore().lastStageAttempt(stage_id).description()
        return text.get() if text.isDefined() else None
    except Exception as e:  # the stage left the store between the two calls  # noqa: BLE001
        logger.debug("spark-dask: no description of stage %s: %s", stage_id, e)
        return None
