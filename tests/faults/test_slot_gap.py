"""A gap after the slot moved is detected, never skipped over (issue 11, defect 4).

On fault-pg15: the slot is moved past the stored offsets, or dropped and recreated
after the server removed the WAL the offsets need (wal_keep_size 0, then
pg_switch_wal and CHECKPOINT until the segment is gone), while no worker runs.
"""

from __future__ import annotations

import subprocess
import threading
import time
from typing import Any

import pytest

from connectors.postgres.stream import PhysicalStream
from service.errors import WalRemovedError
from service.lsn import format_lsn
from tests.faults import pgctl
from tests.integration.pipeline_kafka_support import Pipeline, insert_lsn, pipeline, read_all

pytestmark = [pytest.mark.integration, pytest.mark.faults]


def _run_then_stop(p: Pipeline) -> int:
    """A worker publishes some rows and stops cleanly; returns the stored restart LSN."""
    worker = p.start_worker()
    worker.wait_ready(90)
    p.execute("INSERT INTO t SELECT generate_series(1, 50)")
    p.wait_confirmed(insert_lsn(p.connect().cursor()) - 1, 60, worker)
    assert worker.terminate() == 0, worker.tail()
    last = p.last_offset()
    assert last is not None
    return last.restart_lsn


def _refuses(p: Pipeline, *needles: str) -> str:
    worker = p.start_worker()
    try:
        code = worker.wait(60)
    except subprocess.TimeoutExpired:
        code = None  # it resumed over the gap
    log = worker.log_text()
    assert code == 1, f"exit {code}:\n{log[-3000:]}"
    for needle in needles:
        assert needle in log, log[-3000:]
    return log


def test_slot_moved_past_the_stored_offsets_is_fatal(
    fault_pg15: dict[str, Any], kafka: dict[str, Any], registry: dict[str, Any]
) -> None:
    """While the worker is down, rows are inserted and the slot is advanced to the
    server's current position (WAL still there). The next start exits 1 with
    SlotGapError naming the slot's restart_lsn, the stored restart LSN and the remedy,
    instead of resuming and publishing nothing of the rows in between; `run
    --fresh-start` then publishes a new snapshot holding them."""
    with pipeline(fault_pg15, kafka, registry, "gap", ["CREATE TABLE t (id int)"]) as p:
        stored = _run_then_stop(p)
        p.execute("INSERT INTO t SELECT generate_series(100, 199)")
        moved = p.query(
            "SELECT (pg_replication_slot_advance(%s, pg_current_wal_lsn())).end_lsn::text",
            (p.slot,),
        )[0][0]
        _refuses(p, "SlotGapError", format_lsn(stored), moved, "--fresh-start")
        # The remedy it names works: a new snapshot holds the rows of the gap.
        worker = p.start_worker("--fresh-start")
        worker.wait_ready(90)
        p.wait_confirmed(insert_lsn(p.connect().cursor()) - 1, 60, worker)
        assert worker.terminate() == 0, worker.tail()
        reads = read_all(p.settings(), [p.topic("t")])
        snapshot = [r.value["after"]["id"] for r in reads if r.value and r.value["op"] == "r"]
        assert sorted(snapshot) == [*range(1, 51), *range(100, 200)]


def _remove_wal_of(cur: Any, lsn: int) -> str:
    """Switch segments and checkpoint until the segment holding `lsn` is gone."""
    cur.execute("SELECT pg_walfile_name(%s::pg_lsn)", (format_lsn(lsn),))
    segment = str(cur.fetchone()[0])
    # Slots other fault tests left on this instance would pin the WAL: drop the inactive ones.
    cur.execute(
        "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE NOT active"
    )
    cur.execute("CREATE TABLE IF NOT EXISTS wal_filler (x int)")
    for _ in range(40):
        cur.execute("SELECT count(*) FROM pg_ls_waldir() WHERE name = %s", (segment,))
        if cur.fetchone()[0] == 0:
            return segment
        cur.execute("INSERT INTO wal_filler VALUES (1)")
        cur.execute("SELECT pg_switch_wal()")
        cur.execute("CHECKPOINT")
        time.sleep(0.3)  # the archiver copies a segment before it may go
    cur.execute("SELECT slot_name, restart_lsn::text FROM pg_replication_slots")
    raise AssertionError(f"{segment} still there; slots: {cur.fetchall()}")


def test_slot_recreated_after_its_wal_was_removed_is_fatal(
    fault_pg15: dict[str, Any], kafka: dict[str, Any], registry: dict[str, Any]
) -> None:
    """While the worker is down the slot is dropped, the server removes the WAL segment
    of the stored restart LSN, and the slot is created again. The worker exits 1 with
    SlotGapError naming both LSNs, and the stream itself, asked for that WAL, raises
    WalRemovedError ("requested WAL segment ... has already been removed") at once
    instead of reconnecting forever."""
    pgctl.set_and_reload(fault_pg15, "wal_keep_size", "0")
    try:
        with pipeline(fault_pg15, kafka, registry, "rm", ["CREATE TABLE t (id int)"]) as p:
            stored = _run_then_stop(p)
            conn = p.connect()
            cur = conn.cursor()
            cur.execute("SELECT pg_drop_replication_slot(%s)", (p.slot,))
            cur.execute("INSERT INTO t SELECT generate_series(100, 199)")
            segment = _remove_wal_of(cur, stored)
            cur.execute("SELECT pg_create_physical_replication_slot(%s, true)", (p.slot,))
            conn.close()
            _refuses(p, "SlotGapError", format_lsn(stored), "--fresh-start")

            stream = PhysicalStream(p.dsn, p.slot, start_lsn=stored, retry_budget_s=10)
            raised: list[BaseException] = []

            def read() -> None:
                try:
                    for _ in stream.chunks(idle_timeout=5):
                        pass
                except BaseException as exc:
                    raised.append(exc)

            thread = threading.Thread(target=read, daemon=True)
            thread.start()
            thread.join(30)
            stream.close()
            assert raised and isinstance(raised[0], WalRemovedError), raised
            assert segment in str(raised[0]) and "--fresh-start" in str(raised[0])
            assert stream.reconnects == 1
    finally:
        pgctl.set_and_reload(fault_pg15, "wal_keep_size", None)
