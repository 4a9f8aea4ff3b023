"""Plots of a benchmark run (``python -m benchmarks`` writes them; ``--plot JSON`` redraws).

    python -m benchmarks --plot docs/benchmarks-latest.json --plot-dir docs/assets/benchmarks

- ``startup.svg``: start-up time against the number of workers: spark-dask (warm, and
  cold at N = 2) against its floor (an empty barrier stage plus bare ``dask worker``
  processes) and Ray-on-Spark's ``setup_ray_cluster``;
- ``teardown.svg``: close → nothing left, against the floor (cancel of an empty stage)
  and Ray-on-Spark's shutdown;
- ``handoff.svg``: Spark ↔ Dask hand-off throughput, when the run measured it (a
  ``handoff`` entry: ``{"<direction>": {"<rows>": {"seconds": s, "mb": MB}}}``);
- ``scale.png`` (:func:`scale`, ``python -m benchmarks scale``): start-up, teardown, the
  driver idle, memory, drain and hand-off against the number of workers.

Figures are medians of the run's repetitions; where the run recorded every repetition
(``*_runs`` lists) the bars span their minimum to maximum. SVG output is deterministic
(no date, fixed ids), so a redraw from the same JSON gives the same files.
"""

from __future__ import annotations

import os

from benchmarks.measure import median
from benchmarks.multihost import NAMES


def _setup():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"svg.hashsalt": "spark-dask", "figure.figsize": (7, 4), "font.size": 10,
                         "axes.spines.top": False, "axes.spines.right": False})  # fmt: skip
    return plt


def _spread(entry: dict, key: str, median: float):
    runs = entry.get(f"{key}_runs")
    if not runs:
        return None
    return [[median - min(runs)], [max(runs) - median]]


def masters(R: dict) -> list[dict]:
    """The run's per-master results; a run of the older one-master format as one entry."""
    if "masters" in R:
        return R["masters"]
    return [{"master": R.get("master", "?"), "cold": R.get("cold"), "warm": R["warm"], "ray": R.get("ray")}]


def _machine(R: dict) -> str:
    m = R["machine"]
    return (f"{m['cpus']} CPUs, {m['memory_gib']} GiB, pyspark {m['pyspark']}, distributed {m['distributed']}; "
            f"median of {R['reps']} runs, bars: min-max")  # fmt: skip


def _save(fig, path: str) -> str:
    fig.tight_layout()
    fig.savefig(path, format="svg", metadata={"Date": None, "Creator": "spark-dask benchmarks"})
    return path


def _line(ax, ns, entries, key, **kw):
    ys = [entries[n][key] for n in ns]
    err = [_spread(entries[n], key, entries[n][key]) for n in ns]
    if all(e is not None for e in err):
        ax.errorbar(ns, ys, yerr=[[e[0][0] for e in err], [e[1][0] for e in err]], capsize=3, **kw)
    else:
        ax.plot(ns, ys, **kw)


def startup(R: dict, path: str) -> str:
    plt = _setup()
    fig, ax = plt.subplots()
    ray_seen = False
    for i, M in enumerate(masters(R)):
        color = f"C{i}"
        warm = {int(n): w for n, w in M["warm"].items()}
        ns = sorted(warm)
        _line(ax, ns, warm, "start", marker="o", color=color, label=f"spark-dask, warm, {M['master']}")
        ax.plot(ns, [warm[n]["floor"] for n in ns], marker="s", linestyle="--", color=color, alpha=0.6,
                label=f"floor (empty barrier stage + bare dask workers), {M['master']}")  # fmt: skip
        colds = list(M["colds"].values()) if M.get("colds") else [M["cold"]] if M.get("cold") else []
        if colds:
            ax.plot([c["n"] for c in colds], [c["start"] for c in colds], marker="^", linestyle="none", color=color,
                    label=f"spark-dask, cold (new Spark app), {M['master']}")  # fmt: skip
        ray = M.get("ray")
        if ray and "start" in ray:
            ray_seen = True
            ax.plot([2], [ray["start"]], marker="X", markersize=9, linestyle="none", color=color,
                    label=f"Ray-on-Spark setup, 2 nodes, warm app ({ray['start']:.1f} s), {M['master']}")  # fmt: skip
            if "cold_start" in ray:
                ax.plot([2], [ray["cold_start"]], marker="P", markersize=9, linestyle="none", color=color,
                        label=f"Ray-on-Spark setup, 2 nodes, new Spark app ({ray['cold_start']:.1f} s), {M['master']}")  # fmt: skip
    if ray_seen:
        ax.set_yscale("log")
        from matplotlib.ticker import FixedLocator, NullLocator, ScalarFormatter

        ax.yaxis.set_major_locator(FixedLocator([0.5, 1, 2, 3, 5, 10, 20, 40]))
        ax.yaxis.set_minor_locator(NullLocator())
        ax.yaxis.set_major_formatter(ScalarFormatter())
    ax.set_xticks(sorted({int(n) for M in masters(R) for n in M["warm"]}))
    ax.set_xlabel("Dask workers (N)")
    ax.set_ylabel("seconds to all workers connected")
    ax.set_title("Start-up", loc="left")
    ax.legend(fontsize=7, frameon=False)
    fig.text(0.01, 0.005, _machine(R), fontsize=7, color="gray")
    path = _save(fig, path)
    plt.close(fig)
    return path


def teardown(R: dict, path: str) -> str:
    plt = _setup()
    fig, ax = plt.subplots()
    all_ns = set()
    for i, M in enumerate(masters(R)):
        color = f"C{i}"
        warm = {int(n): w for n, w in M["warm"].items()}
        ns = sorted(warm)
        all_ns |= set(ns)
        _line(ax, ns, warm, "close", marker="o", color=color, label=f"spark-dask close → nothing left, {M['master']}")
        floor = [warm[n].get("close_floor", None) for n in ns]
        if all(f is not None for f in floor):
            ax.plot(ns, floor, marker="s", linestyle="--", color=color, alpha=0.6,
                    label=f"floor: cancel of an empty barrier stage, {M['master']}")  # fmt: skip
        ray = M.get("ray")
        if ray and "close" in ray:
            ax.plot([2], [ray["close"]], marker="X", markersize=9, linestyle="none", color=color,
                    label=f"Ray-on-Spark shutdown, 2 nodes ({ray['close']:.1f} s), {M['master']}")  # fmt: skip
    targets = R.get("targets") or {}
    if "close_2" in targets:
        ax.plot([2, 8], [targets["close_2"], targets["close_8"]], color="gray", linewidth=0.8, linestyle=":",
                label="target (N = 2: 0.15 s, N = 8: 0.5 s)")  # fmt: skip
    ns = sorted(all_ns)
    ax.set_xticks(ns)
    ax.set_xlabel("Dask workers (N)")
    ax.set_ylabel("seconds")
    ax.set_title("Teardown", loc="left")
    ax.legend(fontsize=7, frameon=False)
    fig.text(0.01, 0.005, _machine(R), fontsize=7, color="gray")
    path = _save(fig, path)
    plt.close(fig)
    return path


def handoff(R: dict, path: str) -> str | None:
    data = R.get("handoff")
    if not data:
        return None
    plt = _setup()
    fig, ax = plt.subplots()
    for direction, points in data.items():
        rows = sorted(points, key=int)
        ax.plot([int(r) for r in rows], [points[r]["mb"] / points[r]["seconds"] for r in rows], marker="o",
                label=direction)  # fmt: skip
    ax.set_xscale("log")
    ax.set_xlabel("rows")
    ax.set_ylabel("MB/s")
    ax.set_title("Hand-off throughput", loc="left")
    ax.legend(fontsize=8, frameon=False)
    fig.text(0.01, 0.005, _machine(R), fontsize=7, color="gray")
    path = _save(fig, path)
    plt.close(fig)
    return path


def write_plots(R: dict, directory: str) -> list[str]:
    """Every plot the run has data for, as SVG files in ``directory``."""
    os.makedirs(directory, exist_ok=True)
    out = [startup(R, os.path.join(directory, "startup.svg")), teardown(R, os.path.join(directory, "teardown.svg"))]
    h = handoff(R, os.path.join(directory, "handoff.svg"))
    if h:
        out.append(h)
    for M in masters(R):  # a multi-host master's hand-off, bare and shaped link
        h = handoff_hosts(M, os.path.join(directory, "handoff-hosts.svg"))
        if h:
            out.append(h)
    return out


def handoff_hosts(M: dict, path: str) -> str | None:
    """GB/s of each method, bare and shaped link, per Dask worker count; bars min-max."""
    ho = M.get("handoff")
    if not ho:
        return None

    plt = _setup()
    configs = list(ho["configs"].items())
    fig, axes = plt.subplots(len(configs), 2, figsize=(9, 3.4 * len(configs)), sharey=True, squeeze=False)
    for row, (n_workers, conf) in zip(axes, configs):
        for ax, direction, title in zip(row, ("to_dask", "to_spark"), ("Spark → Dask", "Dask → Spark")):
            methods = [m for m in conf["runs"]["bare"][0][direction] if m != "spark_only"]
            for k, (link, color) in enumerate((("bare", "C0"), ("shaped", "C1"))):
                xs, ys, lo, hi = [], [], [], []
                for j, method in enumerate(methods):
                    rates = [ho["gb"] / r[direction][method]["seconds"] for r in conf["runs"][link]]
                    xs.append(j + k * 0.4)
                    ys.append(median(rates))
                    lo.append(median(rates) - min(rates))
                    hi.append(max(rates) - median(rates))
                label = "bare veth link" if link == "bare" else f"shaped: {ho['shape']}"
                ax.bar(xs, ys, 0.4, yerr=[lo, hi], capsize=3, color=color, label=label)
            ax.set_xticks([j + 0.2 for j in range(len(methods))], [NAMES[m].replace(" (", "\n(") for m in methods],
                          fontsize=8)  # fmt: skip
            ax.set_title(f"{title}, {n_workers} Dask worker(s)", loc="left", fontsize=9)
        row[0].set_ylabel("GB/s (higher is better)")
    axes[0][0].legend(fontsize=7, frameon=False)
    fig.text(0.01, 0.005, f"{ho['gb']:g} GB, {M['master']} (network namespaces on one VM), median of {ho['reps']}, "
                          "bars: min-max", fontsize=7, color="gray")  # fmt: skip
    path = _save(fig, path)
    plt.close(fig)
    return path


SCALE_PANELS = (
    ("start-up, s", (("start", "spark-dask"), ("stage", "empty barrier stage"), ("naive", "naive floor (bare workers)"))),
    ("teardown, s", (("close", "spark-dask close"), ("close_floor", "cancel of an empty stage"))),
    ("driver idle CPU, % of a core", (("py_cpu_pct_with", "Python, N workers"), ("py_cpu_pct_without", "Python, no cluster"),
                                      ("jvm_cpu_pct_with", "JVM, N workers"), ("jvm_cpu_pct_without", "JVM, no cluster"))),
    ("driver idle: per second / count", (("py4j_per_s_with", "py4j calls/s, N workers"),
                                         ("py4j_per_s_without", "py4j calls/s, no cluster"),
                                         ("threads_with", "Python threads, N workers"))),
    ("memory, MB", (("rss_growth_mb", "driver RSS growth"), ("worker_uss_mb", "a worker process's USS"),
                    ("executor_rss_mb", "an executor JVM's RSS"))),
    ("drain and hand-off, s", (("drained_s", "drain of 8 workers"), ("drain_full_s", "N workers again"),
                               ("to_dask_s", "to_dask 1 GB"), ("to_spark_s", "to_spark 1 GB"),
                               ("spark_only_s", "Spark alone, 1 GB"))),
)  # fmt: skip


def scale(R: dict, path: str) -> str:
    """``scale.png``: each measure of ``python -m benchmarks scale`` against N (log-log
    where every value is positive), one panel per kind of measure."""
    plt = _setup()
    by_n = R["by_n"]
    fig, axes = plt.subplots(2, 3, figsize=(14, 8))
    for ax, (title, series) in zip(axes.flat, SCALE_PANELS):
        drawn = False
        for key, label in series:
            pts = sorted((int(n), f[key]) for n, f in by_n.items() if f.get(key) is not None)
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label)
                drawn = True
        ax.set_title(title)
        ax.set_xscale("log", base=2)
        ns = sorted(int(n) for n in by_n)
        ax.set_xticks(ns, [str(n) for n in ns])
        ax.set_xlabel("N (Dask workers)")
        if drawn:
            ax.legend(fontsize=8)
        else:
            ax.text(0.5, 0.5, "not measured in this run", ha="center", transform=ax.transAxes)
    m = R["machine"]
    fig.suptitle(f"python -m benchmarks scale: {m['cpus']} CPUs, {m['memory_gib']} GiB, pyspark {m['pyspark']}, "
                 f"distributed {m['distributed']}; load {m['load_before'][0]:.1f} before, "
                 f"{m.get('load_after', [float('nan')])[0]:.1f} after", fontsize=10)  # fmt: skip
    fig.tight_layout()
    fig.savefig(path, format="png", dpi=90, metadata={"Software": "spark-dask benchmarks"})
    plt.close(fig)
    return path
