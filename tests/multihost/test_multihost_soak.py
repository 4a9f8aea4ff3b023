"""The chaos soak (``benchmarks/soak.py``), its 2-minute version: a served, named cluster
on the multi-host cluster under a fixed, seeded schedule of every fault kind (a killed
Dask worker, a killed executor JVM, a lost host brought back, a link cut and restored,
scale down and up by name, clients joining and leaving by name, hand-offs both ways),
while a workload checks every result against its known answer. Nothing may be wrong,
hang or be left behind (``python -m benchmarks soak`` runs it for longer)."""

from __future__ import annotations

import pytest

from benchmarks import soak
from tests.support.multihost import SOAK_MINUTES, SOAK_SEED

pytestmark = [pytest.mark.multihost, pytest.mark.timeout(900)]


def test_a_two_minute_chaos_soak(multihost):
    try:
        R = soak.run_soak(multihost, SOAK_MINUTES, SOAK_SEED)
    finally:  # the session's hosts as they were, whatever happened
        for h in multihost.workers:
            if h.holder is None:
                multihost.replace_host(h.name)
            multihost.restore(h.name)
    print("\n" + soak.render(R))
    events = "\n".join(R["events"])
    assert R["wrong"] == 0, events
    assert R["hangs"] == 0, events
    assert R["errors"] == 0, events
    assert not any(R["left"].values()), R["left"]
    planned = soak.kinds_of(soak.schedule(SOAK_SEED, SOAK_MINUTES, [h.name for h in multihost.workers]))
    assert planned == set(soak.KINDS)
    assert {k for k, n in R["faults"].items() if n} == planned, R["faults"]
    assert R["checked"] >= 10, events
    assert R["closed"]["listed"] == [] and R["closed"]["active_jobs"] == [], R["closed"]
