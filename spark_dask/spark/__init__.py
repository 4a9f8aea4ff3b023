"""Everything that talks to Spark: the only part of the package, with the task code it
ships to the executors, that imports pyspark or py4j (``tools/structure.py`` checks it).

A Spark version's or Spark Connect's quirk goes in :mod:`spark_dask.spark.compat`, named
after what it works around; the rest of the package asks it.
"""
