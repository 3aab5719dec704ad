"""A long pause between two reads of the physical stream (a long replay) is survived.

PostgreSQL's walsender drops a client it has not heard from for wal_sender_timeout.
pgcdc answers from inside long replays with `PhysicalStream.keepalive()`, and when a
walsender did drop it anyway, the stream reconnects and goes on from the last byte
received, with no gap and no repeat.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import psycopg2
import pytest

import connectors.postgres.stream as ws
from connectors.postgres.stream import PhysicalStream
from tests.fixtures.slots import drop_slot_when_released

pytestmark = pytest.mark.integration

TIMEOUT_S = 2


def _activity(pg: dict[str, Any]) -> int:
    """Enough new WAL for several walsender messages; returns the flushed LSN after it."""
    conn = psycopg2.connect(pg["dsn"])
    conn.autocommit = True
    cur = conn.cursor()
    table = f"filler_{uuid.uuid4().hex[:8]}"
    cur.execute(
        f"CREATE TABLE {table} AS SELECT g, repeat('x', 200) AS pad "
        "FROM generate_series(1, 20000) g"
    )
    cur.execute(f"DROP TABLE {table}")
    cur.execute("SELECT pg_current_wal_flush_lsn()")
    hi, lo = cur.fetchone()[0].split("/")
    conn.close()
    return (int(hi, 16) << 32) | int(lo, 16)


def _pause_and_read(stream: PhysicalStream, pg: dict[str, Any], *, keepalive: bool) -> list[int]:
    """Read one chunk, pause three timeouts (keeping alive or not), then read on up to
    the end of WAL written after the pause."""
    starts: list[int] = []
    chunks = stream.chunks(idle_timeout=30)
    first_lsn, first = next(chunks)
    starts.append(first_lsn)
    expected_next = first_lsn + len(first)
    deadline = time.monotonic() + 3 * TIMEOUT_S
    while time.monotonic() < deadline:
        if keepalive:
            stream.keepalive()
        time.sleep(0.2)
    end = _activity(pg)
    for lsn, data in chunks:
        assert lsn == expected_next, "the stream skipped or repeated bytes"
        expected_next = lsn + len(data)
        starts.append(lsn)
        if expected_next >= end:
            break
    assert expected_next >= end, "the stream stopped before the new WAL arrived"
    return starts


@pytest.mark.parametrize("keepalive", [True, False])
def test_long_pause_between_reads(
    pg15: dict[str, Any], keepalive: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With keepalives the walsender keeps the connection; without, the stream
    reconnects by itself. Either way the bytes continue exactly where they stopped."""
    pg = pg15
    monkeypatch.setattr(ws, "KEEPALIVE_INTERVAL_S", 0.5)
    slot = f"keepalive_{uuid.uuid4().hex[:8]}"
    # A fresh redo pointer first, so the new slot's stream starts near the present.
    admin = psycopg2.connect(pg["dsn"])
    admin.autocommit = True
    admin.cursor().execute("CHECKPOINT")
    admin.close()
    # This connection's walsender drops a silent client after TIMEOUT_S seconds.
    dsn = f"{pg['dsn']} options='-c wal_sender_timeout={TIMEOUT_S * 1000}'"
    stream = PhysicalStream(dsn, slot, status_interval=30, backoff_initial=0.1)
    try:
        starts = _pause_and_read(stream, pg, keepalive=keepalive)
        assert len(starts) >= 3
        assert stream.reconnects == (0 if keepalive else 1)
    finally:
        stream.close()
        admin = psycopg2.connect(pg["dsn"])
        admin.autocommit = True
        drop_slot_when_released(admin, slot)  # the walsender exits after close()
        admin.close()
