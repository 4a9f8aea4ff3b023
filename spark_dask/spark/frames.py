"""Spark DataFrames, RDDs and schemas the driver makes for its jobs: Spark's schema of
a ``StructType`` or DDL string, a DataFrame of ids whose partitions prefer hosts, and
a DataFrame's rows as the JVM's Arrow batches.

The hand-off (:mod:`spark_dask.handoff.driver`) builds its transfer jobs on them.
"""

from __future__ import annotations

from contextlib import suppress

from spark_dask.spark import compat

__all__ = ["column", "jvm_arrow_rdd", "preferred_host_ids", "schema_json", "struct_type"]


def schema_json(spark, schema) -> dict:
    """Spark's JSON of ``schema``, a ``StructType`` or a DDL string (``"a long, b string"``)."""
    from pyspark.sql.types import StructType

    struct = schema if isinstance(schema, StructType) else compat.struct_from_ddl(spark, schema)
    return struct.jsonValue()


def struct_type(json_schema: dict):
    """The ``StructType`` of Spark's JSON schema ``json_schema``."""
    from pyspark.sql.types import StructType

    return StructType.fromJson(json_schema)


def column(name: str):
    """The Spark Column of the column ``name``, back-quoted: a name with a dot is one
    column, not a field of a struct."""
    from pyspark.sql import functions as F

    return F.col(f"`{name}`")


def preferred_host_ids(spark, hosts: list[str | None]):
    """A DataFrame of one partition per host of ``hosts``, partition ``i`` holding the
    number ``i`` (column ``id``). Classic sessions: partitions that prefer their host, as
    Spark names it (``SparkContext.makeRDD`` of ``(0, [host])`` pairs, see
    :func:`_host_pairs`; the number is ``spark_partition_id()``, the index of the
    partition it is computed in, which a later ``coalesce`` leaves as it is), so Spark
    runs each task there (after ``spark.locality.wait`` without a free slot
    there, elsewhere). Spark Connect, which has no RDDs, and hosts that are unknown:
    ``spark.range(n)``, each task wherever Spark has a slot."""
    n = len(hosts)
    if not compat.jvm_reachable(spark) or not all(h and "\n" not in h for h in hosts):
        return spark.range(0, n, 1, n)
    from pyspark.sql import DataFrame

    jvm = spark.sparkContext._jvm
    integer = jvm.scala.reflect.ClassTag.apply(jvm.java.lang.Class.forName("java.lang.Integer"))
    rdd = spark.sparkContext._jsc.sc().makeRDD(_host_pairs(jvm, hosts), integer)
    values = spark._jsparkSession.createDataset(rdd, jvm.org.apache.spark.sql.Encoders.INT())
    return DataFrame(values.toDF(), spark).selectExpr("spark_partition_id() AS id")


def _host_pairs(jvm, hosts: list[str]):
    """The Scala ``Seq`` of ``(0, Seq(host))`` for each of ``hosts`` (no newline in a
    name), made with py4j calls per distinct host, not per partition: one pair per
    host, and the names go to the JVM as one string, mapped to their pairs there
    (a Scala ``Map`` is a function)."""
    utils = jvm.org.apache.spark.api.python.PythonUtils
    pairs = jvm.java.util.HashMap()
    for host in set(hosts):
        pairs.put(host, jvm.scala.Tuple2(0, utils.toSeq([host])))
    names = jvm.java.util.regex.Pattern.compile("\n").splitAsStream("\n".join(hosts))
    names = names.collect(jvm.java.util.stream.Collectors.toList())
    return utils.toSeq(names).iterator().map(utils.toScalaMap(pairs)).toList()


def jvm_arrow_rdd(df, tz: str, large: bool, rows_per_batch: int):
    """Classic Spark: the DataFrame's rows as an RDD of Arrow IPC record-batch messages
    made in the JVM (``Dataset.toArrowBatchRdd``, what ``toPandas`` uses), read by
    Python as plain bytes; None where that is not available (Spark Connect, an API
    that differs), and the caller uses ``mapInArrow``.

    The rows reach the Python tasks faster this way than through ``mapInArrow`` (the
    figures: docs/benchmarks.md, "Moving data between Spark and Dask")."""
    spark = df.sparkSession
    if not compat.jvm_reachable(spark):
        return None
    from pyspark.rdd import RDD
    from pyspark.serializers import NoOpSerializer

    jdf = df._jdf
    jrdd = None
    if compat.arrow_batch_rdd_takes_arguments(spark):
        with suppress(Exception):
            jrdd = jdf.toArrowBatchRdd(int(rows_per_batch), tz, True, bool(large))
    if jrdd is None and not large:  # Spark 3.x: the session's batch size and time zone, no large types
        with suppress(Exception):
            jrdd = jdf.toArrowBatchRdd()
    if jrdd is None:
        return None
    return RDD(jrdd.toJavaRDD(), spark.sparkContext, NoOpSerializer())
