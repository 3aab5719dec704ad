"""Tests of the catalog stage's parsers and, against real servers, its cache."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg2
import pytest

from connectors.postgres.catalog import Catalog, parse_pg_snapshot
from service.lsn import parse_lsn


def test_parse_lsn() -> None:
    """`X/Y` LSN text becomes the 64-bit position."""
    assert parse_lsn("0/16B3748") == 0x16B3748
    assert parse_lsn("1A/0") == 0x1A << 32


def test_parse_pg_snapshot_reduces_to_32_bit_xids() -> None:
    """pg_current_snapshot()'s 64-bit xids keep their low 32 bits (the WAL's xids)."""
    assert parse_pg_snapshot("740:745:740,742") == (740, 745, frozenset({740, 742}))
    epoch1 = (1 << 32) + 5
    assert parse_pg_snapshot(f"{epoch1}:{epoch1 + 2}:") == (5, 7, frozenset())


@contextmanager
def _fresh_database(pg: dict[str, Any]) -> Iterator[str]:
    """A new database on `pg` (its DSN), dropped at the end."""
    name = f"pgcdc_cat_{uuid.uuid4().hex[:10]}"
    admin = psycopg2.connect(pg["dsn"])
    admin.autocommit = True
    with admin.cursor() as cur:
        cur.execute(f"CREATE DATABASE {name}")
    try:
        yield f"host={pg['host']} port={pg['port']} user={pg['user']} dbname={name}"
    finally:
        with admin.cursor() as cur:
            cur.execute(f"DROP DATABASE {name} WITH (FORCE)")
        admin.close()


@pytest.mark.integration
def test_table_cache_until_invalidated(pg: dict[str, Any]) -> None:
    """table() is served from the cache until invalidate(oid); then it is read again."""
    with _fresh_database(pg) as dsn:
        catalog = Catalog(dsn)
        try:
            conn = psycopg2.connect(dsn)
            conn.autocommit = True
            with conn.cursor() as cur:
                cur.execute("CREATE TABLE c (a int)")
                cur.execute("SELECT 'c'::regclass::oid")
                (oid,) = cur.fetchone() or (0,)
                first = catalog.table(oid)
                queries = catalog.queries
                cur.execute("ALTER TABLE c ADD COLUMN b text")
                assert catalog.table(oid) == first  # cached
                assert catalog.queries == queries
                catalog.invalidate(oid)
                fresh = catalog.table(oid)
                assert fresh is not None and [c.name for c in fresh.columns] == ["a", "b"]
                cur.execute("SELECT 'pg_class'::regclass::oid")
                (system,) = cur.fetchone() or (0,)
                assert catalog.table(system) is None  # not a user table
            conn.close()
        finally:
            catalog.close()


@pytest.mark.integration
def test_snapshot_is_taken_again_until_it_sees_must_see(pg: dict[str, Any]) -> None:
    """`snapshot(must_see=...)` does not hand on a snapshot in which one of those xids
    is still running: it takes it again until that transaction has ended, and the
    snapshot it returns sees it (and what `inside` reads there holds its row)."""
    with _fresh_database(pg) as dsn:
        writer = psycopg2.connect(dsn)
        try:
            with writer.cursor() as cur:
                cur.execute("CREATE TABLE m (id int)")
                writer.commit()
                cur.execute("INSERT INTO m VALUES (1)")
                cur.execute("SELECT txid_current() & 4294967295")
                (xid,) = cur.fetchone() or (0,)
            seen: list[int] = []

            def inside(cur: Any, _snapshot: Any) -> None:
                cur.execute("SELECT count(*) FROM m")
                seen.append(int(cur.fetchone()[0]))

            out: list[Any] = []
            taker = threading.Thread(
                target=lambda: out.append(
                    Catalog(dsn).snapshot(inside=inside, must_see=frozenset({xid}))
                )
            )
            taker.start()
            taker.join(1.5)
            assert taker.is_alive() and not out  # still waiting for the open transaction
            writer.commit()
            taker.join(30)
            assert not taker.is_alive()
            (snapshot,) = out
            assert snapshot.xid_visible(xid) and seen == [1]
            assert [t.name for t in snapshot.tables] == ["m"]
        finally:
            writer.close()
