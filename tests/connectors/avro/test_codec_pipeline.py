"""The avro plugin's records from real WAL, byte for byte against the old plugin.

A workload on a real server (PG15 and PG18) covering the stored forms the fast paths
read (short and long numerics of every sign and scale, timestamps, timestamptz and
dates at the edges, infinities), with NULLs, an UPDATE that leaves a TOASTed value
unchanged, a key change, deletes, a TRUNCATE, logical messages and a DDL. The WAL is
decoded twice by a pgcdc `Session` (reader, decoder, reorder buffer, row decoder): once
into `tests.connectors.avro.avro_reference.ReferencePlugin` (AvroSerializer, generic
datums) and once into `AvroPlugin`, with the plugins' clock frozen. Every record must
be identical: topic, key bytes, value bytes, headers.
"""

from __future__ import annotations

import tempfile
import uuid
from pathlib import Path
from time import monotonic, sleep
from typing import Any

import psycopg2
import pytest

from connectors.avro import plugin as avro_plugin
from connectors.avro.plugin import AvroPlugin
from connectors.postgres.archive import detect_segment_size, iter_wal_chunks
from connectors.postgres.server import force_running_xacts
from connectors.postgres.setup import setup, teardown
from service.app.session import Session, SessionConfig
from service.config import Settings
from service.lsn import parse_lsn
from service.output.api import OutputRecord, RecordRun
from tests.connectors.avro import avro_reference
from tests.connectors.avro.avro_reference import ReferencePlugin
from tests.connectors.avro.test_codec import drop_subjects
from tests.fixtures.slots import create_reference_slot

pytestmark = pytest.mark.integration

SCHEMA = """
CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
CREATE DOMAIN money2 AS numeric(8, 2);
CREATE TABLE items (
    id int, code text, amount numeric(12, 2), big numeric(38, 10), whole numeric(30, 0),
    anynum numeric, other numeric, at timestamptz, local timestamp, day date,
    note text, flags bool[], mood mood, price money2, ratio float8, ref bigint,
    PRIMARY KEY (id, code));
ALTER TABLE items ALTER COLUMN note SET STORAGE EXTERNAL;
CREATE TABLE plain (n numeric(10, 3), at timestamptz) WITH (autovacuum_enabled = off);
ALTER TABLE plain REPLICA IDENTITY FULL;
"""

WORKLOAD = [
    # numerics of every sign and magnitude, short and long stored forms
    """INSERT INTO items SELECT g, 'c' || g,
        (g * 7919 % 100000000 - 50000000)::numeric / 100 * (CASE WHEN g % 3 = 0 THEN 1 ELSE -1 END),
        (g::numeric * 123456789.0123456789 - 1e20) / (g + 1),
        (10::numeric ^ (g % 30)) - 1,
        CASE g % 5 WHEN 0 THEN 'NaN' WHEN 1 THEN '-0.000001' WHEN 2 THEN '1e30'
             WHEN 3 THEN '-123.45' ELSE g::numeric / 7 END,
        CASE WHEN g % 4 = 0 THEN NULL ELSE -g * 1000 END,
        timestamptz '2024-02-29 12:34:56.789+00' + g * interval '37 days 1 second 1 microsecond',
        timestamp '1999-12-31 23:59:59.999999' - g * interval '400 days',
        date '2000-01-01' + g * 311 - 80000,
        repeat('x', g % 3), ARRAY[g % 2 = 0, NULL], 'ok', g / 100.0, g / 3.0, g
      FROM generate_series(1, 300) g""",
    """INSERT INTO items (id, code, amount, at, local, day) VALUES
        (1000, 'inf', -128, 'infinity', '-infinity', 'infinity'),
        (1001, 'ninf', -327.68, '-infinity', 'infinity', '-infinity'),
        (1002, 'old', 0, '0001-01-01 00:00:00+00', '0001-01-01 00:00:00', '0001-01-01'),
        (1003, 'bc', 0.01, '0044-03-15 12:00:00+00 BC', '0100-01-01 00:00:00 BC',
         '4713-01-01 BC'),
        (1004, 'far', -0.01, '12345-06-07 08:09:10+00', '99999-01-01 00:00:00',
         '5874897-12-31'),
        (1005, 'y999', 9999999999.99, '0999-12-31 23:59:59.5+00', '0999-12-31 23:59:59',
         '0999-12-31')""",
    "INSERT INTO items (id, code, note) VALUES (2000, 'toast', repeat('toasted ', 5000))",
    "INSERT INTO plain VALUES (-1.5, now()), (NULL, NULL), (1234567.891, '2000-01-01')",
    # an UPDATE leaving the TOASTed note unchanged, a key change, REPLICA IDENTITY FULL
    "UPDATE items SET amount = amount + 1 WHERE id = 2000",
    "UPDATE items SET id = 3000 WHERE id = 1",
    "UPDATE plain SET n = n * 2",
    "DELETE FROM items WHERE id BETWEEN 2 AND 40",
    "DELETE FROM plain WHERE n IS NULL",
    "SELECT pg_logical_emit_message(true, 'app.audit', 'hello')",
    "SELECT pg_logical_emit_message(false, 'app.ping', '\\x0001'::bytea)",
    "ALTER TABLE items ADD COLUMN extra numeric(5, 1) DEFAULT 2.5",
    "INSERT INTO items (id, code, amount) VALUES (4000, 'after ddl', 1.23)",
    "TRUNCATE plain",
    "INSERT INTO plain VALUES (0, '2024-01-01 00:00:00+00')",
]


class FrozenTime:
    """The `time` module as the plugins see it, with a fixed wall clock."""

    @staticmethod
    def time() -> float:
        return 1_765_432_100.25

    @staticmethod
    def time_ns() -> int:
        return 1_765_432_100_250_000_000

    monotonic = staticmethod(monotonic)
    sleep = staticmethod(sleep)


def _dsn(pg: dict[str, Any], db: str) -> str:
    return f"host={pg['host']} port={pg['port']} user={pg['user']} dbname={db}"


def _logical_slot(dsn: str, cur: Any, slot: str) -> tuple[int, int]:
    """Create a test_decoding slot named `slot` (as a full snapshot, so its consistent
    point comes by the RUNNING_XACTS rule a session follows too): (its restart LSN, the
    LSN it is consistent from), where a session decoding the same WAL starts and aligns."""
    create_reference_slot(dsn, slot)
    cur.execute(
        "SELECT restart_lsn::text, confirmed_flush_lsn::text "
        "FROM pg_replication_slots WHERE slot_name = %s",
        (slot,),
    )
    row = cur.fetchone()
    assert row is not None
    return parse_lsn(row[0]), parse_lsn(row[1])


def _session(
    pg: dict[str, Any],
    dsn: str,
    slot: str,
    start: int,
    consistent: int,
    spill: str,
    plugin: object,
    out: list[OutputRecord],
    runs: list[int] | None = None,
    options: dict[str, str] | None = None,
) -> Session:
    """A session whose catalog snapshot is taken now, before the workload (as a live
    worker's), writing `plugin`'s records into `out`. With `runs`, record runs come
    through a run writer and a runs writer (as the worker's), each run's events
    (tombstones not counted) appended to `runs`."""

    def write_run(_l: int, _x: int, run: RecordRun) -> None:
        assert runs is not None and run.values
        runs.append(len(run.values) - run.tombstones)
        out.extend(run.records())

    def write_runs(lsn: int, xid: int, many: list[RecordRun]) -> None:
        assert many and lsn == many[0].lsns[0]
        for run in many:
            write_run(lsn, xid, run)

    return Session(
        SessionConfig(dsn=dsn, slot=slot, spill_dir=Path(spill), plugin_options=options or {}),
        plugin,
        "avro",
        lambda _l, _x, data: out.append(data),
        version=int(pg["version"]),
        start_lsn=start,
        decode_from=consistent,
        run_writer=None if runs is None else write_run,
        runs_writer=None if runs is None else write_runs,
    )


def _pump(pg: dict[str, Any], session: Session, start: int, end: int) -> None:
    """Decode the WAL in [start, end) from pg_wal (as bench_pipeline)."""
    wal = Path(pg["pgdata"]) / "pg_wal"
    reader, process = session.reader, session.decoding.process
    for lsn, data in iter_wal_chunks(wal, start, segment_size=detect_segment_size(wal)):
        reader.feed(data, lsn)
        for record in session.records():
            if record.lsn >= end:
                return
            if record.lsn >= start:
                process(record)
            if record.end_lsn >= end:
                return
    raise AssertionError(f"WAL ended before {end:X}")


def test_records_from_wal_equal_the_reference_plugins(
    pg: dict[str, Any], registry: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Real stored datums give the same records through both plugins, byte for byte."""
    monkeypatch.setattr(avro_plugin, "time", FrozenTime)
    monkeypatch.setattr(avro_reference, "time", FrozenTime)
    db = f"avrocodec_{uuid.uuid4().hex[:10]}"
    admin = psycopg2.connect(_dsn(pg, "postgres"))
    admin.autocommit = True
    admin.cursor().execute(f"CREATE DATABASE {db}")
    dsn, phys, slot = _dsn(pg, db), f"{db}_phys", f"{db}_slot"
    seen: list[OutputRecord] = []
    try:
        setup(dsn, phys)
        conn = psycopg2.connect(dsn)
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute(SCHEMA)
            start, consistent = _logical_slot(dsn, cur, slot)
            # pgcdc reads from a checkpoint's redo point on (a physical slot's start): from
            # here every page of pg_class the workload changes is logged whole first, so
            # the historic pg_class rebuilds the rows of its TRUNCATE.
            cur.execute("CHECKPOINT")
            force_running_xacts(dsn, int(pg["version"]))
            settings = Settings(
                source={"slot": slot, "dbname": db},
                kafka={
                    "bootstrap_servers": "127.0.0.1:1",
                    "topic_prefix": f"codecwal{uuid.uuid4().hex[:8]}",
                },
                registry={"url": registry["url"]},
            )
            expected: list[OutputRecord] = []
            got: list[OutputRecord] = []
            seen = expected
            ours = AvroPlugin(settings)
            ours.run_id = ReferencePlugin().run_id  # the context headers must agree
            with tempfile.TemporaryDirectory(prefix="pgcdc-avro-codec-") as spill:
                sessions = [
                    _session(
                        pg, dsn, slot, start, consistent, spill, ReferencePlugin(settings), expected
                    ),
                    _session(pg, dsn, slot, start, consistent, spill, ours, got),
                ]
                try:
                    for sql in WORKLOAD:
                        cur.execute(sql)
                    cur.execute("SELECT pg_current_wal_lsn()::text")
                    row = cur.fetchone()
                    assert row is not None
                    end = parse_lsn(row[0])
                    for session in sessions:
                        _pump(pg, session, start, end)
                finally:
                    for session in sessions:
                        session.close()
        conn.close()
        topics = {r.topic.rsplit(".", 1)[-1] for r in expected}
        assert topics >= {"items", "plain", "transaction", "message", "schema-changes"}
        assert len(expected) > 400
        assert len(got) == len(expected)
        for i, (g, e) in enumerate(zip(got, expected, strict=True)):
            assert (g.topic, g.key, g.value, g.headers) == (e.topic, e.key, e.value, e.headers), (
                i,
                e.topic,
            )
    finally:
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
