"""What the MLflow sampler costs a running workload: steady-state throughput of one fixed
Dask workload on a cluster not tracked, tracked at the default ``mlflow-interval`` and
tracked every second, in one run.

    .venv/bin/python -m benchmarks mlflow [--rounds 5] [--seconds 20] [--master "local-cluster[2,1,1024]"]

A real ``mlflow server`` (``tests/support/mlflow_server.py``, as the tests start it) on
this machine; its environment: ``python -m tests.support.mlflow_server install``. Each
round starts one cluster per setting (2 workers), the settings in a rotated order, so that
a drift of the machine's load spreads over all three; each cluster runs the workload once
to warm up, then as many times as fit in ``--seconds`` (the measured window: throughput =
workloads per second), then closes. A tracked cluster runs inside ``mlflow.start_run()``;
its samples are counted afterwards from the run (the sampler did run). The workload:
1,000 small tasks (``client.map``) gathered, and a task shuffle of a 100,000-row Dask
DataFrame in 8 partitions (``shuffle("key")``, its length computed). Prints the table
(median and range of each setting's rounds, the ratio of medians to the untracked
cluster's, and the median and range of the ratios within each round), the machine's
load before and after, and a JSON line.
"""

from __future__ import annotations

import argparse
import json
import operator
import os
import statistics
import tempfile
import time

import dask

from benchmarks.machine import machine_facts
from benchmarks.measure import new_spark, stop_spark
from tests.support.mlflow_server import MLflowServer, server_python

SETTINGS = ("off", "default", "1s")  # mlflow=False; mlflow=True at the default interval; every 1 s


def workload(client) -> None:
    """One workload: small tasks, then a shuffle."""
    import dask.dataframe as dd
    import pandas as pd

    # a builtin: the workers cannot import this module (distributed pickles a task's
    # function by reference)
    futures = client.map(operator.neg, range(1000), pure=False)
    assert sum(client.gather(futures)) == -sum(range(1000))
    frame = pd.DataFrame({"key": [i % 97 for i in range(100_000)], "value": range(100_000)})
    with dask.config.set({"dataframe.shuffle.method": "tasks"}):  # a task shuffle: 8 x 8 small tasks
        shuffled = dd.from_pandas(frame, npartitions=8).shuffle("key")
    assert len(client.compute(shuffled).result()) == 100_000


def window(client, seconds: float) -> float:
    """Workloads per second over a window of at least ``seconds`` (after one warm-up)."""
    workload(client)
    done, t0 = 0, time.monotonic()
    while time.monotonic() - t0 < seconds:
        workload(client)
        done += 1
    return done / (time.monotonic() - t0)


def one(spark, setting: str, seconds: float) -> tuple[float, int]:
    """One cluster of ``setting``: its throughput, and the samples its run holds."""
    import mlflow

    import spark_dask

    if setting == "off":
        with spark_dask.start(spark, n_workers=2, mlflow=False, quiet=True) as client:
            return window(client, seconds), 0
    interval = {"spark-dask.mlflow-interval": "1s"} if setting == "1s" else {}
    with mlflow.start_run(run_name=f"bench-{setting}") as run, dask.config.set(interval):
        with spark_dask.start(spark, n_workers=2, mlflow=True, quiet=True) as client:
            rate = window(client, seconds)
    samples = len(mlflow.MlflowClient().get_metric_history(run.info.run_id, "dask/workers"))
    return rate, samples


def table(rates: dict[str, list[float]], samples: dict[str, list[int]], interval: str) -> str:
    """Median (range) of each setting's workloads per second, the ratio of medians to
    ``off``'s, and the median (range) of the ratios within each round (the clusters of a
    round ran one after the other: a drift of the machine's load cancels out there)."""
    base = statistics.median(rates["off"])
    label = {"off": "not tracked", "default": f"tracked, every {interval} (default)", "1s": "tracked, every 1s"}
    lines = [
        f"{'setting':<34} {'workloads/s: median (range)':<28} {'ratio':>6}  {'per round: median (range)':<26} samples"
    ]
    for s in SETTINGS:
        med = statistics.median(rates[s])
        span = f"{med:.3f} ({min(rates[s]):.3f}-{max(rates[s]):.3f})"
        paired = [a / b for a, b in zip(rates[s], rates["off"])]
        per_round = f"{statistics.median(paired):.2f} ({min(paired):.2f}-{max(paired):.2f})"
        count = "-" if s == "off" else f"{min(samples[s])}-{max(samples[s])}"
        lines.append(f"{label[s]:<34} {span:<28} {med / base:6.3f}  {per_round:<26} {count}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m benchmarks mlflow", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=20.0, help="the measured window of each cluster")
    parser.add_argument("--master", default="local-cluster[2,1,1024]")
    args = parser.parse_args(argv)
    python = server_python()
    if python is None:
        raise SystemExit("no MLflow server installed: python -m tests.support.mlflow_server install")
    import mlflow

    load_before = os.getloadavg()
    rates: dict[str, list[float]] = {s: [] for s in SETTINGS}
    samples: dict[str, list[int]] = {s: [] for s in SETTINGS}
    with tempfile.TemporaryDirectory(prefix="spark-dask-bench-mlflow-") as directory:
        with MLflowServer(python, directory) as server:
            mlflow.set_tracking_uri(server.uri)
            mlflow.set_experiment("spark-dask-bench")
            spark = new_spark(args.master)
            try:
                for r in range(args.rounds):
                    order = SETTINGS[r % 3 :] + SETTINGS[: r % 3]
                    for setting in order:
                        rate, n = one(spark, setting, args.seconds)
                        rates[setting].append(rate)
                        samples[setting].append(n)
                        print(
                            f"round {r + 1}/{args.rounds} {setting:>7}: {rate:.3f} workloads/s, {n} samples", flush=True
                        )
            finally:
                stop_spark(spark)
                mlflow.set_tracking_uri(None)
    interval = dask.config.get("spark-dask.mlflow-interval")
    print(f"\nMLflow sampler overhead ({args.master}, {args.rounds} rounds of {args.seconds:.0f} s, 2 workers)")
    print(table(rates, samples, interval))
    load = " ".join(f"{x:.1f}" for x in load_before), " ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"load average (1, 5, 15 min): before {load[0]}, after {load[1]}")
    result = {
        "benchmark": "mlflow", "master": args.master, "rounds": args.rounds, "seconds": args.seconds,
        "default_interval": interval, "rates": rates, "samples": samples,
        "machine": machine_facts(load_before=list(load_before), load_after=list(os.getloadavg())),
    }  # fmt: skip
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
