"""The chunk read's snapshot misses a transaction whose commit record precedes the low
watermark (service.tablesnap.watermark, "The one race the textbook method misses").

A transaction's commit record is written, and flushed, before it leaves the proc
array; with synchronous replication it waits in between (SyncRepWaitForLSN in
RecordTransactionCommit). On fault-pg15 with `synchronous_standby_names` naming a
standby that never connects, a writer session with `synchronous_commit = on` stays in
that gap for as long as the test wants: the stream decodes its UPDATE, and every MVCC
snapshot taken meanwhile does not see it.

The writer's xid is the newest one that exists, so the chunk's snapshot has it at or
past its xmax, not in its xip (GetSnapshotData): the case the tracker once missed,
publishing the stale row after the stream's event, so that a consumer ended with the
old value. Now the chunk is read again until the writer is visible, and the topic
replays to the table.
"""

from __future__ import annotations

import signal
import threading
import time
from typing import Any

import pytest

from tests.faults import pgctl
from tests.integration.avro_kafka_support import read_topics
from tests.integration.pipeline_kafka_support import insert_lsn, pipeline
from tests.integration.snapshot_chunked_support import replay

pytestmark = [pytest.mark.integration, pytest.mark.faults]

NO_STANDBY = "pgcdc_no_such_standby"


def _waiting_in_sync_rep(admin: Any, pid: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    with admin.cursor() as cur:
        while time.monotonic() < deadline:
            cur.execute("SELECT wait_event FROM pg_stat_activity WHERE pid = %s", (pid,))
            row = cur.fetchone()
            if row is not None and row[0] == "SyncRep":
                return
            time.sleep(0.05)
    raise AssertionError(f"backend {pid} never waited for synchronous replication")


def test_commit_before_low_watermark_past_xmax_is_read_again(
    fault_pg15: dict[str, Any], kafka: dict[str, Any], registry: dict[str, Any]
) -> None:
    env = {
        "PGCDC_SNAPSHOT__METHOD": "chunked",
        "PGCDC_SNAPSHOT__MODE": "never",
        # One reader, and key 7 in the first chunk: on PG15 every high watermark takes
        # an xid (ChunkReader.emit), which would put the writer in later reads' xip.
        "PGCDC_SNAPSHOT__PARALLELISM": "1",
        "PGCDC_SNAPSHOT__CHUNK_ROWS": "50",
    }
    ddl = [
        "CREATE TABLE small (id bigint PRIMARY KEY, v int NOT NULL, note text)",
        "INSERT INTO small SELECT i, i, 'pre' FROM generate_series(1, 200) i",
        "ANALYZE small",  # no autoanalyze (which takes an xid) in the middle
    ]
    admin = pgctl.admin(fault_pg15)
    with pipeline(fault_pg15, kafka, registry, "race", ddl, extra_env=env) as p:
        worker = p.start_worker()
        worker.wait_ready()
        # Only a session that asks for it waits for the standby that never comes.
        pgctl.set_and_reload(fault_pg15, "synchronous_commit", "local")
        pgctl.set_and_reload(fault_pg15, "synchronous_standby_names", NO_STANDBY)
        writer = p.connect()
        committed = threading.Event()
        try:
            # The worker sees nothing until the writer waits: the signal's xid is then
            # older than the writer's, and no newer xid completes before the chunk read.
            worker.proc.send_signal(signal.SIGSTOP)
            try:
                p.cli("snapshot", "public.small")
                wcur = writer.cursor()
                wcur.execute("SET synchronous_commit = on")
                writer.autocommit = False
                wcur.execute("UPDATE small SET v = -7, note = 'new' WHERE id = 7")
                wcur.execute("SELECT pg_backend_pid()")
                wpid = int(wcur.fetchone()[0])

                def commit() -> None:
                    writer.commit()
                    committed.set()

                thread = threading.Thread(target=commit, daemon=True)
                thread.start()
                _waiting_in_sync_rep(admin, wpid, 30)
                assert p.query("SELECT v FROM small WHERE id = 7") == [(7,)]
            finally:
                worker.proc.send_signal(signal.SIGCONT)
            # The first chunk is read while the writer waits: it must be read again.
            event = worker.wait_event(["snapshot_chunk_retry", "snapshot_done"], 120)
            assert event["event"] == "snapshot_chunk_retry", (
                "the chunk read without the writer's committed UPDATE was published"
            )
            with admin.cursor() as cur:
                cur.execute("SELECT pg_cancel_backend(%s)", (wpid,))
            thread.join(30)
            assert committed.is_set(), "the writer's commit never returned"
        finally:
            pgctl.set_and_reload(fault_pg15, "synchronous_standby_names", None)
            pgctl.set_and_reload(fault_pg15, "synchronous_commit", None)
            writer.close()
        assert p.query("SELECT v, note FROM small WHERE id = 7") == [(-7, "new")]
        worker.wait_event(["snapshot_done"], 120)
        conn = p.connect()
        end = insert_lsn(conn.cursor())
        conn.close()
        p.wait_confirmed(end - 1, 120, worker)
        reads = read_topics(p.settings(), [p.topic("small")])
        state, twice, nr = replay(reads)
        assert not twice, twice[:10]
        assert nr == 200
        assert state[7]["v"] == -7 and state[7]["note"] == "new", state[7]
        rows = p.query("SELECT id, v, note FROM small")
        expected = {r[0]: {"id": r[0], "v": r[1], "note": r[2]} for r in rows}
        got = {k: {c: v[c] for c in ("id", "v", "note")} for k, v in state.items()}
        assert got == expected
        assert worker.terminate() == 0
    admin.close()
