"""A snapshot reader reads one chunk ahead of the worker's publication, and no further.

The snapshotter's reader threads (connectors.tablesnap.snapshotter, `READ_AHEAD`) read a
chunk while the worker still publishes the one before; memory holds at most
`READ_AHEAD` chunks per reader. Here one reader runs against a real table of five
chunks with a port that never publishes: it reads exactly two chunks and then waits;
once the first is published (its `published` event, which the worker sets after the
high watermark), it reads the third and waits again.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg2
import pytest

from connectors.tablesnap.snapshotter import READ_AHEAD, Snapshotter, _Pending
from service.config import load_settings

pytestmark = pytest.mark.integration


class _Port:
    """The worker's side, minus the publication (this test publishes by hand)."""

    def snapshot_ready(self) -> bool:
        return True

    def relation_at(self, oid: int, lsn: int) -> Any:
        return None

    def stage_snapshot_progress(self, topic: str, key: bytes, value: bytes) -> None:
        raise AssertionError("nothing is published here")

    def commit_snapshot_chunk(self, lsn: int, *, now: bool) -> None:
        raise AssertionError("nothing is published here")


@pytest.fixture
def dbname(pg: dict[str, Any]) -> Iterator[str]:
    name = f"readahead_{uuid.uuid4().hex[:10]}"
    admin = psycopg2.connect(pg["dsn"])
    admin.autocommit = True
    admin.cursor().execute(f"CREATE DATABASE {name}")
    try:
        yield name
    finally:
        admin.cursor().execute(f"DROP DATABASE {name} WITH (FORCE)")
        admin.close()


def _read(snap: Snapshotter) -> list[_Pending]:
    with snap.lock:
        return sorted(
            (p for p in snap._pending.values() if p.read is not None),
            key=lambda p: int(p.chunk_id),
        )


def _settle(snap: Snapshotter, count: int, timeout: float = 30.0) -> list[_Pending]:
    """The chunks read once `count` are, after a further second in which no more may be."""
    deadline = time.monotonic() + timeout
    while len(_read(snap)) < count:
        assert time.monotonic() < deadline, f"{len(_read(snap))} chunks read, not {count}"
        time.sleep(0.05)
    time.sleep(1.0)
    return _read(snap)


def test_one_reader_holds_two_chunks_and_reads_on_as_one_is_published(
    pg: dict[str, Any], dbname: str
) -> None:
    """With parallelism 1 and nothing published, the reader reads chunks 1 and 2 and
    stops there; publishing chunk 1 lets it read chunk 3, and only that."""
    conn = psycopg2.connect(pg["dsn"].replace("dbname=postgres", f"dbname={dbname}"))
    conn.autocommit = True
    conn.cursor().execute(
        "CREATE TABLE t (id int PRIMARY KEY, v text);"
        "INSERT INTO t SELECT g, md5(g::text) FROM generate_series(1, 500) g; ANALYZE t"
    )
    conn.close()
    settings = load_settings(
        source={"host": pg["host"], "port": pg["port"], "user": pg["user"], "dbname": dbname},
        snapshot={"method": "chunked", "chunk_rows": 100, "parallelism": 1, "kafka_signals": False},
    )
    snap = Snapshotter(settings, None)
    snap.fresh(["public.t"], snapshot=True)
    snap.start(_Port())
    try:
        assert READ_AHEAD == 2
        first = _settle(snap, READ_AHEAD)
        assert [p.chunk_id for p in first] == ["1", "2"]
        assert snap.reads == 2

        with snap.lock:
            snap._pending.pop("1")
        first[0].published.set()
        after = _settle(snap, READ_AHEAD)
        assert [p.chunk_id for p in after] == ["2", "3"]
        assert snap.reads == 3
    finally:
        snap.close()
