"""Data between Spark and Dask without the driver or storage:
:func:`~spark_dask.handoff.driver.to_dask` and :func:`~spark_dask.handoff.driver.to_spark`
(``docs/handoff.md``).

===============  ========================================================================
``driver``       the two calls: plan, run the Spark job and the Dask tasks; whether the
                 transfer's Spark tasks find slots beside the gangs is asked of
                 :func:`spark_dask.gangs.slots.transfer_room`
``registry``     each cluster's transfer files, removed once no loading key needs them
``files``        names and places of the transfer's files (everywhere; shipped)
``transfer``     what runs in the Spark tasks and the Dask workers (shipped)
``arrow_types``  Spark, Arrow and pandas types, lossless both ways (shipped, also with
                 the Delta reader)
===============  ========================================================================

The driver pickles :data:`SHIPPED` by value, so neither executors nor Dask workers need
spark_dask installed; those modules keep the executor boundary
(:mod:`spark_dask.executor`: the standard library and each other at module level).
"""

from spark_dask import errors
from spark_dask.handoff import arrow_types, files, transfer

# What the hand-off's Spark tasks and Dask tasks run, pickled by value.
SHIPPED = (errors, arrow_types, files, transfer)

__all__ = ["SHIPPED"]
