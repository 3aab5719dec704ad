"""Benchmark: full decode of a 1,000,000-row, 5-column INSERT's WAL, beside pg_waldump.

Run: `.venv/bin/python tests/perf/bench_decode.py [--server pg15|pg18] [--rows N]`.

It creates a fresh database and a physical slot (so the WAL cannot be recycled under
the benchmark), inserts N rows of (int, text, int8, float8, timestamptz) in one
transaction, then times, on the same WAL range and in the same run:

- the XLog reader alone (`records()`: pages, headers, CRC32C, block decoding);
- the reader plus `Decoder.decode` of every record into events;
- `pg_waldump` over the same range (its stdout read and counted, not printed).

It prints records/s and heap rows/s for each, and cleans up its database and slot.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psycopg2

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from service.app.waldump import lsn_text
from service.decode.dispatch import decoder_for
from service.decode.events import HeapChange
from service.wal.reader import XLogReader

SEGMENT = 16 * 1024 * 1024
SERVICES = Path(__file__).resolve().parents[2] / "deploy" / "local" / "services.py"


def _lsn(text: str) -> int:
    hi, lo = text.split("/")
    return (int(hi, 16) << 32) | int(lo, 16)


def _segments(pg_wal: Path, start: int, end: int) -> list[tuple[int, bytes]]:
    out = []
    for seg in range(start // SEGMENT, (end - 1) // SEGMENT + 1):
        name = f"{seg >> 8 & 0xFFFFFFFF:08X}{seg & 0xFF:08X}"
        [path] = sorted(pg_wal.glob(f"????????{name}"))[-1:]
        data = path.read_bytes()
        if seg == start // SEGMENT:
            out.append((start, data[start - seg * SEGMENT :]))
        else:
            out.append((seg * SEGMENT, data))
    return out


def _walk(
    segs: list[tuple[int, bytes]], start: int, end: int, version: int | None
) -> tuple[int, int]:
    """(records, heap changes) read from `segs`; decodes when `version` is given."""
    reader = XLogReader(start, segment_size=SEGMENT)
    decode = decoder_for(version).decode if version is not None else None
    n = changes = 0
    for at, data in segs:
        reader.feed(data, at)
        for rec in reader.records():
            if rec.lsn >= end:
                return n, changes
            n += 1
            if decode is not None:
                for ev in decode(rec):
                    if type(ev) is HeapChange:
                        changes += 1
    return n, changes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default="pg15", choices=["pg15", "pg18"])
    parser.add_argument("--rows", type=int, default=1_000_000)
    args = parser.parse_args()
    env = subprocess.run(
        [sys.executable, str(SERVICES), "env", args.server],
        capture_output=True,
        text=True,
        check=True,
    )
    info = json.loads(env.stdout)[args.server]
    admin = psycopg2.connect(info["dsn"])
    admin.autocommit = True
    cur = admin.cursor()
    tag = uuid.uuid4().hex[:8]
    db, slot = f"pgcdc_bench_{tag}", f"pgcdc_bench_{tag}"
    cur.execute(f"CREATE DATABASE {db}")
    cur.execute("SELECT pg_create_physical_replication_slot(%s, true)", (slot,))
    try:
        conn = psycopg2.connect(info["dsn"].replace("dbname=postgres", f"dbname={db}"))
        conn.autocommit = True
        c = conn.cursor()
        c.execute("CREATE TABLE bench (id int, a text, b int8, c float8, d timestamptz)")
        c.execute("SELECT pg_current_wal_insert_lsn()")
        start = _lsn(c.fetchone()[0])  # type: ignore[index]
        t0 = time.perf_counter()
        c.execute(
            "INSERT INTO bench SELECT g, 'row number ' || g, g * 7, g / 3.0, "
            "'2024-01-01'::timestamptz + g * interval '1 second' "
            "FROM generate_series(1, %s) g",
            (args.rows,),
        )
        insert_s = time.perf_counter() - t0
        c.execute("SELECT pg_current_wal_insert_lsn()")
        end = _lsn(c.fetchone()[0])  # type: ignore[index]
        conn.close()
        segs = _segments(Path(info["pgdata"]) / "pg_wal", start, end)
        mb = (end - start) / 1e6
        print(
            f"server {args.server}, {args.rows} rows inserted in {insert_s:.2f}s "
            f"({args.rows / insert_s:,.0f} rows/s); WAL {lsn_text(start)}..{lsn_text(end)} "
            f"= {mb:.1f} MB"
        )

        t0 = time.perf_counter()
        n, _ = _walk(segs, start, end, None)
        read_s = time.perf_counter() - t0
        print(
            f"reader (records, CRC, blocks): {n} records in {read_s:.2f}s = {n / read_s:,.0f} rec/s"
        )

        t0 = time.perf_counter()
        n2, changes = _walk(segs, start, end, int(info["version"]))
        full_s = time.perf_counter() - t0
        assert n2 == n and changes >= args.rows, (n2, n, changes)
        print(
            f"reader + decode into events: {n2} records, {changes} heap changes in {full_s:.2f}s "
            f"= {n2 / full_s:,.0f} rec/s, {changes / full_s:,.0f} rows/s "
            f"(decode alone ~{n2 / max(full_s - read_s, 1e-9):,.0f} rec/s)"
        )

        t0 = time.perf_counter()
        proc = subprocess.run(
            [
                info["bin"] + "/pg_waldump",
                "-p",
                info["pgdata"] + "/pg_wal",
                "-s",
                lsn_text(start),
                "-e",
                lsn_text(end),
            ],
            capture_output=True,
            check=False,
        )
        dump_s = time.perf_counter() - t0
        dn = proc.stdout.count(b"\nrmgr: ") + proc.stdout.startswith(b"rmgr: ")
        print(f"pg_waldump: {dn} records in {dump_s:.2f}s = {dn / dump_s:,.0f} rec/s")
    finally:
        cur.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
        cur.execute(f"DROP DATABASE IF EXISTS {db}")
        admin.close()


if __name__ == "__main__":
    main()
