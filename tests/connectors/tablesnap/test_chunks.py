"""Chunk reads against a real server: key and CTID chunks cover a table exactly once.

A table with a composite key and one without a key are read chunk after chunk with
small row and byte limits; the chunks, each continuing at the previous one's real
upper bound, must give every row exactly once, with values equal to `SELECT`, and
the watermarks must enclose the read in the WAL.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg2
import psycopg2.errors
import pytest

from connectors.tablesnap.chunks import ChunkReader, ChunkSpec
from service.config import FilterSettings
from tests.integration.pipeline_kafka_support import unique, with_db

pytestmark = pytest.mark.integration


@pytest.fixture
def db(pg: dict[str, Any]) -> Iterator[str]:
    name = unique("chunks")
    admin = psycopg2.connect(pg["dsn"])
    admin.autocommit = True
    admin.cursor().execute(f"CREATE DATABASE {name}")
    dsn = with_db(pg["dsn"], name)
    conn = psycopg2.connect(dsn)
    with conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE k (a int, b text, v numeric(8,2), PRIMARY KEY (a, b))")
        cur.execute(
            "INSERT INTO k SELECT i % 50, 'b' || i, i / 7.0 FROM generate_series(1, 2000) i"
        )
        cur.execute("CREATE TABLE n (x int, pad text)")
        cur.execute("INSERT INTO n SELECT i, repeat('p', 200) FROM generate_series(1, 1500) i")
        cur.execute("ANALYZE")
    conn.close()
    try:
        yield dsn
    finally:
        admin.cursor().execute(f"DROP DATABASE {name} WITH (FORCE)")
        admin.close()


def _oid(dsn: str, table: str) -> int:
    conn = psycopg2.connect(dsn)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT %s::regclass::oid", (table,))
            return int(cur.fetchone()[0])
    finally:
        conn.close()


def test_key_chunks_cover_the_table_once_with_cuts(db: str) -> None:
    """Key chunks of at most 300 rows and 4 KiB, each starting at the last one's real
    upper bound, give every row once, in key order, with SELECT's values."""
    reader = ChunkReader(db, FilterSettings())
    try:
        oid = _oid(db, "k")
        got: list[tuple[Any, ...]] = []
        lo: Any = None
        cuts = 0
        while True:
            handed: list[Any] = []
            read = reader.read(
                ChunkSpec(oid, "public.k", True, lo, None),
                rows=300,
                max_bytes=4096,
                low={},
                high={},
                on_read=handed.append,
            )
            assert handed == [read]
            assert read.low_lsn < read.high_lsn
            assert read.nbytes <= 4096
            for fields in read.rows:
                a, b, v = read.values(fields)
                got.append((a.value, b.value, v.value))
            if not read.cut:
                break
            cuts += 1
            lo = read.real_hi
        assert cuts > 5
        conn = psycopg2.connect(db)
        with conn.cursor() as cur:
            cur.execute("SELECT a, b, v FROM k ORDER BY a, b")
            expected = [tuple(r) for r in cur.fetchall()]
        conn.close()
        assert got == expected
    finally:
        reader.close()


def test_ctid_chunks_cover_a_keyless_table_once(db: str) -> None:
    """Page-range chunks (with a byte budget cutting at page boundaries) of a table
    without a key give every row exactly once."""
    reader = ChunkReader(db, FilterSettings())
    try:
        oid = _oid(db, "n")
        plan = reader.describe(oid)
        assert plan is not None and not plan.key_names and plan.pages > 5
        seen: list[int] = []
        lo, step = 0, 4
        while True:
            hi = lo + step if lo + step < plan.pages else None
            read = reader.read(
                ChunkSpec(oid, "public.n", False, lo, hi),
                rows=10**6,
                max_bytes=8192,
                low={},
                high={},
                on_read=lambda _: None,
                lock=len(seen) % 2 == 0,  # some chunks under the table lock: same rows
            )
            assert read.low_lsn < read.high_lsn
            seen.extend(int(read.values(f)[0].value) for f in read.rows)  # type: ignore[call-overload]
            nxt = read.real_hi
            if nxt is None:
                break
            assert isinstance(nxt, int) and nxt > lo
            lo = nxt
        assert sorted(seen) == list(range(1, 1501))
    finally:
        reader.close()


def test_a_table_ending_at_the_row_limit_leaves_no_empty_chunk(db: str) -> None:
    """2000 rows in chunks of 1000: the first bound planned is the 1000th key, the next
    planning says "to the end" (not the 2000th key, which would leave an empty third
    chunk), and a chunk of exactly `rows` rows is not cut."""
    reader = ChunkReader(db, FilterSettings())
    try:
        oid = _oid(db, "k")
        plan = reader.describe(oid)
        assert plan is not None
        first = reader.plan_key_bound(plan, None, 1000, None)
        assert first is not None
        assert reader.plan_key_bound(plan, first, 1000, None) is None
        assert reader.plan_key_bound(plan, None, 2000, None) is None
        reads = [
            reader.read(
                ChunkSpec(oid, "public.k", True, lo, hi),
                rows=1000,
                max_bytes=10**6,
                low={},
                high={},
                on_read=lambda _: None,
            )
            for lo, hi in ((None, first), (first, None))
        ]
        assert [len(r.rows) for r in reads] == [1000, 1000]
        assert [r.cut for r in reads] == [False, False]
        cut = reader.read(
            ChunkSpec(oid, "public.k", True, None, None),
            rows=1999,
            max_bytes=10**6,
            low={},
            high={},
            on_read=lambda _: None,
        )
        assert len(cut.rows) == 1999 and cut.cut
    finally:
        reader.close()


def test_a_locked_read_keeps_writers_out_until_the_high_watermark(db: str) -> None:
    """While a locked chunk read hands its rows over (before the high watermark), a
    writer of the table cannot get its ROW EXCLUSIVE lock; once read() returned, it can."""
    reader = ChunkReader(db, FilterSettings())
    writer = psycopg2.connect(db)
    writer.autocommit = True
    blocked: list[str] = []

    def try_insert(_: Any) -> None:
        with writer.cursor() as cur:
            cur.execute("SET lock_timeout = '200ms'")
            try:
                cur.execute("INSERT INTO n VALUES (-1, 'w')")
            except psycopg2.errors.LockNotAvailable as exc:
                blocked.append(str(exc))

    try:
        oid = _oid(db, "n")
        read = reader.read(
            ChunkSpec(oid, "public.n", False, 0, 2),
            rows=10**6,
            max_bytes=10**6,
            low={},
            high={},
            on_read=try_insert,
            lock=True,
        )
        assert blocked, "the writer was not kept out during the locked read"
        assert read.rows and read.low_lsn < read.high_lsn
        with writer.cursor() as cur:
            cur.execute("INSERT INTO n VALUES (-1, 'w')")
            assert cur.rowcount == 1
    finally:
        writer.close()
        reader.close()


def _flushed(dsn: str) -> int:
    conn = psycopg2.connect(dsn)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT pg_current_wal_flush_lsn() - '0/0'::pg_lsn")
            return int(cur.fetchone()[0])
    finally:
        conn.close()


@pytest.mark.parametrize("lock", [False, True])
def test_the_high_watermark_is_flushed_when_the_read_returns(db: str, lock: bool) -> None:
    """A chunk is published only once its high watermark is decoded, and a walsender
    sends only flushed WAL: when read() returns, the server's flush position is past
    the high watermark (a non-transactional message alone waits for the WAL writer,
    200 ms by default), with and without the table lock; ten reads in a row, so that
    another session's commit cannot flush them all by chance."""
    reader = ChunkReader(db, FilterSettings())
    try:
        oid = _oid(db, "n")
        for page in range(10):
            read = reader.read(
                ChunkSpec(oid, "public.n", False, page, page + 1),
                rows=10**6,
                max_bytes=10**6,
                low={},
                high={},
                on_read=lambda _: None,
                lock=lock,
            )
            assert _flushed(db) >= read.high_lsn, (page, read.high_lsn)  # its end LSN
    finally:
        reader.close()
