"""The initial snapshot sees every transaction the stream no longer emits.

A backend writes its commit record before it leaves the proc array (PostgreSQL's
RecordTransactionCommit, then ProcArrayEndTransaction), and a synchronous standby's
wait lies between the two. If the RUNNING_XACTS record that makes decoding consistent
is logged in between, the transaction commits before the consistent point (so the
stream skips it) while a live snapshot taken then does not see it yet: its rows would
be in neither. PostgreSQL's snapshot builder waits for such transactions
(SnapBuildWaitSnapshot); pgcdc retakes its catalog snapshot until it sees them
(`SnapBuilder.must_see`, `Catalog.snapshot(must_see=...)`).

The window is made to last here: `synchronous_standby_names` names a standby that
never connects, so one transaction, the only one with `synchronous_commit = on`, stays
in the proc array after its commit record. It runs on a fault instance (fault-pg18, in
CI's lane H beside the HA pairs): the setting holds the whole server's commits, never
one the other tests share.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import psycopg2
import pytest

from tests.integration.pipeline_kafka_support import insert_lsn, pipeline, read_all

pytestmark = [pytest.mark.integration, pytest.mark.faults]


def _reload(admin: Any, standby_names: str | None) -> None:
    cur = admin.cursor()
    if standby_names is None:
        cur.execute("ALTER SYSTEM RESET synchronous_standby_names")
    else:
        cur.execute("ALTER SYSTEM SET synchronous_standby_names = %s", (standby_names,))
    cur.execute("SELECT pg_reload_conf()")
    time.sleep(0.5)  # the reload reaches the backends at their next command


def test_commit_in_the_proc_array_at_the_consistent_point_is_in_the_snapshot_fault_pg18(
    fault_pg18: dict[str, Any], kafka: dict[str, Any], registry: dict[str, Any]
) -> None:
    """A (open before the worker starts) keeps the builder from an idle shortcut; B
    starts after the first RUNNING_XACTS, so the one logged once A is done makes the
    snapshot FULL; T starts after that, commits and waits for the missing standby; once
    B is done the next RUNNING_XACTS lists only T, and decoding is consistent there
    with T's commit record before it. The worker must wait until its snapshot sees T,
    and publish T's row (as a snapshot read) once the wait is over: without the wait
    the row is in neither the snapshot nor the stream."""
    ddl = ["CREATE TABLE t (id int PRIMARY KEY)"]
    with pipeline(fault_pg18, kafka, registry, "mustsee", ddl) as p:
        admin = psycopg2.connect(fault_pg18["dsn"])
        admin.autocommit = True
        _reload(admin, None)  # as it should be, even after a run killed half way
        admin.cursor().execute(f"ALTER DATABASE {p.db} SET synchronous_commit = local")
        a, b, t = p.connect(), p.connect(), p.connect()
        waiter: threading.Thread | None = None
        try:
            a.autocommit = b.autocommit = False
            a.cursor().execute("INSERT INTO t VALUES (1)")  # A has its xid, open
            # The worker's slot is made again after a checkpoint, so that its WAL starts
            # at a redo point after A's xid: setup's slot (and a slot reserving WAL
            # from the previous redo point) would show it a RUNNING_XACTS from before A,
            # with nothing running, consistent at once.
            admin.cursor().execute("CHECKPOINT")
            admin.cursor().execute("SELECT pg_drop_replication_slot(%s)", (p.slot,))
            worker = p.start_worker()
            worker.wait_event(("worker_started",), 90)  # its own RUNNING_XACTS is logged
            other = p.connect()
            other.cursor().execute("CHECKPOINT")  # RUNNING_XACTS {A}: BUILDING
            b.cursor().execute("INSERT INTO t VALUES (2)")  # B starts after it
            a.commit()
            other.cursor().execute("CHECKPOINT")  # RUNNING_XACTS {B}: FULL
            _reload(admin, "pgcdc_standby_that_never_connects")
            t.cursor().execute("SET synchronous_commit = on")
            waiter = threading.Thread(
                target=lambda: t.cursor().execute("INSERT INTO t VALUES (3)"), daemon=True
            )
            waiter.start()  # T commits, then waits for the standby in the proc array
            cur = other.cursor()
            deadline = time.monotonic() + 30
            while True:
                cur.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'"
                    " AND datname = current_database()"
                )
                if cur.fetchone()[0] == 1:
                    break
                assert time.monotonic() < deadline, "T never waited for the standby"
                time.sleep(0.05)
            b.commit()
            cur.execute("CHECKPOINT")  # RUNNING_XACTS {T}, T's commit before it: CONSISTENT
            time.sleep(3)
            assert not worker.has_event("worker_consistent"), (
                "the worker aligned its snapshot while T was still in the proc array:\n"
                + worker.tail()
            )
            _reload(admin, None)  # T leaves the proc array
            waiter.join(30)
            assert not waiter.is_alive(), "T still waits for the standby"
            worker.wait_event(("worker_consistent",), 90)
            p.wait_confirmed(insert_lsn(cur) - 1, 90, worker)
            other.close()
        finally:
            _reload(admin, None)
            if waiter is not None:
                waiter.join(30)
            for conn in (a, b, t):
                conn.close()
            admin.close()
        reads = read_all(p.settings(), [p.topic("t")])
    rows = sorted((r.key["id"], r.value["op"]) for r in reads if r.value is not None)
    assert rows == [(1, "r"), (2, "r"), (3, "r")], worker.tail()
