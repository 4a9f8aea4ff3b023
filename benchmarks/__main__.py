"""python -m benchmarks [options]: the full run (start-up, teardown, steady state, then
moving data between Spark and Dask); python -m benchmarks handoff [options]: only the latter."""

import sys

from benchmarks import handoff, run

args = sys.argv[1:]
if args[:1] == ["handoff"]:
    handoff.main(args[1:])
else:
    run.main(args)
    handoff.main([])
