"""Benchmark: the Python XLog reader, the native one and pg_waldump on the same WAL.

Run: `python tests/perf/bench_native_reader.py [--dsn DSN] [--bin DIR] [--rows N]
[--wal-dir DIR] [--repeat R]`.

It connects to a running PostgreSQL (by default the shared PG15 at 127.0.0.1:55415 as
postgres; nothing there is stopped or reconfigured), creates a fresh database of its own
and a temporary physical slot (so the WAL cannot be recycled while it is copied), inserts
N rows (default 500,000) of five columns (int, text, int8, float8, timestamptz) in one
transaction, as tests/perf/bench_xlogreader.py does, and copies the segment files of the
range into DIR (a temporary directory unless `--wal-dir` names one; with a DIR that has a
`range.json` from an earlier run, it measures that WAL again without inserting). Then it
times, on exactly those bytes (fed in 16 MB chunks, and 128 KB chunks like a streaming
message for the native reader):

- `XLogReader.records()` (service.wal.reader: pages, headers, CRC32C, DecodeXLogRecord
  into XLogRecord objects), and `walk_headers()`;
- `NativeXLogReader.records()` (service.wal.native, the Rust core), and `walk_headers()`;
- reader plus decode as a decoding session runs them (`service.impl.predecoding` with
  runs: table-change heap records decoded in the walk, plain inserts gathered into
  InsertRuns, records of rmgrs without rm_decode bodiless, every other record decoded
  by the Python decoder into its events), counted in the records they stand for;
- `pg_waldump -s -e > /dev/null` (which decodes and prints every record).

Each figure is records/s, best of `--repeat` runs. Both readers' record lists are
checked equal before any timing is trusted.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg2

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from connectors.postgres.archive import iter_wal_chunks, list_segments
from service.decode.dispatch import decoder_for
from service.decode.events import InsertRun, PredecodedRecord
from service.impl import XLogReaderFactory, predecoding
from service.lsn import format_lsn, parse_lsn
from service.wal.native import NativeXLogReader
from service.wal.reader import XLogReader

SEG = 16 << 20


def _one(cur: Any, sql: str) -> str:
    cur.execute(sql)
    row = cur.fetchone()
    assert row is not None
    return str(row[0])


def make_wal(dsn: str, rows: int, into: Path) -> tuple[int, int]:
    """Insert `rows` rows in a fresh database; copy the range's segments into `into`."""
    db = f"bench_native_{uuid.uuid4().hex[:8]}"
    admin = psycopg2.connect(dsn)
    admin.autocommit = True
    acur = admin.cursor()
    acur.execute(f"CREATE DATABASE {db}")
    acur.execute("SELECT pg_create_physical_replication_slot(%s, true, true)", (f"bench_{db}",))
    pgdata = _one(acur, "SHOW data_directory")
    conn = psycopg2.connect(f"{dsn} dbname={db}")
    conn.autocommit = True
    cur = conn.cursor()
    cur.execute("CREATE TABLE t (id int, name text, v int8, f float8, ts timestamptz)")
    start = parse_lsn(_one(cur, "SELECT pg_current_wal_insert_lsn()"))
    t = time.perf_counter()
    cur.execute(
        "INSERT INTO t SELECT g, 'name ' || g, g * 7, g / 3.0, now() FROM generate_series(1, %s) g",
        (rows,),
    )
    took = time.perf_counter() - t
    end = parse_lsn(_one(cur, "SELECT pg_current_wal_flush_lsn()"))
    conn.close()
    segs = list_segments(pgdata + "/pg_wal")
    into.mkdir(parents=True, exist_ok=True)
    for segno in range(start // SEG, end // SEG + 1):
        shutil.copy(segs[segno][1], into / segs[segno][1].name)
    (into / "range.json").write_text(json.dumps({"start": start, "end": end}))
    admin.close()  # drops the temporary slot
    print(f"PostgreSQL wrote {rows} rows in {took:.2f}s, {(end - start) / 1e6:.1f} MB of WAL")
    return start, end


def best(fn: Callable[[], int], repeat: int) -> tuple[float, int]:
    """Best wall time of `repeat` calls of fn() -> count."""
    took = float("inf")
    n = 0
    for _ in range(repeat):
        t = time.perf_counter()
        n = fn()
        took = min(took, time.perf_counter() - t)
    return took, n


def main() -> None:
    """Run the benchmark and print the figures."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--dsn", default="host=127.0.0.1 port=55415 user=postgres dbname=postgres")
    ap.add_argument("--bin", default="/usr/lib/postgresql/15/bin")
    ap.add_argument("--rows", type=int, default=500_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--wal-dir", default="", help="keep/reuse the WAL in this directory")
    a = ap.parse_args()
    tmp = None
    waldir = Path(a.wal_dir) if a.wal_dir else Path(tmp := tempfile.mkdtemp(prefix="bench_nat_"))
    if (waldir / "range.json").exists():
        rng = json.loads((waldir / "range.json").read_text())
        start, end = rng["start"], rng["end"]
        print(f"WAL {format_lsn(start)}..{format_lsn(end)} from {waldir}")
    else:
        start, end = make_wal(a.dsn, a.rows, waldir)

    def load(chunk: int) -> list[tuple[int, bytes]]:
        out = []
        for lsn, data in iter_wal_chunks(waldir, start, chunk_size=chunk):
            out.append((lsn, data))
            if lsn + len(data) >= end:
                break
        return out

    big, small = load(16 << 20), load(128 << 10)

    def records(cls: XLogReaderFactory, chunks: list[tuple[int, bytes]]) -> Callable[[], int]:
        def run() -> int:
            r = cls(start)
            n = 0
            for lsn, data in chunks:
                r.feed(data, lsn)
                for rec in r.records():
                    if rec.lsn >= end:
                        return n
                    n += 1
            return n

        return run

    def headers(cls: XLogReaderFactory) -> Callable[[], int]:
        def run() -> int:
            r = cls(start)
            n = 0
            for lsn, data in big:
                r.feed(data, lsn)
                for h in r.walk_headers():
                    if h[0] >= end:
                        return n
                    n += 1
            return n

        return run

    probe = NativeXLogReader(start)
    probe.feed(big[0][1], big[0][0])
    next(iter(probe.records()), None)
    version = probe.version
    assert version is not None, "no page header in the first chunk"

    def decoded(chunks: list[tuple[int, bytes]], version: int) -> Callable[[], int]:
        """Reader + decode as `service.app.session.Session` arms and drives them."""
        decoder = decoder_for(version)

        def run() -> int:
            r = NativeXLogReader(start)
            items = predecoding(r, decoder.without_decode, runs=True)
            assert items is not None
            decode = decoder.decode
            n = 0
            for lsn, data in chunks:
                r.feed(data, lsn)
                for item in items():
                    if item.lsn >= end:
                        return n
                    if type(item) is InsertRun:
                        n += item.records
                    else:
                        if type(item) is not PredecodedRecord:
                            decode(item)  # type: ignore[arg-type]
                        n += 1
            return n

        return run

    def all_records(cls: XLogReaderFactory) -> list[object]:
        r = cls(start)
        out: list[object] = []
        for lsn, data in big:
            r.feed(data, lsn)
            out.extend(rec for rec in r.records() if rec.lsn < end)
        return out

    assert all_records(XLogReader) == all_records(NativeXLogReader), "readers disagree"
    results: dict[str, tuple[float, int]] = {}
    for name, fn in (
        ("python records()", records(XLogReader, big)),
        ("native records()", records(NativeXLogReader, big)),
        ("native records(), 128 KB", records(NativeXLogReader, small)),
        ("python walk_headers()", headers(XLogReader)),
        ("native walk_headers()", headers(NativeXLogReader)),
        ("native reader + decode", decoded(big, version)),
        ("native reader + decode, 128 KB", decoded(small, version)),
    ):
        results[name] = best(fn, a.repeat)
    segs = list_segments(str(waldir))
    cmd = [
        a.bin + "/pg_waldump",
        "-p",
        str(waldir),
        "-s",
        format_lsn(start),
        "-e",
        format_lsn(end),
        segs[start // SEG][1].name,
        segs[end // SEG][1].name,
    ]

    def waldump() -> int:
        with open("/dev/null", "w") as devnull:
            subprocess.run(cmd, stdout=devnull, stderr=subprocess.DEVNULL, check=False)
        return -1

    dump_took, _ = best(waldump, a.repeat)
    stats = subprocess.run([*cmd, "--stats"], capture_output=True, text=True, check=False)
    total = next(
        (int(line.split()[1]) for line in stats.stdout.splitlines() if line.startswith("Total")),
        results["python records()"][1],
    )
    n = results["python records()"][1]
    print(f"records in range: {n:,} (pg_waldump --stats: {total:,})")
    for name, (took, count) in results.items():
        print(f"  {name:30s} {count / took:>12,.0f} records/s  ({took:.3f}s, {count:,} records)")
    name = "pg_waldump > /dev/null"
    print(
        f"  {name:30s} {total / dump_took:>12,.0f} records/s  ({dump_took:.3f}s, {total:,} records)"
    )
    py, native = results["python records()"], results["native records()"]
    print(f"native / python records(): {(native[1] / native[0]) / (py[1] / py[0]):.1f}x")
    if tmp is not None:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
