"""The multi-host test cluster's settings (:mod:`.hosts` builds it): its fake GPUs, the
skip where it cannot be built, and the chaos soak's CI seed."""

from __future__ import annotations

import os

import pytest

from tests.support import hosts as hostlib

# Fake GPUs of the multi-host cluster's worker hosts: the same addresses on every host,
# as real machines number theirs (local-cluster cannot show this: its workers share one
# discovery script, and every executor gets the same "0").
MULTIHOST_GPUS = {"worker-1": ["0", "1"], "worker-2": ["0", "1"]}

# The chaos soak's CI run (tests/multihost/test_multihost_soak.py): a seed whose 2 minutes
# hold every kind (tests/unit/test_soak_schedule.py)
SOAK_SEED, SOAK_MINUTES = 266, 2


def multihost_or_skip() -> None:
    """Skip where this machine cannot build the multi-host cluster (not root, no
    ``ip``/``unshare``/``nsenter``/``tc``, namespaces refused); under ``CI`` FAIL instead."""
    reason = hostlib.unavailable()
    if reason:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the multi-host tests: {reason}", pytrace=False)
        pytest.skip(reason)
