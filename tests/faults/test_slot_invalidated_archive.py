"""A slot invalidated while the worker was down (max_slot_wal_keep_size), bridged from
the archive directory (issue 31 part 3), on the ha-pg15 and ha-pg18 primaries.

An invalidated physical slot keeps its name but no WAL (restart_lsn NULL, wal_status
lost): without source.archive a resume is the fatal SlotGapError. With it the worker
drops the slot, creates it again (reserving from the last checkpoint's redo point),
reads the gap from the archive and streams on; every committed transaction comes out
exactly once (the fault suite's verifier). The pair is held exclusively
(tests/faults/ha_exclusive.py): max_slot_wal_keep_size is set on its primary.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.faults.ha_exclusive import rebuilt_pair
from tests.faults.verifier import story, topics, verify
from tests.faults.workload import ContinuousWorkload
from tests.integration.pipeline_kafka_support import EO_TABLES, insert_lsn, pipeline, read_all

pytestmark = [pytest.mark.integration, pytest.mark.faults]


@pytest.mark.parametrize("version", ["15", "18"])
def test_invalidated_slot_is_recreated_and_the_gap_bridged(
    version: str, kafka: dict[str, Any], registry: dict[str, Any]
) -> None:
    """The worker's slot is invalidated by max_slot_wal_keep_size while it is down,
    with transactions in the lost WAL: with source.archive it logs the slot recreated
    (was invalidated), reads the gap from the archive, and publishes every committed
    transaction exactly once, whole and in order."""
    with (
        rebuilt_pair(version) as (primary, _standby),
        pipeline(primary, kafka, registry, "hainv", EO_TABLES) as p,
    ):
        worker = p.start_worker()
        worker.wait_ready(120)
        first = ContinuousWorkload(p, seed=71)
        first.run(40)
        p.wait_confirmed(insert_lsn(p.connect().cursor()) - 1, 120, worker)
        assert worker.terminate() == 0, worker.tail()

        p.execute("ALTER SYSTEM SET max_slot_wal_keep_size = '1MB'", "SELECT pg_reload_conf()")
        second = ContinuousWorkload(p, seed=72)
        second.next_acct, second.next_ledger = first.next_acct, first.next_ledger
        deadline = time.monotonic() + 120
        while p.query(
            "SELECT wal_status FROM pg_replication_slots WHERE slot_name = %s", (p.slot,)
        ) != [("lost",)]:
            assert time.monotonic() < deadline, "the slot was not invalidated"
            second.run(10)
            p.execute("SELECT pg_switch_wal()", "CHECKPOINT")
        p.execute("ALTER SYSTEM RESET max_slot_wal_keep_size", "SELECT pg_reload_conf()")
        last = p.query("SELECT pg_walfile_name(pg_switch_wal())")[0][0]
        archive = primary["archive"]
        deadline = time.monotonic() + 60
        while not (p.query("SELECT last_archived_wal FROM pg_stat_archiver")[0][0] or "") >= last:
            assert time.monotonic() < deadline, f"{last} not archived"
            time.sleep(0.3)

        p.extra_env["PGCDC_SOURCE__ARCHIVE"] = str(archive)
        worker = p.start_worker()
        worker.wait_ready(120)
        created = worker.wait_event(["slot_created_for_resume"], 5)
        assert created["was"] == "invalidated", created
        assert worker.wait_event(["archive_bridge_done"], 120)["segments"] >= 2
        third = ContinuousWorkload(p, seed=73)
        third.next_acct, third.next_ledger = second.next_acct, second.next_ledger
        third.run(20)
        p.wait_confirmed(insert_lsn(p.connect().cursor()) - 1, 120, worker)
        assert worker.terminate() == 0, worker.tail()
        outcomes = [*first.outcomes, *second.outcomes, *third.outcomes]
        verdict = verify(p, outcomes, read_all(p.settings(), topics(p)))
        print(f"PG{version} invalidated slot, gap bridged: {verdict}")
        assert verdict.committed > 20 and verdict.clean, f"{verdict}\n{story(p)}"
