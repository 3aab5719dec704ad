"""Run one workload through a real test_decoding slot and through pgcdc, same server.

`compare(pg, setup_sql, workload, options)`:
1. creates a fresh database and installs pgcdc's DDL capture (`connectors.postgres.setup`);
2. runs `setup_sql` (tables, types) — before any slot, so neither side decodes it;
3. takes a CHECKPOINT and creates a test_decoding logical slot (built as a full
   snapshot: `tests.fixtures.slots.create_reference_slot`); pgcdc starts reading at
   that checkpoint's redo point, as a physical slot's restart_lsn would have it start
   (the historic pg_class, `service.schema.pgclass`, rebuilds pg_class's pages from a
   redo point on); commits before the slot are in pgcdc's catalog snapshot, so neither
   side prints them;
4. starts a pgcdc `Session` (catalog snapshot, text plugin) and forces RUNNING_XACTS;
5. runs `workload`: a list of steps, each a SQL string (on connection 0), a tuple
   (connection index, SQL), so transactions can interleave across sessions, or a
   callable given the connections (for COPY ... FROM STDIN through copy_expert), or
   DRAIN: read the slot's changes so far (test_decoding then decodes that part while
   later steps have not run yet; see DRAIN);
6. reads the slot's changes with the same options and decodes pg_wal with pgcdc up to
   the LSN after the workload;
and returns both outputs as lists of lines.

`unknown_types` is the session's decoding.unknown_types policy (default: fail).
`plugin` makes pgcdc's plugin (default: the text plugin, TestDecodingPlugin).

`two_phase=True` creates the slot with two_phase enabled (test_decoding then prints
PREPARE TRANSACTION / COMMIT PREPARED / ROLLBACK PREPARED) and gives pgcdc's text
plugin the matching `two-phase` option; by default both decode a prepared transaction
at COMMIT PREPARED, like a plain commit.

The WAL is read straight from the cluster's pg_wal (the logical slot keeps it there).
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg2

from connectors.postgres.archive import detect_segment_size, iter_wal_chunks
from connectors.postgres.server import force_running_xacts
from connectors.postgres.setup import setup, teardown
from service.app.session import Session, SessionConfig
from service.lsn import parse_lsn
from service.output.text import TestDecodingPlugin
from service.types.unknown import UnknownTypePolicy
from tests.fixtures.slots import create_reference_slot

Step = str | tuple[int, str] | Callable[[list[Any]], None]

DRAIN = "-- pgcdc: both decoders catch up here"
"""A workload step: both decoders catch up with the WAL written so far, as a slot and a
pgcdc worker that keep up would. The slot's changes are read; the current segment is
switched (pg_switch_wal) and pgcdc decodes every completed segment.

Why it matters, on both sides:
- PostgreSQL decodes a prepared transaction at PREPARE with the catalog *of decoding
  time*: if it was rolled back before the slot reads it, the catalog lookup of its
  first change detects the "concurrent abort" and drops its changes
  (ReorderBufferProcessTXN), depending on the relfilenode map cache.
- pgcdc reads whose relfilenode is whose off the WAL (the pg_class rows of TRUNCATE,
  VACUUM FULL and CLUSTER), so a workload without DRAIN (pgcdc decoding all of it
  afterwards, as a lagging or restarted worker) must give the same lines."""


def aligned_session(
    dsn: str,
    slot: str,
    version: int,
    start: int,
    plugin: Any,
    reader: Any,
    tmp_path: Path,
    *,
    work_mem: int | None = None,
    unknown_types: UnknownTypePolicy | None = None,
) -> Session:
    """A session of `plugin` (its lines dropped) decoding from `start` on a first start:
    it aligns the data snapshot `reader` reads (a SnapshotReader) at its consistent
    point, as the worker's does."""
    config = SessionConfig(
        dsn=dsn, slot=slot, spill_dir=tmp_path / "spill", unknown_types=unknown_types
    )
    if work_mem is not None:
        config.work_mem = work_mem
    return Session(
        config,
        plugin,
        "collect",
        lambda lsn, xid, data: None,
        version=version,
        start_lsn=start,
        align=True,
        snapshot_reader=reader,
    )


class SegmentFeeder:
    """Feeds a session the server's WAL in whole segments, from `start` on: each
    `catch_up` switches to a new segment (pg_switch_wal) and feeds every segment
    completed since the last call (none when the switch was a no-op at a segment
    boundary: the next segment may not exist yet)."""

    def __init__(self, pg: dict[str, Any], cur: Any, start: int) -> None:
        self.cur = cur
        self.wal = Path(pg["pgdata"]) / "pg_wal"
        self.segment_size = detect_segment_size(self.wal)
        self.fed = start

    def catch_up(self, session: Session) -> None:
        self.cur.execute("SELECT pg_switch_wal()")
        done = -(-parse_lsn(_one(self.cur)) // self.segment_size) * self.segment_size
        if done <= self.fed:
            return
        for lsn, data in iter_wal_chunks(self.wal, self.fed, segment_size=self.segment_size):
            if lsn >= done:
                break
            session.feed(lsn, data)
        self.fed = done


@dataclass
class Outcome:
    expected: list[str]  # test_decoding's lines
    actual: list[str]  # pgcdc's lines
    session: Session


def _one(cur: Any) -> Any:
    row = cur.fetchone()
    assert row is not None
    return row[0]


def _lines(rows: list[Any]) -> list[str]:
    return [bytes(row[0]).decode("utf-8", errors="replace") for row in rows]


def _dsn(pg: dict[str, Any], db: str) -> str:
    return f"host={pg['host']} port={pg['port']} user={pg['user']} dbname={db}"


def compare(
    pg: dict[str, Any],
    setup_sql: Sequence[str],
    workload: Sequence[Step],
    options: dict[str, str] | None = None,
    *,
    work_mem: int = 64 * 1024 * 1024,
    spill_dir: Path | None = None,
    connections: int = 2,
    two_phase: bool = False,
    unknown_types: UnknownTypePolicy | None = None,
    plugin: Callable[[], object] = TestDecodingPlugin,
) -> Outcome:
    options = {"include-xids": "0", "skip-empty-xacts": "1", **(options or {})}
    db = f"cmp_{uuid.uuid4().hex[:10]}"
    own_spill = Path("/tmp") / f"pgcdc-spill-{db}"  # removed at the end, unlike a caller's
    admin = psycopg2.connect(_dsn(pg, "postgres"))
    admin.autocommit = True
    admin.cursor().execute(f"CREATE DATABASE {db}")
    dsn = _dsn(pg, db)
    phys = f"{db}_phys"
    setup(dsn, phys)
    conns = [psycopg2.connect(dsn) for _ in range(connections)]
    for c in conns:
        c.autocommit = True
    cur = conns[0].cursor()
    session: Session | None = None
    try:
        for sql in setup_sql:
            cur.execute(sql)
        cur.execute("CHECKPOINT")
        cur.execute("SELECT redo_lsn FROM pg_control_checkpoint()")
        start = parse_lsn(_one(cur))
        create_reference_slot(dsn, db, two_phase=two_phase)
        lines: list[str] = []
        session = Session(
            SessionConfig(
                dsn=dsn,
                slot=db,
                work_mem=work_mem,
                spill_dir=spill_dir or own_spill,
                plugin_options={
                    **options,
                    "server-version": str(pg["version"]),
                    "two-phase": "1" if two_phase else "0",
                },
                unknown_types=unknown_types,
            ),
            plugin(),
            "text",
            lambda lsn, xid, data: lines.append(data),
            version=int(pg["version"]),
            start_lsn=start,
        )
        force_running_xacts(dsn, int(pg["version"]))
        args: list[str] = []
        for key, value in options.items():
            args += [key, value]
        placeholders = ", ".join(["%s"] * len(args))
        # The binary variant: the text one goes through textout, which ends the line at
        # its first NUL byte (a message's payload may hold any bytes); pgcdc's plugin
        # decodes payloads as UTF-8 with replacement, and so do these lines.
        get_changes = (
            f"SELECT data FROM pg_logical_slot_get_binary_changes(%s, NULL, NULL, {placeholders})"
        )
        expected: list[str] = []
        wal = Path(pg["pgdata"]) / "pg_wal"
        segment_size = detect_segment_size(wal)
        fed = start
        for step in workload:
            if step == DRAIN:
                cur.execute(get_changes, (db, *args))
                expected += _lines(cur.fetchall())
                cur.execute("SELECT pg_switch_wal()")
                switched = parse_lsn(_one(cur))
                done = -(-switched // segment_size) * segment_size  # whole segments only
                if done <= fed:
                    # Nothing completed since the last DRAIN (the switch was a no-op at a
                    # segment boundary): the next segment may not exist yet.
                    continue
                for lsn, data in iter_wal_chunks(wal, fed, segment_size=segment_size):
                    if lsn >= done:
                        break
                    session.feed(lsn, data)
                fed = max(fed, done)
                continue
            if callable(step):
                step(conns)
                continue
            index, sql = (0, step) if isinstance(step, str) else step
            conns[index].cursor().execute(sql)
        cur.execute("SELECT pg_current_wal_lsn()")
        end = parse_lsn(_one(cur))
        cur.execute(get_changes, (db, *args))
        expected += _lines(cur.fetchall())
        if end > fed:  # else the last DRAIN read it all; the next segment may not exist
            session.pump(iter_wal_chunks(wal, fed, segment_size=segment_size), until_lsn=end)
        return Outcome(expected, lines, session)
    finally:
        if session is not None:
            session.close()
        shutil.rmtree(own_spill, ignore_errors=True)
        cur.execute("SELECT pg_drop_replication_slot(%s)", (db,))
        for c in conns:
            c.close()
        teardown(dsn, phys)
        admin.cursor().execute(f"DROP DATABASE {db} WITH (FORCE)")
        admin.close()
