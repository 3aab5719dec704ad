"""Benchmark: full decode of a 1,000,000-row, 5-column INSERT's WAL, beside pg_waldump.

Run: `.venv/bin/python tests/perf/bench_decode.py [--server pg15|pg18] [--rows N]`.

It creates a fresh database and a physical slot (so the WAL cannot be recycled under
the benchmark), inserts N rows of (int, text, int8, float8, timestamptz) in one
transaction, then times, on the same WAL range and in the same run:

- the XLog reader alone (`records()`: pages, headers, CRC32C, block decoding);
- the reader plus `Decoder.decode` of every record into events;
each for the Python reference and, when built, the native reader (whose decode run
is armed, as a session's is, to decode the heap records in its walk);
- `pg_waldump` over the same range (its stdout read and counted, not printed).

It prints records/s and heap rows/s for each, and cleans up its database and slot.

With `--avro`, it measures instead WAL to Avro bytes, decode only (no Kafka): a pgcdc
`Session` (reader, decoder, reorder buffer, row decoder, the avro plugin) over the WAL
of N rows in one transaction and N rows in `--txn-rows`-row transactions, into
a writer that hashes every record (topic, key, value), once per `--impl` (PGCDC_IMPL:
the Python reference, fastavro, or the native row encoder), with the plugin's clock
frozen so that the runs must write identical bytes: the SHA-256 of all records is
printed and compared. Figures are process CPU time and rows/s on it (the machine is
shared; wall time is printed too). `--profile` adds a cProfile of each native run.

    .venv/bin/python tests/perf/bench_decode.py --avro [--server pg15|pg18] [--rows N]
        [--txn-rows 10000] [--impl python,native] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import json
import os
import pstats
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg2

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from connectors.avro import plugin as avro_plugin
from connectors.avro.plugin import AvroPlugin
from connectors.postgres.archive import detect_segment_size, iter_wal_chunks
from connectors.postgres.server import force_running_xacts
from connectors.postgres.setup import setup, teardown
from service.app.session import Session, SessionConfig
from service.app.waldump import lsn_text
from service.config import Settings
from service.decode.dispatch import decoder_for
from service.decode.events import HeapChange, PredecodedRecord
from service.impl import native_available, predecoding, selected
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
    segs: list[tuple[int, bytes]], start: int, end: int, version: int | None, impl: str
) -> tuple[int, int]:
    """(records, heap changes) read from `segs` by the `impl` reader (python, native);
    decodes when `version` is given, the native reader then armed to decode the heap
    records in its walk (`service.impl.predecoding`, as a session does)."""
    if impl == "native":
        from service.wal.native import NativeXLogReader  # noqa: PLC0415 (the extension)

        reader: Any = NativeXLogReader(start, segment_size=SEGMENT)
    else:
        reader = XLogReader(start, segment_size=SEGMENT)
    decoder = decoder_for(version) if version is not None else None
    decode = decoder.decode if decoder is not None else None
    records = reader.records
    if decoder is not None and impl == "native":
        records = predecoding(reader, decoder.without_decode)
    n = changes = 0
    for at, data in segs:
        reader.feed(data, at)
        for rec in records():
            if rec.lsn >= end:
                return n, changes
            n += 1
            if decode is not None:
                events = rec.events if type(rec) is PredecodedRecord else decode(rec)
                for ev in events:
                    if type(ev) is HeapChange:
                        changes += 1
    return n, changes


_MONOTONIC, _SLEEP = time.monotonic, time.sleep


class _FrozenTime:
    """The avro plugin's `time` with a fixed wall clock (identical bytes across runs)."""

    @staticmethod
    def time() -> float:
        return 1_765_432_100.25

    @staticmethod
    def time_ns() -> int:
        return 1_765_432_100_250_000_000

    monotonic = staticmethod(_MONOTONIC)
    sleep = staticmethod(_SLEEP)


def _services_env() -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, str(SERVICES), "env"], capture_output=True, text=True, check=True
    )
    env: dict[str, Any] = json.loads(out.stdout)
    return env


def _avro_once(
    info: dict[str, Any],
    dsn: str,
    slot: str,
    span: tuple[int, int, int],
    settings: Settings,
    profile: bool,
) -> tuple[float, float, int, str]:
    """(cpu s, wall s, records, sha256) of one Session over the WAL span
    (restart lsn, consistent point, end) into the avro plugin under PGCDC_IMPL."""
    start, consistent, end = span
    digest = hashlib.sha256()
    records = [0]

    def writer(_lsn: int, _xid: int, rec: Any) -> None:
        records[0] += 1
        digest.update(rec.topic.encode())
        for part in (rec.key, rec.value):
            digest.update(b"-" if part is None else len(part).to_bytes(4, "big") + part)

    wal = Path(info["pgdata"]) / "pg_wal"
    with tempfile.TemporaryDirectory(prefix="pgcdc-bench-decode-") as spill:
        session = Session(
            SessionConfig(dsn=dsn, slot=slot, spill_dir=Path(spill)),
            AvroPlugin(settings),
            "avro",
            writer,
            version=int(info["version"]),
            start_lsn=start,
            decode_from=consistent,
        )
        prof = cProfile.Profile() if profile else None
        try:
            c0, t0 = time.process_time(), time.monotonic()
            if prof is not None:
                prof.enable()
            reader, process = session.reader, session.decoding.process
            done = False
            for lsn, data in iter_wal_chunks(wal, start, segment_size=detect_segment_size(wal)):
                reader.feed(data, lsn)
                for record in session.records():
                    if record.lsn >= end:
                        done = True
                        break
                    if record.lsn >= start:
                        process(record)
                    if record.end_lsn >= end:
                        done = True
                        break
                if done:
                    break
            if prof is not None:
                prof.disable()
            cpu, wall = time.process_time() - c0, time.monotonic() - t0
        finally:
            session.close()
        if prof is not None:
            pstats.Stats(prof).sort_stats("tottime").print_stats(25)
    return cpu, wall, records[0], digest.hexdigest()


def run_avro(server: str, rows: int, txn_rows: int, impls: str, profile: bool) -> None:
    """WAL to Avro bytes, decode only, per PGCDC_IMPL (see the module docstring)."""
    env = _services_env()
    info = env[server]
    tag = uuid.uuid4().hex[:8]
    db = f"pgcdc_bench_avro_{tag}"
    base = f"host={info['host']} port={info['port']} user={info['user']} dbname="
    admin = psycopg2.connect(base + "postgres")
    admin.autocommit = True
    admin.cursor().execute(f"CREATE DATABASE {db}")
    dsn, phys = base + db, f"{db}_phys"
    settings = Settings(
        source={"slot": "bench", "dbname": db},
        kafka={"bootstrap_servers": "127.0.0.1:1", "topic_prefix": f"benchdec{tag}"},
        registry={"url": env["registry"]["url"]},
    )
    avro_plugin.time = _FrozenTime  # type: ignore[assignment]
    slots: list[str] = []
    try:
        setup(dsn, phys)
        conn = psycopg2.connect(dsn)
        conn.autocommit = True
        c = conn.cursor()
        c.execute(
            "CREATE TABLE bench (id int PRIMARY KEY, a text, b int8, c float8, d timestamptz, "
            "e numeric(12, 2)) WITH (autovacuum_enabled = off)"
        )
        print(
            f"server {server}: WAL -> Avro bytes, decode only (Session into the avro plugin, "
            "no Kafka); bench(int pk, text, int8, float8, timestamptz, numeric(12,2)); "
            "rows/s on process CPU time"
        )
        for name, per_txn in (
            (f"1 txn x {rows:,} rows", rows),
            (f"{txn_rows:,}-row txns", txn_rows),
        ):
            slot = f"bench_dec_{uuid.uuid4().hex[:10]}"
            c.execute("SELECT pg_create_logical_replication_slot(%s, 'test_decoding')", (slot,))
            slots.append(slot)
            c.execute(
                "SELECT restart_lsn::text, confirmed_flush_lsn::text "
                "FROM pg_replication_slots WHERE slot_name = %s",
                (slot,),
            )
            r0, r1 = c.fetchone()  # type: ignore[misc]
            force_running_xacts(dsn, int(info["version"]))
            first = len(slots) * 10 * rows
            for lo in range(first, first + rows, per_txn):
                c.execute(
                    "INSERT INTO bench SELECT g, 'row number ' || g, g * 7, g / 3.0, "
                    "'2024-01-01'::timestamptz + g * interval '1 second', g / 100.0 "
                    "FROM generate_series(%s, %s) g",
                    (lo, min(lo + per_txn, first + rows) - 1),
                )
            c.execute("SELECT pg_current_wal_lsn()::text")
            end = _lsn(c.fetchone()[0])  # type: ignore[index]
            span = (_lsn(r0), _lsn(r1), end)
            print(f"\n{name} (WAL {end - span[0]:,} bytes)")
            digests = set()
            for impl in impls.split(","):
                os.environ["PGCDC_IMPL"] = impl
                cpu, wall, n, digest = _avro_once(
                    info, dsn, slot, span, settings, profile and impl == "native"
                )
                digests.add(digest)
                print(
                    f"  pgcdc[{selected()}] WAL->Avro  {rows / cpu:>10,.0f} rows/s"
                    f"  cpu {cpu:6.2f} s"
                    f"  wall {wall:6.2f} s  {n:,} records  sha256 {digest[:16]}"
                )
            print("  records identical across impls" if len(digests) == 1 else "  RECORDS DIFFER")
        conn.close()
    finally:
        conn = psycopg2.connect(dsn)
        conn.autocommit = True
        for slot in slots:
            conn.cursor().execute("SELECT pg_drop_replication_slot(%s)", (slot,))
        conn.close()
        teardown(dsn, phys)
        admin.cursor().execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
        admin.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default="pg15", choices=["pg15", "pg18"])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--avro", action="store_true", help="WAL to Avro bytes, per --impl")
    parser.add_argument("--txn-rows", type=int, default=10_000)
    parser.add_argument("--impl", default="python,native")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    if args.avro:
        run_avro(args.server, args.rows, args.txn_rows, args.impl, args.profile)
        return
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

        for impl in ("python", "native") if native_available() else ("python",):
            t0 = time.perf_counter()
            n, _ = _walk(segs, start, end, None, impl)
            read_s = time.perf_counter() - t0
            print(
                f"[{impl}] reader (records, CRC, blocks): {n} records in {read_s:.2f}s = "
                f"{n / read_s:,.0f} rec/s"
            )
            t0 = time.perf_counter()
            n2, changes = _walk(segs, start, end, int(info["version"]), impl)
            full_s = time.perf_counter() - t0
            assert n2 == n and changes >= args.rows, (n2, n, changes)
            print(
                f"[{impl}] reader + decode into events: {n2} records, {changes} heap changes "
                f"in {full_s:.2f}s = {n2 / full_s:,.0f} rec/s, {changes / full_s:,.0f} rows/s"
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
