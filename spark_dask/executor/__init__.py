"""What runs on the executors: the Spark task of a gang and everything it decides there.

The driver ships these modules by value (:func:`spark_dask.spark.shipping.ship_by_value`)
with pyspark's cloudpickle, so executors need ``distributed`` (and ``dask-cuda`` for GPU
workers) but not spark_dask itself, and driver and executors never disagree on its
version. The boundary, which ``tools/structure.py`` enforces:

- every module listed in :data:`SHIPPED` imports at module level only the standard
  library and other modules of :data:`SHIPPED` (the package's leaf modules
  :mod:`spark_dask.errors` and :mod:`spark_dask.sizes` among them); anything else it
  needs (``distributed``, ``pynvml``, ``pyspark``) it imports where it is used, inside
  the task, after checking that it is there;
- :mod:`~spark_dask.executor.preload` is shipped as source text (:data:`AS_SOURCE`):
  the task writes it into its workers' directory and distributed loads it in each
  worker process, so it may import ``distributed`` and nothing of spark_dask.

The driver side imports from here, never the reverse.

=================  =====================================================================
``gang_task``      the Spark task of a gang: start its Dask workers, watch, end with them
``task_context``   where the task runs: its Spark context, its facts, the gang's
``processes``      the workers' processes: forked or new, dying with the task, stopped
``task_line``      the task's line to the scheduler, cut to end frozen workers
``gpu_claims``     each GPU worker's host-wide claim on its GPU
``task_spec``      :class:`~spark_dask.executor.task_spec.TaskSpec`, what each task gets
``placement``      which GPU and name each worker gets, which task starts which workers
``sizing``         threads and memory of each worker from what Spark gave the task
``command``        each worker's command line, environment and checks around it
``rmm``            the RMM pool of a dask-cuda worker, sized from the GPU's free memory
``logs``           each worker's whole log copied to the cluster's log directory
``preload``        the workers' preload: the watchdog that ends them with their task
``checkup``        what ``spark-dask doctor`` looks at on each executor
=================  =====================================================================
"""

from spark_dask import errors, sizes
from spark_dask.executor import (
    checkup,
    command,
    gang_task,
    gpu_claims,
    logs,
    placement,
    preload,
    processes,
    rmm,
    sizing,
    task_context,
    task_line,
    task_spec,
)

# The modules the driver pickles by value with the gang's task (and its probe job).
SHIPPED = (
    errors,
    sizes,
    task_spec,
    placement,
    sizing,
    command,
    rmm,
    logs,
    processes,
    task_context,
    task_line,
    gpu_claims,
    gang_task,
    checkup,
)
# The modules each task writes out as source for the Dask workers to load.
AS_SOURCE = (preload,)

__all__ = ["AS_SOURCE", "SHIPPED"]
