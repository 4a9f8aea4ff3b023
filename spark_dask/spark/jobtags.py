"""Tag the Spark jobs a thread submits, so they can be told apart and cancelled.

Classic sessions: a job tag (Spark >= 3.5) and the job description, or the job group
(interrupting on cancel) for a thread that only submits that one job (the gangs');
Spark Connect: a session tag. Job groups and tags are thread-local (PySpark's pinned
threads), so the thread that submits the job sets them. :class:`spark_dask.spark.launcher.GangLauncher`
and the hand-off's jobs use it.
"""

from __future__ import annotations

import logging
from contextlib import contextmanager

from spark_dask.spark.compat import job_tags_supported
from spark_dask.spark.conf import is_connect

logger = logging.getLogger(__name__)

# Every spark-dask cluster's gang jobs carry this tag besides their own (classic: a job
# tag, Spark >= 3.5), so the slot checks of any cluster of the application, in any
# process, tell a gang waiting for slots from a Spark job waiting (launcher.stage_snapshot).
GANG = "spark-dask-gang"


@contextmanager
def tagged(spark, tag: str, description: str, *, job_group: bool = False, gang: bool = False):
    """The Spark jobs this thread submits inside carry ``tag`` (cancellable by
    :func:`cancel`) and ``description``; a gang's jobs (``gang=True``) :data:`GANG` too.

    ``job_group=True`` (classic): the thread's job group is set to ``tag`` (interrupt on
    cancel) and left set (a thread of its own); otherwise the thread's job description
    is set and restored after.
    """
    tags = (tag, GANG) if gang else (tag,)
    if is_connect(spark):
        for t in tags:
            spark.addTag(t)
        try:
            yield
        finally:
            for t in tags:
                spark.removeTag(t)
        return
    sc = spark.sparkContext
    if job_group:
        sc.setJobGroup(tag, description, interruptOnCancel=True)
    else:
        previous = sc.getLocalProperty("spark.job.description")
        sc.setJobDescription(description)
    if job_tags_supported(sc):
        for t in tags:
            sc.addJobTag(t)
    try:
        yield
    finally:
        if job_tags_supported(sc):
            for t in tags:
                sc.removeJobTag(t)
        if not job_group:
            sc.setLocalProperty("spark.job.description", previous)


def cancel(spark, tag: str) -> None:
    """Cancel the Spark jobs of ``tag`` (job group and job tag, or session tag); tasks
    are interrupted, then killed by Spark. Quiet when nothing is left to cancel."""
    try:
        if is_connect(spark):
            spark.interruptTag(tag)
            return
        sc = spark.sparkContext
        if job_tags_supported(sc):  # every job of tagged() carries the tag
            sc.cancelJobsWithTag(tag)  # quiet when none is left (cancelJobGroup warns then)
        else:
            sc.cancelJobGroup(tag)
    except Exception as e:  # stopped context, gone gateway: nothing left to cancel  # noqa: BLE001
        logger.debug("spark-dask: cancel of %s failed: %s", tag, e)


__all__ = ["cancel", "tagged"]
