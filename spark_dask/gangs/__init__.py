"""The Spark jobs that run a cluster's Dask workers (gangs): their making, the pools that
keep each worker group at its target, the waits, faults, slots and drains
(``docs/design.md``). This face is what the rest of the package uses of it.
"""

from spark_dask.gangs.adapt import GangTargets
from spark_dask.gangs.drain import watch_decommission
from spark_dask.gangs.gang import Gang, ending_grace
from spark_dask.gangs.maker import GangMaker, WorkerCredentials
from spark_dask.gangs.pool import GangPool
from spark_dask.gangs.pools import GroupPools
from spark_dask.gangs.slots import other_clusters, transfer_room
from spark_dask.gangs.waits import StartWait, logs_within, watch_faults, watch_session_stop, watch_starved_stages

__all__ = [
    "Gang",
    "GangMaker",
    "GangPool",
    "GangTargets",
    "GroupPools",
    "StartWait",
    "WorkerCredentials",
    "ending_grace",
    "logs_within",
    "other_clusters",
    "transfer_room",
    "watch_decommission",
    "watch_faults",
    "watch_session_stop",
    "watch_starved_stages",
]
