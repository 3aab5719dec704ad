"""A slot moved past the stored offsets, the gap bridged from the archive directory,
with a transaction open across the seam (issue 31 part 3), on fault-pg15.

While the worker is down, a long transaction starts, the workload goes on with segment
switches, the slot is advanced to the server's current position (as a slot recreated
or moved by someone else would be), and more switches and changes follow before the
long transaction commits. Without source.archive that is the fatal SlotGapError of
test_slot_gap.py; with it set to the server's archive directory the worker reads the
stored restart LSN's segment up to the slot's segment from the archive and streams
from there. The seam (the slot's segment boundary) lies inside the long transaction:
its changes before the seam come from the archive, the rest from the stream, and it
must come out once, whole, in order, like every other committed transaction (the fault
suite's verifier).
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from service.lsn import parse_lsn
from tests.faults.verifier import story, topics, verify
from tests.faults.workload import ContinuousWorkload
from tests.integration.pipeline_kafka_support import (
    EO_TABLES,
    TxnOutcome,
    current_xid,
    insert_lsn,
    pipeline,
    read_all,
)

pytestmark = [pytest.mark.integration, pytest.mark.faults]

LONG_FIRST_ID = 900_000_000  # the long transaction's ledger ids, apart from the workload's


def _segments_switching(p: Any, stop: threading.Event) -> threading.Thread:
    def loop() -> None:
        conn = p.connect()
        while not stop.wait(0.5):
            conn.cursor().execute("SELECT pg_switch_wal()")
        conn.close()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    return thread


def test_gap_with_a_transaction_across_the_seam_is_bridged(
    fault_pg15: dict[str, Any], kafka: dict[str, Any], registry: dict[str, Any]
) -> None:
    """The slot moved past the stored offsets while a transaction was open: with
    source.archive the worker bridges the gap, the seam falls inside that transaction,
    and every committed transaction is published exactly once, whole and in order."""
    with pipeline(fault_pg15, kafka, registry, "gaparc", EO_TABLES) as p:
        p.extra_env["PGCDC_LOG__LEVEL"] = "debug"  # txn_published, for a failure's story
        worker = p.start_worker()
        worker.wait_ready(90)
        first = ContinuousWorkload(p, seed=51)
        first.start(pause_s=0.05)
        time.sleep(3)
        first.finish()
        p.wait_confirmed(insert_lsn(p.connect().cursor()) - 1, 90, worker)
        assert worker.terminate() == 0, worker.tail()
        stored = p.last_offset()
        assert stored is not None

        long_conn = p.connect()
        long_cur = long_conn.cursor()
        long_cur.execute("BEGIN")
        long_txn = TxnOutcome(current_xid(long_cur), committed=True)
        long_cur.execute(
            "INSERT INTO ledger SELECT g, 1, 1, 'long' FROM generate_series(%s, %s) g",
            (LONG_FIRST_ID, LONG_FIRST_ID + 499),
        )
        long_began = insert_lsn(long_cur)
        stop = threading.Event()
        switcher = _segments_switching(p, stop)
        second = ContinuousWorkload(p, seed=52)
        second.next_acct, second.next_ledger = first.next_acct, first.next_ledger
        second.start(pause_s=0.05)
        time.sleep(2)
        moved = parse_lsn(
            p.query(
                "SELECT (pg_replication_slot_advance(%s, pg_current_wal_lsn())).end_lsn::text",
                (p.slot,),
            )[0][0]
        )
        time.sleep(2)
        long_cur.execute(
            "INSERT INTO ledger SELECT g, 2, 2, 'long' FROM generate_series(%s, %s) g",
            (LONG_FIRST_ID + 500, LONG_FIRST_ID + 999),
        )
        long_committed = insert_lsn(long_cur)
        long_cur.execute("COMMIT")
        long_txn.events["ledger"] = 1000
        long_conn.close()
        second.finish()
        stop.set()
        switcher.join(30)

        p.extra_env["PGCDC_SOURCE__ARCHIVE"] = str(fault_pg15["archive"])
        worker = p.start_worker()
        worker.wait_ready(90)
        gap = worker.wait_event(["worker_bridging_gap"], 5)
        seam = parse_lsn(gap["stream_lsn"])
        assert long_began < seam <= moved < long_committed, (gap, long_began, moved)
        done = worker.wait_event(["archive_bridge_done"], 90)
        assert done["segments"] >= 2, done
        p.wait_confirmed(insert_lsn(p.connect().cursor()) - 1, 120, worker)
        assert worker.terminate() == 0, worker.tail()
        assert not worker.has_event("worker_fresh_start")
        outcomes = [*first.outcomes, *second.outcomes, long_txn]
        verdict = verify(p, outcomes, read_all(p.settings(), topics(p)))
        print(f"slot moved, gap bridged from the archive directory: {verdict}")
        traced = [*verdict.lost_xids, *verdict.partial_xids]
        assert verdict.committed > 20 and verdict.clean, f"{verdict}\n{story(p, lost=traced)}"
