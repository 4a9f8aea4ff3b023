"""python -m benchmarks [options]: the full run (start-up, teardown, steady state, then
moving data between Spark and Dask); python -m benchmarks handoff [options]: only the
latter (with ``--master hosts:WxC``: only the hand-off across the hosts). ``--quick`` (CI), ``--plot`` and ``--no-handoff`` leave the hand-off part out.
``--master hosts:2x4`` (the multi-host cluster, ``benchmarks/multihost.py``) measures
its own hand-off across the hosts; the local hand-off runs only beside a local master.
python -m benchmarks delta [options]: reading a Delta table with deletion vectors
(``benchmarks/delta.py``; ``--store s3``: on an S3 API server), not part of the full run;
python -m benchmarks delta-log [options]: replaying a 10,000-commit Delta log against
Spark's snapshot (``benchmarks/delta_log.py``). python -m benchmarks soak
[--minutes N --seed S]: a chaos soak on the multi-host cluster (``benchmarks/soak.py``). python -m benchmarks
scale [options]: 2 to 64 workers, 2 and 8 hosts (``benchmarks/scale.py``). python -m benchmarks
handoff-parts [options]: the hand-off's driver work as workers and partitions grow
(``benchmarks/handoff_parts.py``). python -m benchmarks
mlflow [options]: what the MLflow sampler costs a running workload (``benchmarks/mlflow.py``).
python -m benchmarks yarn [options]: start-up on Spark on YARN (a ResourceManager and
NodeManagers on this machine) against an empty barrier stage on the same YARN
(``benchmarks/yarn.py``)."""

import sys

from benchmarks import delta, handoff, multihost, run

args = sys.argv[1:]
if args[:1] == ["handoff"] and any(multihost.parse(a.split("=", 1)[-1]) for a in args):
    multihost.handoff_main(args[1:])  # --master hosts:WxC: only the hand-off across the hosts
elif args[:1] == ["handoff"]:
    handoff.main(args[1:])
elif args[:1] == ["handoff-parts"]:
    from benchmarks import handoff_parts

    handoff_parts.main(args[1:])
elif args[:1] == ["delta"]:
    delta.main(args[1:])
elif args[:1] == ["delta-log"]:
    from benchmarks import delta_log

    delta_log.main(args[1:])
elif args[:1] == ["scale"]:
    from benchmarks import scale

    scale.main(args[1:])
elif args[:1] == ["mlflow"]:
    from benchmarks import mlflow as sampler_overhead

    sampler_overhead.main(args[1:])
elif args[:1] == ["yarn"]:
    from benchmarks import yarn

    yarn.main(args[1:])
elif args[:1] == ["soak"]:
    from benchmarks import soak

    soak.main(args[1:])
else:
    run.main(args)
    masters = [v for a, v in zip(args, args[1:]) if a == "--master"] + [
        a.split("=", 1)[1] for a in args if a.startswith("--master=")
    ]
    only_hosts = bool(masters) and all(multihost.parse(m) for m in masters)
    if (
        not only_hosts
        and not {"--quick", "--no-handoff", "-h", "--help"} & set(args)
        and not any(a.startswith("--plot") and a != "--plot-dir" for a in args)
    ):
        handoff.main([])
