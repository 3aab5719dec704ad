"""The historic pg_class against the server's own pg_class, on 15, 16, 17 and 18.

`service.schema.pgclass` reads pg_class rows off the WAL: from page images, whole
logged tuples, and updates compressed against the old row. Two checks against the real
server:
- the column offsets it reads (`LAYOUTS`) are where each version's pg_attribute puts
  them (attlen and attalign of every column before them);
- from a checkpoint's redo point on, a workload of CREATE TABLE, TRUNCATE, CLUSTER,
  VACUUM FULL, ALTER TABLE ... TYPE and many small catalog updates (so that rows are
  rebuilt from images, from whole tuples and from prefix/suffix-compressed updates),
  the last row the WAL shows for each relation is the one `SELECT` reads from pg_class
  afterwards, field for field, and no row is lost.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import psycopg2
import pytest

from connectors.postgres.archive import detect_segment_size, iter_wal_chunks
from service.decode.events import ClassRowEvent, ClassRowLostEvent
from service.lsn import parse_lsn
from service.schema.pgclass import LAYOUTS, HistoricClass
from service.wal.reader import XLogReader
from service.wal.record import RelFileLocator

pytestmark = pytest.mark.integration

_ALIGN = {"c": 1, "s": 2, "i": 4, "d": 8}


def _dsn(pg: dict[str, Any], db: str) -> str:
    return f"host={pg['host']} port={pg['port']} user={pg['user']} dbname={db}"


def test_layout_matches_pg_attribute(pg: dict[str, Any]) -> None:
    """Each offset in LAYOUTS[version] is where pg_attribute's fixed-width, NOT NULL
    columns of pg_class put that column."""
    with psycopg2.connect(_dsn(pg, "postgres")) as conn, conn.cursor() as cur:
        cur.execute(
            "SELECT attname, attlen, attalign, attnotnull FROM pg_attribute"
            " WHERE attrelid = 'pg_class'::regclass AND attnum > 0 ORDER BY attnum"
        )
        offsets: dict[str, int] = {}
        pos = 0
        for name, attlen, attalign, notnull in cur.fetchall():
            if attlen < 0 or not notnull:
                break  # varlena or nullable: later columns move from row to row
            align = _ALIGN[attalign]
            pos = (pos + align - 1) // align * align
            offsets[name] = pos
            pos += attlen
    layout = LAYOUTS[int(pg["version"])]
    assert offsets["oid"] == 0
    assert offsets["relfilenode"] == layout.relfilenode
    assert offsets["reltablespace"] == layout.reltablespace
    assert offsets["reltoastrelid"] == layout.reltoastrelid
    assert offsets["relkind"] == layout.relkind
    assert offsets["relrewrite"] == layout.relrewrite


def test_rows_off_the_wal_equal_pg_class(pg: dict[str, Any]) -> None:
    """From a redo point on, every pg_class row written is rebuilt (none lost), and the
    last one per relation equals pg_class's row as SELECT reads it at the end."""
    db = f"pgc_{uuid.uuid4().hex[:10]}"
    admin = psycopg2.connect(_dsn(pg, "postgres"))
    admin.autocommit = True
    admin.cursor().execute(f"CREATE DATABASE {db}")
    conn = psycopg2.connect(_dsn(pg, db))
    conn.autocommit = True
    cur = conn.cursor()
    slot = f"{db}_phys"
    try:
        cur.execute("SELECT pg_create_physical_replication_slot(%s, true)", (slot,))
        cur.execute(
            "SELECT pg_relation_filenode('pg_class'), d.oid, d.dattablespace"
            " FROM pg_database d WHERE d.datname = current_database()"
        )
        filenode, dboid, spc = cur.fetchone()
        cur.execute("CHECKPOINT")
        cur.execute("SELECT redo_lsn FROM pg_control_checkpoint()")
        start = parse_lsn(cur.fetchone()[0])
        for i in range(12):
            cur.execute(f"CREATE TABLE w{i} (id int PRIMARY KEY, body text)")
            cur.execute(f"INSERT INTO w{i} VALUES (1, repeat('x', 3000))")
        for i in range(12):
            cur.execute(f"TRUNCATE w{i}")
            cur.execute(f"ANALYZE w{i}")  # stats: in-place and ordinary row updates
            if i % 3 == 0:
                cur.execute(f"CLUSTER w{i} USING w{i}_pkey")
            if i % 3 == 1:
                cur.execute(f"VACUUM FULL w{i}")
            if i % 3 == 2:
                cur.execute(f"ALTER TABLE w{i} ALTER COLUMN id TYPE bigint")
            cur.execute(f"COMMENT ON TABLE w{i} IS 'c'")
        cur.execute("DROP TABLE w11")
        cur.execute("SELECT pg_current_wal_lsn()")
        end = parse_lsn(cur.fetchone()[0])
        cur.execute(
            "SELECT oid, relfilenode, reltablespace, reltoastrelid, relkind, relrewrite"
            " FROM pg_class WHERE relname LIKE 'w%' OR oid IN"
            " (SELECT reltoastrelid FROM pg_class WHERE relname LIKE 'w%')"
        )
        live = {int(r[0]): r for r in cur.fetchall()}
        tracker = HistoricClass(int(pg["version"]), RelFileLocator(spc, dboid, filenode), start)
        wal = Path(pg["pgdata"]) / "pg_wal"
        reader = XLogReader(start, segment_size=detect_segment_size(wal))
        rows: dict[int, ClassRowEvent] = {}
        lost: list[ClassRowLostEvent] = []
        written = 0
        for lsn, chunk in iter_wal_chunks(wal, start, segment_size=detect_segment_size(wal)):
            reader.feed(chunk[: max(0, end - lsn)], lsn)
            for record in reader.records():
                if record.lsn >= end:
                    break
                if tracker.wants(record):
                    for ev in tracker.observe(record):
                        if isinstance(ev, ClassRowLostEvent):
                            lost.append(ev)
                        else:
                            written += 1
                            rows[ev.oid] = ev
            if lsn + len(chunk) >= end:
                break
        assert lost == []
        assert written > 100
        assert live
        for oid, (_, rel, tsp, toast, kind, rewrite) in live.items():
            got = rows[oid]
            assert (got.relfilenode, got.toast_relid, got.relkind, got.relrewrite) == (
                rel,
                toast,
                kind,
                rewrite,
            ), oid
            assert got.tablespace == (tsp or spc)
    finally:
        cur.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
        conn.close()
        admin.cursor().execute(f"DROP DATABASE {db} WITH (FORCE)")
        admin.close()
