"""A named cluster's entry kept current without Spark: a real entry in a temporary state
directory, a stand-in for the scheduler's worker table (issue 57)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from spark_dask.named.owner import Entry, EntryWatch
from spark_dask.named.store import read_record

pytestmark = pytest.mark.core


def test_the_record_counts_workers_while_running_and_is_left_alone_at_teardown(tmp_path, monkeypatch):
    """The teardown removes every worker: the record was rewritten for each, counting
    the workers left each time (129 writes here, 66 now); once it says ``closing`` it
    is left as it was."""
    entry = Entry("big", "spark-dask-t", str(tmp_path))
    entry.claim()
    writes = []
    update = entry.update
    monkeypatch.setattr(entry, "update", lambda **changes: writes.append(changes) or update(**changes))
    watch = EntryWatch(entry)
    scheduler = SimpleNamespace(workers={})
    for k in range(64):
        scheduler.workers[f"tls://w{k}:1"] = object()
        watch.add_worker(scheduler, f"tls://w{k}:1")
    del scheduler.workers["tls://w0:1"]
    watch.remove_worker(scheduler, "tls://w0:1")  # a worker lost while running: counted
    assert len(writes) == 65 and read_record(entry.directory)["workers"] == 63
    entry.update(status="closing")  # the cluster's close hook
    for k in range(1, 64):
        watch.remove_worker(scheduler, f"tls://w{k}:1")
        del scheduler.workers[f"tls://w{k}:1"]
    assert len(writes) == 66, len(writes)
    assert read_record(entry.directory)["status"] == "closing"
    entry.remove()


def test_the_silence_of_distributeds_logs_holds_until_the_last_cluster_leaves():
    """Issue 68 point 6: ``silence_logs`` used distributed's ``silence_logging_cmgr`` per
    cluster, which puts back the levels it found when it is left: of two clusters in one
    process, the first to close gave the other's scheduler its INFO lines back. Now the
    handlers stay quiet until the last cluster that asked leaves, in any order."""
    import logging

    from spark_dask.events import SharedSilence

    logger = logging.getLogger("distributed")
    handler = logging.StreamHandler()
    handler.setLevel(logging.INFO)
    logger.addHandler(handler)
    try:
        silence = SharedSilence()
        first, second = silence.hold("warning"), silence.hold("warning")
        first.__enter__()
        second.__enter__()
        assert handler.level == logging.WARNING
        first.__exit__(None, None, None)  # the first cluster closes: the other still runs
        assert handler.level == logging.WARNING
        second.__exit__(None, None, None)
        assert handler.level == logging.INFO
        with silence.hold("error"):  # a later cluster: its own level
            assert handler.level == logging.ERROR
        assert handler.level == logging.INFO
    finally:
        logger.removeHandler(handler)
