"""Helpers for tests on WAL from the real servers: a varied workload, pg_waldump parsing.

The workload runs in its own fresh database and returns the LSN range it wrote; the
parser turns `pg_waldump -b` text into comparable tuples.
"""

from __future__ import annotations

import re
import subprocess
import uuid
from dataclasses import dataclass
from typing import Any

import psycopg2

from connectors.postgres.archive import list_segments
from service.wal.format import FORMATS
from service.wal.record import XLogRecord

_LINE = re.compile(
    r"^rmgr: (\S+)\s+len \(rec/tot\):\s*(\d+)/\s*(\d+), tx:\s*(\d+), "
    r"lsn: ([0-9A-F]+)/([0-9A-F]+), prev ([0-9A-F]+)/([0-9A-F]+), desc:"
)
_BLK = re.compile(
    r"^\s+blkref #(\d+): rel (\d+)/(\d+)/(\d+) fork (\w+) blk (\d+)"
    r"(?: \(FPW( for WAL verification)?\); hole: offset: (\d+), length: (\d+)"
    r"(?:, compression saved: \d+, method: (\w+))?)?"
)
FORKS = {0: "main", 1: "fsm", 2: "vm", 3: "init"}

# (block_id, spc, db, rel, fork name, blk, fpw, apply, hole_off, hole_len, method)
BlockTuple = tuple[int, int, int, int, str, int, bool, bool, int, int, str | None]
# (lsn, rmgr, rec_len, tot_len, xid, prev, blocks)
RecordTuple = tuple[int, str, int, int, int, int, tuple[BlockTuple, ...]]


def lsn_str(lsn: int) -> str:
    """LSN as pg_waldump takes it."""
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


def segment_names(info: dict[str, Any], start: int, end: int) -> list[str]:
    """pg_waldump's STARTSEG and ENDSEG arguments for a range.

    Without them pg_waldump takes the segment size from whichever file readdir() lists
    first, maybe one just created and still zero; with only STARTSEG it refuses an end
    LSN outside that segment.
    """
    segs = list_segments(info["pgdata"] + "/pg_wal")
    return [segs[start // (16 << 20)][1].name, segs[end // (16 << 20)][1].name]


def waldump(info: dict[str, Any], start: int, end: int, *extra: str) -> list[RecordTuple]:
    """Run the server's own pg_waldump -b over pg_wal and parse every record."""
    proc = subprocess.run(
        [
            info["bin"] + "/pg_waldump",
            "-b",
            "-p",
            info["pgdata"] + "/pg_wal",
            "-s",
            lsn_str(start),
            "-e",
            lsn_str(end),
            *extra,
            *segment_names(info, start, end),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    out: list[RecordTuple] = []
    cur: list[Any] | None = None
    blocks: list[BlockTuple] = []
    for line in proc.stdout.splitlines():
        m = _LINE.match(line)
        if m:
            if cur is not None:
                out.append((*cur, tuple(blocks)))  # type: ignore[arg-type]
            g = m.groups()
            cur = [
                (int(g[4], 16) << 32) | int(g[5], 16),
                g[0],
                int(g[1]),
                int(g[2]),
                int(g[3]),
                (int(g[6], 16) << 32) | int(g[7], 16),
            ]
            blocks = []
            continue
        b = _BLK.match(line)
        if b and cur is not None:
            fpw = b.group(8) is not None
            blocks.append(
                (
                    int(b.group(1)),
                    int(b.group(2)),
                    int(b.group(3)),
                    int(b.group(4)),
                    b.group(5),
                    int(b.group(6)),
                    fpw,
                    fpw and b.group(7) is None,
                    int(b.group(8)) if fpw else 0,
                    int(b.group(9)) if fpw else 0,
                    b.group(10),
                )
            )
    if cur is not None:
        out.append((*cur, tuple(blocks)))  # type: ignore[arg-type]
    assert out, proc.stderr
    return out


def as_tuple(rec: XLogRecord, version: int) -> RecordTuple:
    """Our record in the shape `waldump` parses (rec_len excludes stored image bytes)."""
    fmt = next(f for f in FORMATS.values() if f.version == version)
    blocks: list[BlockTuple] = []
    for b in rec.blocks:
        method: str | None = None
        if b.bimg_info & fmt.bkpimage_compress_pglz:
            method = "pglz"
        elif b.bimg_info & fmt.bkpimage_compress_lz4:
            method = "lz4"
        blocks.append(
            (
                b.block_id,
                b.locator.spc_oid,
                b.locator.db_oid,
                b.locator.rel_number,
                FORKS[b.fork],
                b.block,
                b.image is not None,
                b.image is not None and b.apply_image,
                b.hole_offset,
                b.hole_length,
                method,
            )
        )
    img = sum(b.image_len for b in rec.blocks)
    return (
        rec.lsn,
        fmt.rmgr_name(rec.rmid),
        rec.total_len - img,
        rec.total_len,
        rec.xid,
        rec.prev,
        tuple(blocks),
    )


@dataclass
class Workload:
    """What `run_workload` wrote: the LSN range and the database it used."""

    start: int
    end: int
    dbname: str


def _lsn(cur: Any, sql: str) -> int:
    cur.execute(sql)
    hi, lo = cur.fetchone()[0].split("/")
    return (int(hi, 16) << 32) | int(lo, 16)


def fresh_db(info: dict[str, Any], prefix: str) -> str:
    """Create a uniquely named database and return its name."""
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    conn = psycopg2.connect(info["dsn"])
    conn.autocommit = True
    conn.cursor().execute(f"CREATE DATABASE {name}")
    conn.close()
    return name


def run_workload(info: dict[str, Any], dbname: str, *, compression: bool = True) -> Workload:
    """Inserts, HOT and non-HOT updates, deletes, COPY, truncate, savepoints, 2PC,
    TOAST, logical messages, DDL, checkpoints and compressed full-page images."""
    conn = psycopg2.connect(info["dsn"].replace("dbname=postgres", f"dbname={dbname}"))
    conn.autocommit = True
    cur = conn.cursor()
    start = _lsn(cur, "SELECT pg_current_wal_insert_lsn()")
    stmts = [
        "CREATE TABLE t (id int PRIMARY KEY, a text, b int, c float8, d timestamptz)",
        "ALTER TABLE t SET (fillfactor = 70)",
        "INSERT INTO t SELECT g, 'row ' || g, g % 7, g / 3.0, now() "
        "FROM generate_series(1, 2000) g",
        "UPDATE t SET b = b + 1 WHERE id % 5 = 0",  # HOT (b not indexed)
        "UPDATE t SET id = id + 100000 WHERE id % 97 = 0",  # non-HOT, key change
        "DELETE FROM t WHERE id % 11 = 0",
        "CREATE TABLE big (id int, v text)",
        "INSERT INTO big SELECT g, repeat(md5(g::text), 400) FROM generate_series(1, 20) g",
        "INSERT INTO big SELECT g, string_agg(md5(g::text || x::text), '') "
        "FROM generate_series(1, 5) g, generate_series(1, 300) x GROUP BY g",
        "SELECT pg_logical_emit_message(true, 'pgcdc.test', 'transactional')",
        "SELECT pg_logical_emit_message(false, 'pgcdc.test', repeat('nt', 5000))",
        "BEGIN",
        "INSERT INTO t VALUES (900001, 'sp1', 1, 1, now())",
        "SAVEPOINT s1",
        "INSERT INTO t VALUES (900002, 'sp2', 1, 1, now())",
        "ROLLBACK TO SAVEPOINT s1",
        "SAVEPOINT s2",
        "INSERT INTO t VALUES (900003, 'sp3', 1, 1, now())",
        "RELEASE SAVEPOINT s2",
        "COMMIT",
        "BEGIN",
        "INSERT INTO t VALUES (900010, '2pc', 1, 1, now())",
        f"PREPARE TRANSACTION 'pgcdc_gid_{dbname}'",
        f"COMMIT PREPARED 'pgcdc_gid_{dbname}'",
        "CREATE TABLE cp (x int, y text)",
        "COPY cp FROM PROGRAM 'seq 1 3000 | sed \"s/$/\\tcopied/\"'",
        "TRUNCATE cp",
        "INSERT INTO cp VALUES (1, 'after truncate')",
        "ALTER TABLE t ADD COLUMN e int DEFAULT 5",
        "ALTER TABLE cp ALTER COLUMN x TYPE bigint",
        "CHECKPOINT",
    ]
    for sql in stmts:
        cur.execute(sql)
    if compression:
        cur.execute("SELECT enumvals FROM pg_settings WHERE name = 'wal_compression'")
        enumvals = cur.fetchone()[0] or []
        methods = [m for m in ("pglz", "lz4") if m in enumvals]
        for m in methods:
            cur.execute(f"SET wal_compression = {m}")
            cur.execute("CHECKPOINT")
            cur.execute("UPDATE t SET c = c + 1 WHERE id % 50 = 1")
        cur.execute("RESET wal_compression")
    cur.execute("DELETE FROM t WHERE id < 100")
    end = _lsn(cur, "SELECT pg_current_wal_flush_lsn()")
    # A commit after `end` flushes every record before it, other sessions' included:
    # readers of the range parse the first record at or after `end`, which must not be
    # one whose continuation page the server has not written yet (zeros on disk).
    cur.execute("SELECT pg_logical_emit_message(true, 'pgcdc.test.flush', 'end')")
    conn.close()
    return Workload(start, end, dbname)
