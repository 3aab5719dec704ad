"""Differential test: pgcdc's reader + decoder against pg_waldump on real PG15..PG18 WAL.

A workload in a fresh database covers inserts, HOT and non-HOT updates, deletes, COPY
(multi-insert), TRUNCATE, savepoints with ROLLBACK TO, 2PC, TOAST values, logical
messages, DDL (including a rewriting ALTER TYPE), REPLICA IDENTITY FULL, INSERT ... ON
CONFLICT and a CHECKPOINT. Every record in the LSN range (other sessions' records
included) must match pg_waldump's line: LSN, prev, rmgr, type name, lengths, xid and
block references; and the decoded events must agree with what pg_waldump's desc says
(offsets, tuple counts, subxacts, running xacts, checkpoint fields, smgr paths,
messages, new_cid targets).
"""

from __future__ import annotations

import io
import re
import subprocess
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg2
import pytest

from connectors.postgres.archive import read_records, segment_name
from service.app.waldump import blkref_text, format_record, lsn_text, record_prefix
from service.decode.dispatch import decoder_for
from service.decode.events import (
    CheckpointEvent,
    CommitEvent,
    HeapChange,
    MessageEvent,
    NewCidEvent,
    PrepareEvent,
    RunningXactsEvent,
    SmgrCreateEvent,
    TruncateEvent,
)
from service.wal.record import XLogRecord

pytestmark = pytest.mark.integration

END_PREFIX = "pgcdc.test.decode.end"


def records_until_marker(pg_wal: Path, start: int, version: int) -> list[XLogRecord]:
    """Records from `start` (directory WAL source) through the message with END_PREFIX."""
    decoder = decoder_for(version)
    out: list[XLogRecord] = []
    for rec in read_records(pg_wal, start):
        out.append(rec)
        if rec.rmid == 21:
            for ev in decoder.decode(rec):
                if isinstance(ev, MessageEvent) and ev.prefix == END_PREFIX:
                    return out
    raise AssertionError("end of WAL before the end marker")


def workload(dsn: str) -> None:
    """The statements whose WAL is compared (autocommit unless a block says BEGIN)."""
    conn = psycopg2.connect(dsn)
    conn.autocommit = True
    cur = conn.cursor()
    for sql in [
        "CREATE TABLE t (id int PRIMARY KEY, a text, b int, c float8, d timestamptz)",
        "INSERT INTO t SELECT g, 'row ' || g, g, g * 1.5, now() FROM generate_series(1, 50) g",
        "UPDATE t SET b = b + 1 WHERE id <= 5",  # HOT: b is not indexed
        "UPDATE t SET id = id + 1000 WHERE id = 10",  # non-HOT, key changed: old key
        "UPDATE t SET a = repeat('x', 3000) WHERE id = 11",  # new tuple on another page
        "DELETE FROM t WHERE id BETWEEN 20 AND 25",
        "CREATE TABLE big (id int, v text)",
        "ALTER TABLE big ALTER COLUMN v SET STORAGE EXTERNAL",
        "INSERT INTO big SELECT 1, string_agg(md5(g::text), '') FROM generate_series(1, 400) g",
        "CREATE TABLE full_ri (id int, v text)",
        "ALTER TABLE full_ri REPLICA IDENTITY FULL",
        "INSERT INTO full_ri VALUES (1, 'a'), (2, 'b')",
        "UPDATE full_ri SET v = 'c' WHERE id = 1",
        "DELETE FROM full_ri WHERE id = 2",
        "INSERT INTO t VALUES (1, 'dup') ON CONFLICT (id) DO UPDATE SET a = 'upd'",
        "INSERT INTO t VALUES (5000, 'new') ON CONFLICT (id) DO NOTHING",
        "SELECT pg_logical_emit_message(false, 'pgcdc.test', 'not transactional')",
        "BEGIN",
        "INSERT INTO t VALUES (2000, 'sp0')",
        "SELECT pg_logical_emit_message(true, 'pgcdc.test', 'transactional')",
        "SAVEPOINT s1",
        "INSERT INTO t VALUES (2001, 'sp1')",
        "ROLLBACK TO s1",
        "SAVEPOINT s2",
        "INSERT INTO t VALUES (2002, 'sp2')",
        "RELEASE s2",
        "COMMIT",
        "BEGIN",
        "INSERT INTO t VALUES (3000, 'prep')",
        "SAVEPOINT p1",
        "INSERT INTO t VALUES (3001, 'prep sub')",
        "PREPARE TRANSACTION 'pgcdc_gid_commit'",
        "COMMIT PREPARED 'pgcdc_gid_commit'",
        "BEGIN",
        "DELETE FROM t WHERE id = 3000",
        "PREPARE TRANSACTION 'pgcdc_gid_abort'",
        "ROLLBACK PREPARED 'pgcdc_gid_abort'",
        "BEGIN",
        "TRUNCATE full_ri",
        "INSERT INTO full_ri VALUES (3, 'after truncate')",
        "COMMIT",
        "ALTER TABLE t ADD COLUMN e int",
        "ALTER TABLE t ALTER COLUMN b TYPE bigint",  # rewrite into a new relfilenode
        "CHECKPOINT",
    ]:
        cur.execute(sql)
    buf = io.StringIO(
        "".join(f"{i}\tcopy {i}\t{i}\t{i}.5\t2024-01-01\t{i}\n" for i in range(1, 400))
    )
    cur.execute("CREATE TABLE c (id int, a text, b int, c float8, d date, e int)")
    cur.copy_expert("COPY c FROM STDIN", buf)
    cur.execute("BEGIN")
    cur.execute("SELECT pg_logical_emit_message(true, %s, 'end')", (END_PREFIX,))
    cur.execute("COMMIT")
    conn.close()


def pg_waldump_lines(info: dict[str, Any], start: int, end: int) -> list[str]:
    """pg_waldump's record lines for [start, end).

    pg_waldump reads the live pg_wal, where the server may be renaming or recycling a
    segment at that moment; a run that fails or prints nothing is repeated, and the
    last one's stderr is kept in the assertion if all fail.
    """
    # Naming the segments spares pg_waldump its directory scan for the segment size,
    # which trips over a segment file the server is just creating.
    seg = 16 * 1024 * 1024
    cmd = [
        info["bin"] + "/pg_waldump",
        "-p",
        info["pgdata"] + "/pg_wal",
        "-s",
        lsn_text(start),
        "-e",
        lsn_text(end),
        segment_name(1, start // seg, seg),
        segment_name(1, (end - 1) // seg, seg),
    ]
    stderr = ""
    for _ in range(3):
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        lines = [line for line in proc.stdout.splitlines() if line.startswith("rmgr: ")]
        if lines:  # an error after the last wanted record is pg_waldump reaching -e
            return lines
        stderr = f"exit {proc.returncode}: {proc.stderr.strip()[-1000:]}"
        time.sleep(1)
    raise AssertionError(f"pg_waldump {' '.join(cmd[1:])} failed: {stderr}")


@pytest.fixture(scope="module")
def captured(pg: dict[str, Any]) -> Iterator[tuple[dict[str, Any], list[XLogRecord], list[str]]]:
    """Run the workload in a fresh database; return the records and pg_waldump's lines."""
    admin = psycopg2.connect(pg["dsn"])
    admin.autocommit = True
    dbname = f"pgcdc_decode_{uuid.uuid4().hex[:8]}"
    acur = admin.cursor()
    acur.execute(f"CREATE DATABASE {dbname}")
    acur.execute("SELECT pg_current_wal_insert_lsn()")
    start_text = acur.fetchone()[0]  # type: ignore[index]
    hi, lo = start_text.split("/")
    start = (int(hi, 16) << 32) | int(lo, 16)
    dsn = pg["dsn"].replace("dbname=postgres", f"dbname={dbname}")
    try:
        workload(dsn)
        records = records_until_marker(Path(pg["pgdata"]) / "pg_wal", start, pg["version"])
        lines = pg_waldump_lines(pg, start, records[-1].end_lsn)
        yield pg, records, lines
    finally:
        acur.execute(f"DROP DATABASE IF EXISTS {dbname}")
        admin.close()


def _split(line: str) -> tuple[str, str, str]:
    """(prefix through the type name, desc body, blkref suffix) of a pg_waldump line."""
    head, _, rest = line.partition(", desc: ")
    ident, _, body = rest.partition(" ")
    cut = body.find(", blkref #")
    if cut < 0:
        return f"{head}, desc: {ident} ", body, ""
    return f"{head}, desc: {ident} ", body[:cut], body[cut:]


def test_every_record_matches_pg_waldump(
    captured: tuple[dict[str, Any], list[XLogRecord], list[str]],
) -> None:
    """Each record's LSN, prev, rmgr, type, lengths, xid and blkrefs equal pg_waldump's."""
    info, records, lines = captured
    assert len(records) > 500
    assert len(lines) == len(records), (len(lines), len(records))
    for rec, line in zip(records, lines, strict=True):
        prefix, _body, blkrefs = _split(line)
        ours = record_prefix(rec, info["version"])
        if "UNKNOWN (" in ours:
            # rmgrs pgcdc has no type names for: compare everything up to "desc: "
            assert prefix.split(", desc: ")[0] == ours.split(", desc: ")[0], line
        else:
            assert prefix == ours, f"\n{line}\n{format_record(rec, info['version'])}"
        assert blkrefs == "".join(blkref_text(ref) for ref in rec.blocks), line
    print(f"\nPostgreSQL {info['version']}: {len(records)} records equal to pg_waldump's lines")


_OFF = re.compile(r"\boff:? (\d+)")
_NEW_OFF = re.compile(r"new(?:_off:| off) (\d+)")
_NTUPLES = re.compile(r"(?:ntuples: (\d+)|(\d+) tuples)")
_SUBXACTS = re.compile(r"; subxacts:((?: \d+)+)")
_RUNNING = re.compile(r"nextXid (\d+) latestCompletedXid (\d+) oldestRunningXid (\d+)")
_CHECKPOINT_REDO = re.compile(r"redo ([0-9A-F]+/[0-9A-F]+); tli (\d+);")
_CHECKPOINT_XID = re.compile(r"xid (\d+):(\d+);")
_OLDEST_XID = re.compile(r"oldest xid (\d+) in DB")
_NEW_CID = re.compile(r"rel:? (\d+)/(\d+)/(\d+)[;,] tid:? (\d+)/(\d+)")
_BLK0 = re.compile(r"blkref #0: rel (\d+)/(\d+)/(\d+) blk (\d+)")
_RELIDS = re.compile(r"\brelids:? \[?([\d ,]+)")


def _smgr_path(ev: SmgrCreateEvent) -> str:
    loc = ev.locator
    fork = ["", "_fsm", "_vm", "_init"][ev.fork]
    if loc.spc_oid == 1664:
        return f"global/{loc.rel_number}{fork}"
    return f"base/{loc.db_oid}/{loc.rel_number}{fork}"


def test_events_agree_with_pg_waldump_desc(
    captured: tuple[dict[str, Any], list[XLogRecord], list[str]],
) -> None:
    """Every record decodes; each event says what pg_waldump's desc says about it."""
    info, records, lines = captured
    decoder = decoder_for(info["version"])
    kinds: Counter[str] = Counter()
    for rec, line in zip(records, lines, strict=True):
        events = decoder.decode(rec)
        _prefix, body, blkrefs = _split(line)
        ident = line.partition(", desc: ")[2].partition(" ")[0]
        kinds[ident if rec.rmid in (0, 1, 2, 8, 9, 10, 21) else "other"] += 1
        blk0 = _BLK0.search(blkrefs)
        for ev in events:
            if isinstance(ev, HeapChange):
                assert blk0 is not None, line
                loc = ev.locator
                assert (loc.spc_oid, loc.db_oid, loc.rel_number, ev.block) == tuple(
                    int(g) for g in blk0.groups()
                ), line
                want = _NEW_OFF.search(body) if ident.startswith(("UPDATE", "HOT_UPDATE")) else None
                if rec.rmid == 10:
                    want = want or _OFF.search(body)
                    assert want is not None and ev.offset == int(want.group(1)), line
                kinds[f"change:{ev.kind.name}"] += 1
                if ev.old_tuple is not None:
                    kinds["old_key" if ev.old_is_key else "old_tuple"] += 1
                if ev.new_tuple is not None and ev.new_tuple.infomask & 0x0004:
                    kinds["has_external"] += 1
            elif isinstance(ev, CommitEvent):
                m = _SUBXACTS.search(body)
                want_subs = tuple(int(x) for x in m.group(1).split()) if m else ()
                assert ev.subxids == want_subs, line
                kinds["commit_with_subxacts" if ev.subxids else "commit"] += 1
                if ev.prepared:
                    # xact_desc_commit starts with "<twophase xid>: " for COMMIT PREPARED
                    assert ev.twophase_xid is not None and body.startswith(f"{ev.xid}: "), line
                    kinds["commit_prepared_event"] += 1
            elif isinstance(ev, RunningXactsEvent):
                m = _RUNNING.search(body)
                assert m is not None, line
                assert (ev.next_xid, ev.latest_completed_xid, ev.oldest_running_xid) == tuple(
                    int(g) for g in m.groups()
                ), line
            elif isinstance(ev, CheckpointEvent):
                m = _CHECKPOINT_REDO.search(body)
                x = _CHECKPOINT_XID.search(body)
                o = _OLDEST_XID.search(body)
                assert m is not None and x is not None and o is not None, line
                hi, lo = m.group(1).split("/")
                assert ev.redo == (int(hi, 16) << 32 | int(lo, 16)), line
                assert ev.timeline == int(m.group(2)), line
                assert ev.next_xid == int(x.group(2)), line
                assert ev.oldest_xid == int(o.group(1)), line
                kinds["checkpoint_event"] += 1
            elif isinstance(ev, NewCidEvent):
                m = _NEW_CID.search(body)
                assert m is not None, line
                loc = ev.locator
                assert (loc.spc_oid, loc.db_oid, loc.rel_number, ev.block, ev.offset) == tuple(
                    int(g) for g in m.groups()
                ), line
            elif isinstance(ev, SmgrCreateEvent):
                assert _smgr_path(ev) in body, line
            elif isinstance(ev, MessageEvent):
                assert f'prefix "{ev.prefix}"' in body, line
                assert body.startswith("transactional" if ev.transactional else "non-transactional")
                kinds["message_tx" if ev.transactional else "message_nontx"] += 1
            elif isinstance(ev, TruncateEvent):
                m = _RELIDS.search(body)
                assert m is not None, line
                assert ev.relids == tuple(int(x) for x in re.findall(r"\d+", m.group(1))), line
            elif isinstance(ev, PrepareEvent):
                assert ev.gid.startswith("pgcdc_gid_"), line
                kinds["prepare_event"] += 1
        if ident.startswith("MULTI_INSERT") and rec.rmid == 9:
            m = _NTUPLES.search(body)
            assert m is not None, line
            n = int(m.group(1) or m.group(2))
            flags = int(re.search(r"flags:? 0x([0-9A-F]{2})", body).group(1), 16)  # type: ignore[union-attr]
            assert len(events) == (n if flags & 0x08 else 0), line
    # the workload produced every kind of record the test claims to cover
    for needed in [
        "change:INSERT",
        "change:UPDATE",
        "change:DELETE",
        "change:SPEC_INSERT",
        "change:SPEC_CONFIRM",
        "old_key",
        "old_tuple",
        "commit_with_subxacts",
        "ABORT",
        "PREPARE",
        "COMMIT_PREPARED",
        "ABORT_PREPARED",
        "TRUNCATE",
        "CREATE",
        "MULTI_INSERT",
        "NEW_CID",
        "HOT_UPDATE",
        "RUNNING_XACTS",
        "CHECKPOINT_ONLINE",
        "checkpoint_event",
        "message_tx",
        "message_nontx",
        "prepare_event",
        "commit_prepared_event",
        "has_external",
    ]:
        assert kinds[needed] > 0, (needed, kinds)
