"""python -m benchmarks [options]: the full run (start-up, teardown, steady state, then
moving data between Spark and Dask); python -m benchmarks handoff [options]: only the
latter. ``--quick`` (CI), ``--plot`` and ``--no-handoff`` leave the hand-off part out."""

import sys

from benchmarks import handoff, run

args = sys.argv[1:]
if args[:1] == ["handoff"]:
    handoff.main(args[1:])
else:
    run.main(args)
    if not {"--quick", "--no-handoff", "-h", "--help"} & set(args) and not any(a.startswith("--plot") and a != "--plot-dir" for a in args):
        handoff.main([])
