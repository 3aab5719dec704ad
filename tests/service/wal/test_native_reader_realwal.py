"""The native reader on WAL that real PostgreSQL 15 and 18 just wrote, against the Python
reader and against pg_waldump (differential, integration)."""

from __future__ import annotations

import itertools
import random
from typing import Any

import pytest

from connectors.postgres.archive import iter_wal_chunks
from service.impl import XLogReaderFactory
from service.wal.native import NativeXLogReader
from service.wal.reader import XLogReader
from service.wal.record import XLogRecord
from tests.service.realwal import as_tuple, fresh_db, run_workload, waldump

pytestmark = pytest.mark.integration


def read(cls: XLogReaderFactory, chunks: list[tuple[int, bytes]], start: int) -> list[XLogRecord]:
    """Every record the chunks hold, through one reader."""
    r = cls(start)
    out: list[XLogRecord] = []
    for lsn, data in chunks:
        r.feed(data, lsn)
        out.extend(r.records())
    return out


def test_fresh_wal_equals_python_reader_and_pg_waldump(pg: dict[str, Any]) -> None:
    """A varied workload (DML, TOAST, 2PC, savepoints, messages, DDL, pglz/lz4 images)
    read from pg_wal in streaming-sized and in random chunks: the native reader's records
    equal the Python reader's field for field, and match pg_waldump on LSN, rmgr,
    lengths, xid, prev and block references."""
    w = run_workload(pg, fresh_db(pg, "nwal"))
    raw = bytearray()
    first = w.start & ~8191
    for lsn, chunk in iter_wal_chunks(pg["pgdata"] + "/pg_wal", first):
        raw += chunk
        if lsn + len(chunk) >= w.end:
            break
    # Bytes at or past the flush LSN may not be written yet: never feed them.
    data = bytes(raw[: w.end - first])
    streaming = [(first + i, data[i : i + (128 << 10)]) for i in range(0, len(data), 128 << 10)]
    rng = random.Random(w.end)
    cuts = sorted({0, len(data), *(rng.randrange(len(data)) for _ in range(300))})
    jagged = [(first + a, data[a:b]) for a, b in itertools.pairwise(cuts)]
    py = read(XLogReader, streaming, first)
    assert read(NativeXLogReader, streaming, first) == py
    assert read(NativeXLogReader, jagged, first) == py
    theirs = waldump(pg, w.start, w.end)
    mine = [as_tuple(r, pg["version"]) for r in py if w.start <= r.lsn <= theirs[-1][0]]
    assert len(theirs) > 500
    assert mine == theirs
