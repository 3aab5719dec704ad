"""Physical streaming source against real PG15/PG18: streaming equals files."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import psycopg2
import pytest

from connectors.postgres.archive import read_records
from connectors.postgres.stream import PhysicalStream
from service.wal.reader import XLogReader
from service.wal.record import XLogRecord
from tests.fixtures.slots import drop_slot_when_released
from tests.service.realwal import fresh_db, run_workload

pytestmark = pytest.mark.integration


def _lsn(text: str) -> int:
    hi, lo = text.split("/")
    return (int(hi, 16) << 32) | int(lo, 16)


def test_streaming_equals_files(pg: dict[str, Any]) -> None:
    """The same LSN range read over the physical replication protocol (from a new
    slot's restart_lsn, in walsender-sized chunks that end mid-record) and from the
    pg_wal segment files yields identical records; feedback moves the slot."""
    slot = f"pgcdc_t_{uuid.uuid4().hex[:10]}"
    admin = psycopg2.connect(pg["dsn"])
    admin.autocommit = True
    cur = admin.cursor()
    stream = PhysicalStream(pg["dsn"], slot, status_interval=0.5)
    try:
        chunks = stream.chunks(idle_timeout=60)  # generous: a loaded machine may be slow
        first_lsn, first = next(chunks)  # creates the slot and starts streaming
        cur.execute("SELECT restart_lsn FROM pg_replication_slots WHERE slot_name = %s", (slot,))
        start = _lsn(cur.fetchone()[0])
        assert first_lsn == start & ~8191, (first_lsn, start)
        w = run_workload(pg, fresh_db(pg, "strm"), compression=False)
        reader = XLogReader(start)
        streamed: list[XLogRecord] = []
        reader.feed(first, first_lsn)
        sizes = [len(first)]
        done = False
        for rec in reader.records():
            streamed.append(rec)
        for lsn, data in chunks:
            sizes.append(len(data))
            reader.feed(data, lsn)
            for rec in reader.records():
                if rec.lsn >= w.end:
                    done = True
                    break
                streamed.append(rec)
            if done:
                break
        assert done, "stream ended before the workload's end LSN"
        # Read the files while the slot still pins them: once the feedback has moved
        # it, any checkpoint (another test's, on the same server) may remove them.
        files = list(read_records(pg["pgdata"] + "/pg_wal", start, w.end))
        stream.confirm(streamed[-1].lsn)
        # Let one feedback go out, then check that the slot followed (never further).
        stream_feedback = threading.Event()
        stream_feedback.wait(1.0)
        for _ in zip(range(2), chunks, strict=False):
            pass
        assert len(files) > 500, len(files)
        if streamed != files:  # name the first difference, not two lists of records
            diff = next(
                (i for i, (a, b) in enumerate(zip(streamed, files, strict=False)) if a != b),
                min(len(streamed), len(files)),
            )
            raise AssertionError(
                f"{len(streamed)} records streamed, {len(files)} from the files; first "
                f"difference at #{diff}: "
                f"{streamed[diff] if diff < len(streamed) else None} vs "
                f"{files[diff] if diff < len(files) else None}"
            )
        assert max(sizes) <= 128 * 1024, max(sizes)
    finally:
        stream.close()
        cur.execute("SELECT restart_lsn FROM pg_replication_slots WHERE slot_name = %s", (slot,))
        row = cur.fetchone()
        drop_slot_when_released(admin, slot)  # the walsender exits after close()
        admin.close()
    assert row is not None and start <= _lsn(row[0]) <= streamed[-1].lsn, (
        row,
        start,
        streamed[-1].lsn,
    )


def test_stream_started_below_the_slot_never_drags_it_back(pg: dict[str, Any]) -> None:
    """A stream started at the first byte of the slot's segment, below its restart_lsn
    (as after an archive bridge), reports no flush position below that restart_lsn:
    PhysicalConfirmReceivedLocation would move the slot back into WAL the server may
    already have removed."""
    slot = f"pgcdc_t_{uuid.uuid4().hex[:10]}"
    admin = psycopg2.connect(pg["dsn"])
    admin.autocommit = True
    cur = admin.cursor()
    cur.execute(
        "SELECT (pg_create_physical_replication_slot(%s, true)).lsn::text, "
        "setting::bigint FROM pg_settings WHERE name = 'wal_segment_size'",
        (slot,),
    )
    restart_text, segment_size = cur.fetchone()
    restart = _lsn(restart_text)
    start = restart - restart % segment_size
    stream = PhysicalStream(
        pg["dsn"], slot, start_lsn=start, create_slot=False, status_interval=0.2
    )
    try:
        cur.execute("SELECT pg_logical_emit_message(false, 'pgcdc-test', 'x')")  # some WAL
        chunks = stream.chunks(idle_timeout=5)
        first_lsn, _ = next(chunks)
        assert first_lsn == start
        for lsn, data in chunks:  # past the slot's position, with feedback on the way
            if lsn + len(data) > restart:
                break
        threading.Event().wait(0.5)
        next(chunks, None)  # one more round of the loop: a status update goes out
    finally:
        stream.close()
        cur.execute(
            "SELECT restart_lsn::text FROM pg_replication_slots WHERE slot_name = %s", (slot,)
        )
        after = _lsn(cur.fetchone()[0])
        drop_slot_when_released(admin, slot)
        admin.close()
    assert after == restart, (restart_text, f"{after:X}")
