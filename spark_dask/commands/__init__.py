"""What the ``spark-dask`` commands do, without click (:mod:`spark_dask.cli` parses the
command line and calls these): :mod:`~spark_dask.commands.run` runs a script against a
cluster it starts (``spark-dask run``), :mod:`~spark_dask.commands.serve` keeps a named
cluster for other processes (``spark-dask serve``), :mod:`~spark_dask.commands.info`
describes the cluster a start would make (``spark-dask info``).
"""
