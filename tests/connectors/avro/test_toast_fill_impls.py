"""The unchanged-TOAST fill under both row encoders, byte for byte (issue 32).

Rows with out-of-line text and jsonb values (uncompressed, and pglz- or lz4-compressed
where the server has lz4) are written before decoding starts; UPDATEs of another column
and a later transaction replacing one row's text log only the TOAST pointers of the
others; that row's first UPDATE is decoded after the replacement committed, so its old
text is read from the TOAST table's pages (pageinspect), as no query sees it any more.
The WAL is decoded by two pgcdc `Session`s whose sink carries the fill (`ToastFill`
over `SqlToastSource`, the real TOAST-table reader): one into `AvroPlugin` on the
Python path, one into `AvroPlugin` as `PGCDC_IMPL` selects it, the plugins' clock
frozen. Both must write the same records (topic, key, value bytes, headers), every
value whole as a SELECT shows it; under the native core the filled UPDATEs must be
encoded natively (no "external TOAST pointer" fallback). Two more sessions without the
fill (as `toast.unchanged = placeholder` publishes) give Debezium's placeholder for the
text, jsonb, bytea and text[] values the UPDATEs left alone: the same bytes on both
paths, and natively under the native core.
"""

from __future__ import annotations

import tempfile
import uuid
from typing import Any

import psycopg2
import pytest

from connectors.avro import plugin as avro_plugin
from connectors.avro.plugin import AvroPlugin
from connectors.avro.schema import UNAVAILABLE_BYTES
from connectors.postgres.server import force_running_xacts
from connectors.postgres.setup import setup, teardown
from connectors.postgres.toast import SqlToastSource
from service.config import Settings
from service.impl import native_row_core
from service.lsn import parse_lsn
from service.output.api import OutputRecord
from service.output.toastfill import ToastFill, ToastValueCache
from tests.connectors.avro.test_codec import drop_subjects
from tests.connectors.avro.test_codec_pipeline import (
    FrozenTime,
    _dsn,
    _logical_slot,
    _pump,
    _session,
)

pytestmark = pytest.mark.integration

SCHEMA = """
CREATE EXTENSION IF NOT EXISTS pageinspect;
CREATE TABLE tf (id int PRIMARY KEY, n int NOT NULL, t text, j jsonb, b bytea NOT NULL,
                 a text[]);
INSERT INTO tf SELECT i, 0,
    (SELECT string_agg(CASE WHEN i % 2 = 0 THEN md5(g::text) || repeat('q', 32)
                            ELSE md5(g::text || i::text) END, '')
     FROM generate_series(1, i * 160) g),
    (SELECT jsonb_object_agg('k' || g, md5(g::text || 'j' || i)) FROM generate_series(1, i * 60) g),
    (SELECT decode(string_agg(md5(g::text || 'b' || i), ''), 'hex')
     FROM generate_series(1, 200 + i) g),
    (SELECT array_agg(md5(g::text || 'a' || i)) FROM generate_series(1, 150 + i) g)
FROM generate_series(1, 8) i;
"""


def test_filled_updates_are_equal_on_python_and_native_paths(
    pg: dict[str, Any], registry: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Filled UPDATE events are byte-equal between the two encoders, carry each value as
    SELECT shows it, and are native under the native core; without the fill the same
    WAL gives the placeholder."""
    monkeypatch.setattr(avro_plugin, "time", FrozenTime)
    native = native_row_core() is not None
    db = f"toastimpl_{uuid.uuid4().hex[:10]}"
    admin = psycopg2.connect(_dsn(pg, "postgres"))
    admin.autocommit = True
    admin.cursor().execute(f"CREATE DATABASE {db}")
    dsn, phys, slot = _dsn(pg, db), f"{db}_phys", f"{db}_slot"
    seen: list[OutputRecord] = []
    sources: list[SqlToastSource] = []
    try:
        setup(dsn, phys)
        conn = psycopg2.connect(dsn)
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute(SCHEMA)
            cur.execute(
                "SELECT EXISTS (SELECT FROM pg_settings WHERE name = 'default_toast_compression'"
                " AND 'lz4' = ANY(enumvals))"
            )
            row = cur.fetchone()
            if row is not None and row[0]:
                cur.execute("ALTER TABLE tf ADD COLUMN z text COMPRESSION lz4")
                cur.execute(
                    "UPDATE tf SET z = (SELECT string_agg(md5(g::text) || repeat('z', 40), '')"
                    " FROM generate_series(1, 400) g)"
                )
            start, consistent = _logical_slot(dsn, cur, slot)
            force_running_xacts(dsn, int(pg["version"]))
            settings = Settings(
                source={"slot": slot, "dbname": db},
                kafka={
                    "bootstrap_servers": "127.0.0.1:1",
                    "topic_prefix": f"toastimpl{uuid.uuid4().hex[:8]}",
                },
                registry={"url": registry["url"]},
            )
            on_python, ours, unfilled, unfilled_python = (
                AvroPlugin(settings),
                AvroPlugin(settings),
                AvroPlugin(settings),
                AvroPlugin(settings),
            )
            on_python.run_id = ours.run_id = unfilled_python.run_id = unfilled.run_id
            python: list[OutputRecord] = []
            got: list[OutputRecord] = []
            before: list[OutputRecord] = []
            before_python: list[OutputRecord] = []
            with tempfile.TemporaryDirectory(prefix="pgcdc-toastimpl-") as spill:
                sessions = [
                    _session(pg, dsn, slot, start, consistent, spill, on_python, python),
                    _session(pg, dsn, slot, start, consistent, spill, ours, got),
                    _session(pg, dsn, slot, start, consistent, spill, unfilled, before),
                    _session(
                        pg, dsn, slot, start, consistent, spill, unfilled_python, before_python
                    ),
                ]
                seen = python
                on_python.native_rows = None  # the Python path, whatever PGCDC_IMPL says
                unfilled_python.native_rows = None
                assert (ours.native_rows is not None) == native
                for session in sessions[:2]:
                    source = SqlToastSource(dsn)
                    sources.append(source)
                    session.sink.fill = ToastFill(source, ToastValueCache(1 << 20))
                # What the worker's slot xmin does (tests/integration/test_toast_fill.py):
                # keep the replaced chunks stored, here with an open snapshot. Without it
                # the first read of the TOAST table prunes them (heap_page_prune_opt).
                holder = psycopg2.connect(dsn)
                holder.set_session(isolation_level="REPEATABLE READ")
                holder.cursor().execute("SELECT 1")
                try:
                    cur.execute("UPDATE tf SET n = n + 1")
                    cur.execute(
                        "UPDATE tf SET n = n + 1, t = (SELECT string_agg(md5(g::text || 'w'),"
                        " '') FROM generate_series(1, 200) g) WHERE id = 3"
                    )
                    cur.execute("SELECT id, t, j::text FROM tf ORDER BY id")
                    expected = cur.fetchall()
                    cur.execute("SELECT pg_current_wal_lsn()::text")
                    row = cur.fetchone()
                    assert row is not None
                    end = parse_lsn(row[0])
                    for session in sessions:
                        _pump(pg, session, start, end)
                finally:
                    holder.close()
                    for session in sessions:
                        session.close()
        conn.close()
        rows = [r for r in python if r.topic.endswith(".tf") and r.value is not None]
        assert len(rows) == 9  # 8 UPDATEs of n, one of n and t
        assert len(got) == len(python)
        for i, (g, e) in enumerate(zip(got, python, strict=True)):
            assert (g.topic, g.key, g.value, g.headers) == (e.topic, e.key, e.value, e.headers), i
        holes = [(i, r.key) for i, r in enumerate(rows) if r.value and UNAVAILABLE_BYTES in r.value]
        assert not holes, holes
        for row_id, t, j in expected:  # the last event of each row carries its values
            last = [r for r in rows if r.key is not None and r.key.endswith(bytes([row_id * 2]))]
            assert last, row_id
            value = last[-1].value
            assert value is not None
            assert t.encode() in value and j.encode() in value, row_id
        old = [r for r in before if r.topic.endswith(".tf") and r.value is not None]
        assert len(old) == 9 and all(
            r.value is not None and UNAVAILABLE_BYTES in r.value for r in old
        )
        # the placeholders: a string (text, jsonb) or bytes (bytea) field holds it as
        # its length and bytes, a text[] field as an array of one ["null", string] item
        # (b and a are stored out of line in every row); on both paths, byte for byte
        held = bytes([2 * len(UNAVAILABLE_BYTES)]) + UNAVAILABLE_BYTES
        listed = b"\x02\x02" + held + b"\x00"
        assert all(r.value is not None and listed in r.value for r in old)
        assert all(r.value is not None and r.value.count(held) >= 2 for r in old)
        assert len(before_python) == len(before)
        for i, (g, e) in enumerate(zip(before, before_python, strict=True)):
            assert (g.topic, g.key, g.value, g.headers) == (e.topic, e.key, e.value, e.headers), i
        if native:
            for plugin in (ours, unfilled):
                counts = plugin.native_rows
                assert counts is not None
                assert "external TOAST pointer" not in counts.fallbacks, counts.fallbacks
                assert counts.native >= 9, counts.native
        assert sum(s.queries for s in sources) >= 2
    finally:
        for source in sources:
            source.close()
        drop_subjects(registry, seen)
        conn = psycopg2.connect(dsn)
        conn.autocommit = True
        conn.cursor().execute(
            "SELECT pg_drop_replication_slot(slot_name) "
            "FROM pg_replication_slots WHERE slot_name = %s",
            (slot,),
        )
        conn.close()
        teardown(dsn, phys)
        admin.cursor().execute(f"DROP DATABASE {db} WITH (FORCE)")
        admin.close()
