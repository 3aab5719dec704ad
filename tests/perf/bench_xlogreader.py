"""Benchmark: the XLog reader's header walk and full record decode, beside pg_waldump.

Run: `.venv/bin/python tests/perf/bench_xlogreader.py [--server pg15|pg18] [--rows N]
[--wal-dir DIR] [--repeat R]`.

It creates a fresh database and a temporary physical slot (so the WAL cannot be
recycled under the benchmark), inserts N rows (default 1,000,000) of five columns
(int, text, int8, float8, timestamptz) in one transaction, loads the WAL range from
pg_wal into memory, and times in the same run:

- `walk_headers()` with CRC32C (pages, record headers, CRC of every record);
- `walk_headers()` with `verify_crc=False` (the page and header walk alone);
- `records()` (everything above plus DecodeXLogRecord into XLogRecord objects);
- `records()` plus `Decoder.decode` of every record into events (decode.c);
- `pg_waldump -s -e > /dev/null` and `pg_waldump --stats` on the same range.

Each figure is records/s (best of `--repeat` runs for ours and for pg_waldump).

With `--wal-dir DIR` the WAL is kept: the first run copies the segment files of the
range into DIR (with `range.json` holding start and end); later runs with the same DIR
skip the insert and measure exactly the same WAL, with pg_waldump reading DIR. That is
how before/after figures of a reader change are compared.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg2

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from connectors.postgres.archive import iter_wal_chunks, list_segments
from service.decode.dispatch import decoder_for
from service.wal.reader import XLogReader
from tests.fixtures.services import ensure_service


def lsn_int(text: str) -> int:
    """Parse X/X."""
    hi, lo = text.split("/")
    return (int(hi, 16) << 32) | int(lo, 16)


def lsn_str(lsn: int) -> str:
    """Format X/X."""
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


def _one(cur: Any) -> str:
    """The single value of a one-row result."""
    row = cur.fetchone()
    assert row is not None
    return str(row[0])


def make_wal(info: dict[str, object], rows: int) -> tuple[int, int, Any]:
    """Insert `rows` rows in a fresh database; return (start, end, open admin conn)."""
    db = f"bench_xlr_{uuid.uuid4().hex[:8]}"
    admin = psycopg2.connect(str(info["dsn"]))
    admin.autocommit = True
    acur = admin.cursor()
    acur.execute(f"CREATE DATABASE {db}")
    acur.execute("SELECT pg_create_physical_replication_slot(%s, true, true)", (f"bench_{db}",))
    conn = psycopg2.connect(str(info["dsn"]).replace("dbname=postgres", f"dbname={db}"))
    conn.autocommit = True
    cur = conn.cursor()
    cur.execute("CREATE TABLE t (id int, name text, v int8, f float8, ts timestamptz)")
    cur.execute("SELECT pg_current_wal_insert_lsn()")
    start = lsn_int(_one(cur))
    t = time.perf_counter()
    cur.execute(
        "INSERT INTO t SELECT g, 'name ' || g, g * 7, g / 3.0, now() FROM generate_series(1, %s) g",
        (rows,),
    )
    took = time.perf_counter() - t
    cur.execute("SELECT pg_current_wal_flush_lsn()")
    end = lsn_int(_one(cur))
    conn.close()
    print(
        f"PostgreSQL wrote {rows} rows in {took:.2f}s ({rows / took:,.0f} rows/s), "
        f"{(end - start) / 1e6:.1f} MB of WAL"
    )
    return start, end, admin


def time_it(fn: object, repeat: int) -> tuple[float, int]:
    """Best wall time of `repeat` calls of fn() -> count."""
    best = float("inf")
    n = 0
    for _ in range(repeat):
        t = time.perf_counter()
        n = fn()  # type: ignore[operator]
        best = min(best, time.perf_counter() - t)
    return best, n


def main() -> None:
    """Run the benchmark and print the figures."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", default="pg15")
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--wal-dir", default="", help="keep/reuse the WAL in this directory")
    a = ap.parse_args()
    info = ensure_service(a.server)
    admin: Any = None
    if a.wal_dir and (Path(a.wal_dir) / "range.json").exists():
        waldir = a.wal_dir
        rng = json.loads((Path(waldir) / "range.json").read_text())
        start, end = rng["start"], rng["end"]
        print(f"WAL {lsn_str(start)}..{lsn_str(end)} from {waldir}, {(end - start) / 1e6:.1f} MB")
    else:
        start, end, admin = make_wal(info, a.rows)
        waldir = str(info["pgdata"]) + "/pg_wal"
        if a.wal_dir:
            keep = Path(a.wal_dir)
            keep.mkdir(parents=True, exist_ok=True)
            segs = list_segments(waldir)
            for segno in range(start >> 24, (end >> 24) + 1):
                shutil.copy(segs[segno][1], keep / segs[segno][1].name)
            (keep / "range.json").write_text(json.dumps({"start": start, "end": end}))
            waldir = str(keep)
    chunks = []
    for lsn, data in iter_wal_chunks(waldir, start, chunk_size=16 << 20):
        chunks.append((lsn, data))
        if lsn + len(data) >= end:
            break

    def walk(crc: bool) -> int:
        r = XLogReader(start, verify_crc=crc)
        n = 0
        for lsn, data in chunks:
            r.feed(data, lsn)
            for h in r.walk_headers():
                if h[0] >= end:
                    return n
                n += 1
        return n

    def full() -> int:
        r = XLogReader(start)
        n = 0
        for lsn, data in chunks:
            r.feed(data, lsn)
            for rec in r.records():
                if rec.lsn >= end:
                    return n
                n += 1
        return n

    def events() -> int:
        r = XLogReader(start)
        decode = decoder_for(int(info["version"])).decode
        n = 0
        for lsn, data in chunks:
            r.feed(data, lsn)
            for rec in r.records():
                if rec.lsn >= end:
                    return n
                n += 1
                decode(rec)
        return n

    results = {}
    for name, fn in (
        ("header walk + CRC32C", lambda: walk(True)),
        ("header walk, no CRC", lambda: walk(False)),
        ("full record decode", full),
        ("decode into events", events),
    ):
        took, n = time_it(fn, a.repeat)
        results[name] = (n, took)
    args = [
        str(info["bin"]) + "/pg_waldump",
        "-p",
        waldir,
        "-s",
        lsn_str(start),
        "-e",
        lsn_str(end),
    ]
    segs = list_segments(waldir)
    # Name the start and end segments: pg_waldump otherwise takes the segment size from
    # whichever file readdir() returns first (maybe a fresh, all-zero one).
    first_seg = segs[start >> 24][1].name
    last_seg = segs[end >> 24][1].name
    dump_took = float("inf")
    for _ in range(a.repeat):
        t = time.perf_counter()
        with open("/dev/null", "w") as devnull:
            proc = subprocess.run(
                [*args, first_seg, last_seg],
                stdout=devnull,
                stderr=subprocess.PIPE,
                text=True,
                check=False,
            )
        dump_took = min(dump_took, time.perf_counter() - t)
    if "error" in proc.stderr and "invalid record length" not in proc.stderr:
        raise SystemExit(f"pg_waldump failed: {proc.stderr}")
    t = time.perf_counter()
    stats = subprocess.run(
        [*args, "--stats", first_seg, last_seg], capture_output=True, text=True, check=False
    )
    stats_took = time.perf_counter() - t
    total = next(
        (int(line.split()[1]) for line in stats.stdout.splitlines() if line.startswith("Total")),
        results["full record decode"][0],
    )
    print(f"records in range: {results['full record decode'][0]:,} (pg_waldump --stats: {total:,})")
    for name, (n, took) in results.items():
        print(f"  {name:24s} {n / took:>12,.0f} records/s  ({took:.2f}s)")
    print(
        f"  {'pg_waldump > /dev/null':24s} {total / dump_took:>12,.0f} records/s  "
        f"({dump_took:.2f}s)"
    )
    print(
        f"  {'pg_waldump --stats':24s} {total / stats_took:>12,.0f} records/s  ({stats_took:.2f}s)"
    )
    if admin is not None:
        admin.close()  # drops the temporary slot; the database stays small and unique


if __name__ == "__main__":
    main()
