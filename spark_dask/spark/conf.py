"""The first reads of a SparkSession (classic or Spark Connect): which kind it is, a
conf value, the application id, and the JVM objects a watch reads each round, looked up
once per SparkContext (:func:`kept`).

The lowest layer of the driver's Spark reads: it imports nothing from the package, so
:mod:`spark_dask.spark.databricks`, :mod:`spark_dask.spark.session` and the hand-off all read
confs the one way. :mod:`spark_dask.spark.session` builds the rest on it.
"""

from __future__ import annotations

import sys
import weakref


def is_connect(spark) -> bool:
    """Whether ``spark`` is a Spark Connect session (no SparkContext, no RDDs).

    A Connect session exists only once its module was imported, so the module is looked
    up, never imported here: without the connect extra, each import attempt would run
    pyspark's dependency checks again (the cost: docs/benchmarks.md).
    """
    module = sys.modules.get("pyspark.sql.connect.session")
    return module is not None and isinstance(spark, module.SparkSession)


def conf(spark, key: str, default: str | None = None, *, sql: bool = False) -> str | None:
    """A Spark conf value, or ``default`` when unset (or, under Spark Connect or with
    ``sql=True``, unreadable).

    ``sql=False``: the application's conf, static confs included (classic: the
    SparkContext's). ``sql=True``: the session's SQL conf (``spark.conf``, what
    ``spark.conf.set`` changes, e.g. ``spark.sql.session.timeZone``), as a string.
    Under Spark Connect both read ``spark.conf``.
    """
    if sql or is_connect(spark):
        try:
            value = spark.conf.get(key, default)
        except Exception:  # noqa: BLE001
            return default
        return default if value is None else str(value)
    sc = spark.sparkContext
    live = getattr(sc, "_conf", None)  # the context's own SparkConf, backed by the JVM's
    if live is not None and getattr(live, "_jconf", None) is not None:
        # One gateway call per key: getConf() copies every entry across the gateway
        # first (the cost: docs/benchmarks.md).
        return live.get(key, default)
    return sc.getConf().get(key, default)


def application_id(spark) -> str | None:
    """The Spark application id of the session (``spark.app.id``), None when unreadable."""
    try:
        if is_connect(spark):
            return spark.conf.get("spark.app.id")
        return spark.sparkContext.applicationId
    except Exception:  # noqa: BLE001
        return None


_KEPT: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # SparkContext -> {name: JVM object}


def kept(sc, name: str, make):
    """The JVM object ``make(sc)`` of ``sc`` (a status tracker, the task scheduler, a
    method), made at the first call for ``name`` and kept while ``sc`` lives: the py4j
    calls of the lookup (and of releasing what it returned) are not repeated each round."""
    objects = _KEPT.setdefault(sc, {})
    if name not in objects:
        objects[name] = make(sc)
    return objects[name]


__all__ = ["application_id", "conf", "is_connect", "kept"]
