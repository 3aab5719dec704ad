"""Benchmark (a script, not a test): rows/s of the whole decoding pipeline after the WAL.

One table in a fresh database on a real server (`--table narrow`: int key, int, text,
numeric(12,2), timestamptz; `--table typed`: int key, jsonb, text[], tstzrange, inet,
interval, timetz, money, bit(8), macaddr; `--table toast`: int key, text, and a 5-8 KB
jsonb document stored out of line; `--table wide`: bench_vs_debezium's 13-column
orders table of about 0.8 KB a row), two workloads: one transaction of `--rows`
rows, and `--txns` transactions of `--txn-rows` rows; `--change update`/`delete` makes
them update or delete rows inserted before (`-full`: with REPLICA IDENTITY FULL).
`--table pgbench`: pgbench's four tables (`pgbench -i`, scale 1) and one workload,
`pgbench -c4 -j2 -n -t (--txns / 4)`: small transactions of 4 row changes each (three
UPDATEs and an INSERT, four tables), as OLTP writes them. For each, over the same WAL:

- pgcdc with the text plugin (`include-xids` off), from the WAL files in pg_wal to
  output lines: reader, decoder, reorder buffer, schema history, row decoding, type
  conversion, plugin;
- pgcdc with the avro plugin, serialization only: every record is built and
  serialized, then dropped by the writer, which takes a run of ready records at once
  (and a transaction's runs of several tables at once) as the worker's Kafka sink
  does (the registry is contacted once per schema);
- reader + decoder only (records decoded into events, nothing queued), for reference:
  what the stages before the reorder buffer cost on their own;
- PostgreSQL's test_decoding on a logical slot over the same WAL
  (`pg_logical_slot_peek_changes(... upto_lsn)`, counted server-side; the backend's CPU
  time is read from /proc), with the same options;
- PostgreSQL's pgoutput (protocol 1, a publication of the table) on a second logical
  slot created beside the first, the same way (`pg_logical_slot_peek_binary_changes`).

pgcdc's stages run under each `--impl` in turn (`PGCDC_IMPL`: the Python reference or
the native core, service.impl), so the table shows both beside the server's decoders.

pgcdc's figures are the process CPU time (the machine is shared; wall time is printed
too), best of `--repeat`. The text plugin's output is checked line for line (count and
SHA-256) against test_decoding's. The garbage collector is set as `pgcdc run` sets it
(service.app.gctune) unless `--gc default`.

    .venv/bin/python tests/perf/bench_pipeline.py [--pg pg15|pg18]
        [--table narrow|typed|toast|wide|pgbench]
        [--rows 200000]
        [--txns 20] [--txn-rows 10000] [--repeat 1] [--only text,avro,reader,pg,pgoutput]
        [--impl python,native] [--profile text|avro] [--gc worker|default]
        [--change insert|update|update-full|update-doc|delete|delete-full]

The profile (`--profile`) is sorted by PGCDC_PROF_SORT (a pstats key, default tottime)
and shows PGCDC_PROF_N lines (default 30).

The services must be up (`python deploy/local/services.py up pg15 registry`).
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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import psycopg2  # noqa: E402 (after the path set-up above)

from connectors.avro.plugin import AvroPlugin  # noqa: E402 (same)
from connectors.postgres.archive import detect_segment_size, iter_wal_chunks  # noqa: E402 (same)
from connectors.postgres.server import force_running_xacts  # noqa: E402 (same)
from connectors.postgres.setup import setup, teardown  # noqa: E402 (same)
from service.app import gctune  # noqa: E402 (same)
from service.app.session import Session, SessionConfig  # noqa: E402 (same)
from service.config import Settings  # noqa: E402 (same)
from service.decode.dispatch import decoder_for  # noqa: E402 (same)
from service.impl import selected, xlog_reader_class  # noqa: E402 (same)
from service.lsn import parse_lsn  # noqa: E402 (same)
from service.output.api import RecordRun  # noqa: E402 (same)
from service.output.text import TestDecodingPlugin  # noqa: E402 (same)
from tests.perf.shapes import WIDE  # noqa: E402 (same)

TABLE = (
    "CREATE TABLE bench (id int PRIMARY KEY, n int, label text, amount numeric(12,2), "
    "at timestamptz) WITH (autovacuum_enabled = off)"
)
INSERT = (
    "INSERT INTO bench SELECT g, g % 1000, 'label ' || g, g / 100.0, "
    "timestamptz '2024-01-01 00:00:00+00' + g * interval '1 second' "
    "FROM generate_series({lo}, {hi}) g"
)
# --table typed: the Debezium logical types beyond the narrow table's, one of each family.
TYPED_TABLE = (
    "CREATE TABLE bench (id int PRIMARY KEY, doc jsonb, tags text[], span tstzrange, "
    "addr inet, dur interval, at timetz, price money, flags bit(8), mac macaddr) "
    "WITH (autovacuum_enabled = off)"
)
TYPED_INSERT = (
    "INSERT INTO bench SELECT g, jsonb_build_object('g', g, 'name', 'item ' || g, "
    "'tags', jsonb_build_array('a', g % 7, true)), ARRAY['t' || g % 10, 'x y'], "
    "tstzrange(timestamptz '2024-01-01 00:00+00' + g * interval '1 min', NULL), "
    "('10.' || g % 256 || '.' || g % 100 || '.1/24')::inet, g * interval '1 min 3 s', "
    "timetz '12:00+02' + g * interval '1 s', (g / 100.0)::numeric::money, "
    "(g % 256)::bit(8), ('08:00:2b:01:02:' || lpad(to_hex(g % 256), 2, '0'))::macaddr "
    "FROM generate_series({lo}, {hi}) g"
)
# --table toast: a document of 5-8 KB per row that compresses poorly, so it is stored out
# of line (TOAST chunks inserted before each row), as the issue's `toast` workload.
TOAST_TABLE = (
    "CREATE TABLE bench (id int PRIMARY KEY, title text, doc jsonb) WITH (autovacuum_enabled = off)"
)
TOAST_INSERT = (
    "INSERT INTO bench SELECT g, 'doc ' || g, jsonb_build_object('id', g, 'body', "
    "(SELECT string_agg(md5((g * 1000 + k)::text), ' ') FROM generate_series(1, 150 + g % 90) k))"
    " FROM generate_series({lo}, {hi}) g"
)
# --table wide: bench_vs_debezium's 13-column orders table of about 0.8 KB a row
# (tests/perf/shapes.py), with this script's placeholders.
WIDE_TABLE = WIDE.table + " WITH (autovacuum_enabled = off)"
WIDE_INSERT = WIDE.insert.replace("{a}", "{lo}").replace("{b}", "{hi}")
# --change: what the measured statements do to the rows (insert: they write them; the
# others change rows inserted before the slot, outside the measured WAL).
UPDATES = {
    "narrow": "UPDATE bench SET n = n + 1 WHERE id BETWEEN {lo} AND {hi}",
    "typed": "UPDATE bench SET dur = dur + interval '1 s' WHERE id BETWEEN {lo} AND {hi}",
    "toast": "UPDATE bench SET title = title || '!' WHERE id BETWEEN {lo} AND {hi}",
    "wide": "UPDATE bench SET quantity = quantity + 1 WHERE id BETWEEN {lo} AND {hi}",
}
# --change update-doc: each row's document replaced by a new one, also out of line
UPDATE_DOC = (
    "UPDATE bench SET doc = doc || jsonb_build_object('v', id) WHERE id BETWEEN {lo} AND {hi}"
)
DELETE = "DELETE FROM bench WHERE id BETWEEN {lo} AND {hi}"
CHANGE = "insert"  # --change
CHANGED = ""  # the UPDATE of --table
OPTIONS = {"include-xids": "0"}
CLK_TCK = os.sysconf("SC_CLK_TCK")


@dataclass
class Workload:
    name: str
    rows: int
    start: int  # the slot's restart LSN: where both decoders start reading
    consistent: int  # the slot's confirmed_flush LSN: commits from here on are emitted
    end: int  # pg_current_wal_lsn() after the last commit
    slot: str
    pgoutput_slot: str  # created just after `slot`, before the rows: decodes the same ones


@dataclass
class Timing:
    cpu: float
    wall: float
    lines: int
    digest: str


def _dsn(pg: dict[str, Any], db: str) -> str:
    return f"host={pg['host']} port={pg['port']} user={pg['user']} dbname={db}"


def _lsn(cur: Any, sql: str) -> int:
    cur.execute(sql)
    row = cur.fetchone()
    assert row is not None
    return parse_lsn(str(row[0]))


def make_workload(
    pg: dict[str, Any],
    dsn: str,
    name: str,
    txns: int,
    per_txn: int,
    first_id: int,
    *,
    pgbench: bool = False,
) -> Workload:
    """A test_decoding slot, a forced RUNNING_XACTS, then `txns` statements of `per_txn`
    rows each: inserts, or (--change) updates or deletes of rows inserted before the
    slot; with `pgbench`, `txns` pgbench transactions from 4 clients instead."""
    conn = psycopg2.connect(dsn)
    conn.autocommit = True
    slot = f"bench_{uuid.uuid4().hex[:10]}"
    with conn.cursor() as cur:
        if CHANGE != "insert":
            cur.execute(INSERT.format(lo=first_id, hi=first_id + txns * per_txn - 1))
            cur.execute("CHECKPOINT")  # their pages' images before the slot, not inside
        cur.execute("SELECT pg_create_logical_replication_slot(%s, 'test_decoding')", (slot,))
        cur.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (slot + "_po",))
        # pgcdc reads from the slot's restart LSN and emits from its consistent point, so
        # it meets the same RUNNING_XACTS records the server built its snapshot from
        # (others' transactions on the shared server cannot delay its consistency).
        cur.execute(
            "SELECT restart_lsn::text, confirmed_flush_lsn::text "
            "FROM pg_replication_slots WHERE slot_name = %s",
            (slot,),
        )
        row = cur.fetchone()
        assert row is not None
        start, consistent = parse_lsn(row[0]), parse_lsn(row[1])
        force_running_xacts(dsn, int(pg["version"]))
        if pgbench:
            per_client = max(1, txns // 4)
            subprocess.run(
                [
                    f"{pg['bin']}/pgbench",
                    *("-h", str(pg["host"]), "-p", str(pg["port"]), "-U", str(pg["user"])),
                    *("-c", "4", "-j", "2", "-n", "-t", str(per_client), conn.info.dbname),
                ],
                capture_output=True,
                check=True,
            )
            end = _lsn(cur, "SELECT pg_current_wal_lsn()")
            conn.close()
            # each pgbench transaction: UPDATE accounts, tellers, branches; INSERT history
            rows = 4 * 4 * per_client
            return Workload(name, rows, start, consistent, end, slot, slot + "_po")
        for t in range(txns):
            lo = first_id + t * per_txn
            statement = {"insert": INSERT, "delete": DELETE}.get(CHANGE, CHANGED)
            cur.execute(statement.format(lo=lo, hi=lo + per_txn - 1))
        end = _lsn(cur, "SELECT pg_current_wal_lsn()")
    conn.close()
    return Workload(name, txns * per_txn, start, consistent, end, slot, slot + "_po")


class Digest:
    """Output lines reduced to a count and a SHA-256 (the text plugin's writer)."""

    def __init__(self) -> None:
        self.count = 0
        self._h = hashlib.sha256()

    def add(self, line: str) -> None:
        self.count += 1
        self._h.update(line.encode())
        self._h.update(b"\n")

    def hexdigest(self) -> str:
        return self._h.hexdigest()


def _pump(session: Session, wal: Path, w: Workload) -> None:
    """Feed WAL record by record, stopping at the record that reaches `w.end`."""
    chunks = iter_wal_chunks(wal, w.start, segment_size=detect_segment_size(wal))
    reader, process = session.reader, session.decoding.process
    for lsn, data in chunks:
        reader.feed(data, lsn)
        for record in session.records():
            if record.lsn >= w.end:
                return
            if record.lsn >= w.start:
                process(record)
            if record.end_lsn >= w.end:
                return
    raise AssertionError(f"WAL ended before {w.end:X}")


def run_pgcdc(
    pg: dict[str, Any], dsn: str, w: Workload, plugin_name: str, settings: Settings, profile: bool
) -> Timing:
    wal = Path(pg["pgdata"]) / "pg_wal"
    out = Digest()
    dropped = [0]
    plugin: object
    writer: Callable[[int, int, Any], None]
    run_writer: Callable[[int, int, RecordRun], None] | None = None
    runs_writer: Callable[[int, int, list[RecordRun]], None] | None = None
    if plugin_name == "text":
        plugin = TestDecodingPlugin()

        def writer(lsn: int, xid: int, data: Any) -> None:
            out.add(data)

        options = {**OPTIONS, "server-version": str(pg["version"])}
    else:
        plugin = AvroPlugin(settings)

        def writer(lsn: int, xid: int, data: Any) -> None:
            dropped[0] += 1

        def count_run(lsn: int, xid: int, run: RecordRun) -> None:
            dropped[0] += len(run.values)

        def count_runs(lsn: int, xid: int, runs: list[RecordRun]) -> None:
            for run in runs:
                dropped[0] += len(run.values)

        run_writer, runs_writer = count_run, count_runs

        options = {}
    with tempfile.TemporaryDirectory(prefix="pgcdc-bench-spill-") as spill:
        session = Session(
            SessionConfig(dsn=dsn, slot=w.slot, spill_dir=Path(spill), plugin_options=options),
            plugin,
            plugin_name,
            writer,
            version=int(pg["version"]),
            start_lsn=w.start,
            decode_from=w.consistent,
            # As the worker hands the sink a run of ready records at once.
            run_writer=run_writer,
            runs_writer=runs_writer,
        )
        try:
            prof = cProfile.Profile() if profile else None
            c0, t0 = time.process_time(), time.monotonic()
            if prof is not None:
                prof.enable()
            _pump(session, wal, w)
            if prof is not None:
                prof.disable()
            cpu, wall = time.process_time() - c0, time.monotonic() - t0
            if prof is not None:
                stats = pstats.Stats(prof).sort_stats(os.environ.get("PGCDC_PROF_SORT", "tottime"))
                stats.print_stats(int(os.environ.get("PGCDC_PROF_N", "30")))
        finally:
            session.close()
    if plugin_name == "text":
        return Timing(cpu, wall, out.count, out.hexdigest())
    return Timing(cpu, wall, dropped[0], "")


def run_reader(pg: dict[str, Any], w: Workload) -> Timing:
    """XLogReader + decoder into events only (the stages other engineers own)."""
    wal = Path(pg["pgdata"]) / "pg_wal"
    reader = xlog_reader_class()(w.start & ~8191 if w.start % 8192 else w.start)
    decode = decoder_for(int(pg["version"])).decode
    events = 0
    c0, t0 = time.process_time(), time.monotonic()
    for lsn, data in iter_wal_chunks(wal, w.start, segment_size=detect_segment_size(wal)):
        reader.feed(data, lsn)
        for record in reader.records():
            if record.lsn >= w.start:
                for _ in decode(record):
                    events += 1
            if record.end_lsn >= w.end:
                return Timing(time.process_time() - c0, time.monotonic() - t0, events, "")
    raise AssertionError(f"WAL ended before {w.end:X}")


def _backend_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime


def run_server(dsn: str, w: Workload, check: bool) -> Timing:
    """test_decoding through peek_changes (the slot is kept for the next run)."""
    conn = psycopg2.connect(dsn)
    conn.autocommit = True
    args: list[str] = []
    for k, v in OPTIONS.items():
        args += [k, v]
    marks = ", ".join(["%s"] * len(args))
    upto = f"{w.end >> 32:X}/{w.end & 0xFFFFFFFF:X}"
    with conn.cursor() as cur:
        cur.execute("SELECT pg_backend_pid()")
        row = cur.fetchone()
        assert row is not None
        pid = int(row[0])
        c0, t0 = _backend_cpu(pid), time.monotonic()
        cur.execute(
            f"SELECT count(*) FROM pg_logical_slot_peek_changes(%s, %s, NULL, {marks})",
            (w.slot, upto, *args),
        )
        row = cur.fetchone()
        assert row is not None
        lines = int(row[0])
        cpu, wall = _backend_cpu(pid) - c0, time.monotonic() - t0
    digest = ""
    if check:
        out = Digest()
        conn.autocommit = False
        with conn.cursor(name="changes") as changes:
            changes.itersize = 10_000
            changes.execute(
                f"SELECT data FROM pg_logical_slot_peek_changes(%s, %s, NULL, {marks})",
                (w.slot, upto, *args),
            )
            for (line,) in changes:
                out.add(line)
        conn.commit()
        digest = out.hexdigest()
    conn.close()
    return Timing(cpu, wall, lines, digest)


def run_pgoutput(dsn: str, w: Workload) -> Timing:
    """pgoutput through peek_binary_changes, protocol 1, publication `bench_pub`."""
    conn = psycopg2.connect(dsn)
    conn.autocommit = True
    upto = f"{w.end >> 32:X}/{w.end & 0xFFFFFFFF:X}"
    with conn.cursor() as cur:
        cur.execute("SELECT pg_backend_pid()")
        row = cur.fetchone()
        assert row is not None
        pid = int(row[0])
        c0, t0 = _backend_cpu(pid), time.monotonic()
        cur.execute(
            "SELECT count(*) FROM pg_logical_slot_peek_binary_changes(%s, %s, NULL, "
            "'proto_version', '1', 'publication_names', 'bench_pub')",
            (w.pgoutput_slot, upto),
        )
        row = cur.fetchone()
        assert row is not None
        messages = int(row[0])
        cpu, wall = _backend_cpu(pid) - c0, time.monotonic() - t0
    conn.close()
    return Timing(cpu, wall, messages, "")


def _rate(rows: int, cpu: float) -> float:
    return rows / max(cpu, 0.01)  # /proc and process_time tick at 10 ms at worst


def _best(runs: list[Timing]) -> Timing:
    return min(runs, key=lambda t: t.cpu)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pg", default="pg15", choices=["pg15", "pg18"])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--txns", type=int, default=20)
    parser.add_argument("--txn-rows", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument(
        "--gc", default="worker", choices=["worker", "default"], help="collector settings"
    )
    parser.add_argument("--only", default="text,avro,reader,pg,pgoutput")
    parser.add_argument(
        "--table",
        choices=["narrow", "typed", "toast", "wide", "pgbench"],
        default="narrow",
        help="narrow: int, int, text, numeric, timestamptz; typed: jsonb, text[], tstzrange,"
        " inet, interval, timetz, money, bit(8), macaddr; toast: a 5-8 KB jsonb document"
        " per row, stored out of line; wide: 13 columns of mixed types, about 0.8 KB a row"
        " (bench_vs_debezium's); pgbench: pgbench -c4 over its tables (--txns in all)",
    )
    parser.add_argument(
        "--change",
        choices=["insert", "update", "update-full", "update-doc", "delete", "delete-full"],
        default="insert",
        help="what the measured statements do: insert rows, or update or delete rows"
        " inserted before (the -full ones with REPLICA IDENTITY FULL: old rows logged whole;"
        " update-doc: --table toast's documents replaced, new chunks and the old deleted)",
    )
    parser.add_argument(
        "--impl", default="python,native", help="PGCDC_IMPL values to run pgcdc under, in turn"
    )
    parser.add_argument(
        "--profile",
        choices=["text", "avro"],
        default=None,
        help="print a cProfile of one run of this plugin per workload",
    )
    args = parser.parse_args()
    global TABLE, INSERT, CHANGE, CHANGED  # the workload's table and statements
    pgbench = args.table == "pgbench"
    CHANGE, CHANGED = args.change.removesuffix("-full"), UPDATES.get(args.table, "")
    if args.change == "update-doc":  # a new document: new chunks, the old ones deleted
        if args.table != "toast":
            parser.error("--change update-doc is for --table toast")
        CHANGE, CHANGED = "update", UPDATE_DOC
    if args.table == "typed":
        TABLE, INSERT = TYPED_TABLE, TYPED_INSERT
    elif args.table == "toast":
        TABLE, INSERT = TOAST_TABLE, TOAST_INSERT
    elif args.table == "wide":
        TABLE, INSERT = WIDE_TABLE, WIDE_INSERT
    if args.gc == "worker":
        gctune.tune()  # the collector as `pgcdc run` sets it (service.app.gctune)
    only = set(args.only.split(","))

    env = json.loads(
        subprocess.check_output(
            [sys.executable, str(ROOT / "deploy/local/services.py"), "env"], cwd=ROOT
        )
    )
    pg = env[args.pg]
    settings = Settings(
        source={"slot": "bench", "dbname": "bench"},
        kafka={
            "bootstrap_servers": env["kafka"]["bootstrap"],
            "topic_prefix": f"bench{uuid.uuid4().hex[:8]}",
        },
        registry={"url": env["registry"]["url"]},
    )
    db = f"bench_{uuid.uuid4().hex[:10]}"
    admin = psycopg2.connect(_dsn(pg, "postgres"))
    admin.autocommit = True
    admin.cursor().execute(f"CREATE DATABASE {db}")
    dsn = _dsn(pg, db)
    phys = f"{db}_phys"
    workloads: list[Workload] = []
    ok = True
    try:
        setup(dsn, phys)
        conn = psycopg2.connect(dsn)
        conn.autocommit = True
        if pgbench:
            subprocess.run(
                [
                    f"{pg['bin']}/pgbench",
                    *("-h", str(pg["host"]), "-p", str(pg["port"]), "-U", str(pg["user"])),
                    *("-i", "-q", db),
                ],
                capture_output=True,
                check=True,
            )
            conn.cursor().execute(
                "CREATE PUBLICATION bench_pub FOR TABLE "
                "pgbench_accounts, pgbench_branches, pgbench_tellers, pgbench_history"
            )
            conn.close()
            t0 = time.monotonic()
            workloads.append(
                make_workload(
                    pg, dsn, f"pgbench -c4, {args.txns:,} txns", args.txns, 4, 0, pgbench=True
                )
            )
            shape = "pgbench_accounts, _branches, _tellers, _history"
        else:
            conn.cursor().execute(TABLE)
            if args.change.endswith("-full"):
                conn.cursor().execute("ALTER TABLE bench REPLICA IDENTITY FULL")
            conn.cursor().execute("CREATE PUBLICATION bench_pub FOR TABLE bench")
            conn.close()
            t0 = time.monotonic()
            workloads.append(make_workload(pg, dsn, f"1 txn x {args.rows:,} rows", 1, args.rows, 1))
            workloads.append(
                make_workload(
                    pg,
                    dsn,
                    f"{args.txns} txns x {args.txn_rows:,} rows",
                    args.txns,
                    args.txn_rows,
                    args.rows + 1,
                )
            )
            shape = TABLE.split("(", 1)[1].split(") WITH")[0]
        print(
            f"PostgreSQL {pg['version']}, table(s) {shape}, {args.change}; "
            f"workloads written in {time.monotonic() - t0:.1f} s; "
            f"rows/s on CPU time, best of {args.repeat}"
        )
        for w in workloads:
            print(f"\n{w.name}  (WAL {w.end - w.start:,} bytes)")
            server = None
            if "pg" in only:
                server = _best(
                    [
                        run_server(dsn, w, check=(i == 0 and "text" in only))
                        for i in range(args.repeat)
                    ]
                )
                print(
                    f"  {'test_decoding (server)':<28}{_rate(w.rows, server.cpu):>12,.0f} rows/s"
                    f"  cpu {server.cpu:6.2f} s  wall {server.wall:6.2f} s  "
                    f"{server.lines:,} lines"
                )
            if "pgoutput" in only:
                po = _best([run_pgoutput(dsn, w) for _ in range(args.repeat)])
                print(
                    f"  {'pgoutput (server)':<28}{_rate(w.rows, po.cpu):>12,.0f} rows/s"
                    f"  cpu {po.cpu:6.2f} s  wall {po.wall:6.2f} s  {po.lines:,} messages"
                )
            for impl in args.impl.split(","):
                os.environ["PGCDC_IMPL"] = impl
                ok = _run_impl(pg, dsn, w, settings, args, only, server) and ok
    finally:
        conn = psycopg2.connect(dsn)
        conn.autocommit = True
        for w in workloads:
            conn.cursor().execute("SELECT pg_drop_replication_slot(%s)", (w.slot,))
            conn.cursor().execute("SELECT pg_drop_replication_slot(%s)", (w.pgoutput_slot,))
        conn.close()
        teardown(dsn, phys)
        admin.cursor().execute(f"DROP DATABASE {db} WITH (FORCE)")
        admin.close()
    return 0 if ok else 1


def _run_impl(
    pg: dict[str, Any],
    dsn: str,
    w: Workload,
    settings: Settings,
    args: argparse.Namespace,
    only: set[str],
    server: Timing | None,
) -> bool:
    """pgcdc's figures for one workload under the PGCDC_IMPL now set; False on a diff."""
    ok = True
    impl = selected()
    if "reader" in only:
        r = _best([run_reader(pg, w) for _ in range(args.repeat)])
        label = f"pgcdc[{impl}] reader+decode"
        print(
            f"  {label:<28}{_rate(w.rows, r.cpu):>12,.0f} rows/s"
            f"  cpu {r.cpu:6.2f} s  wall {r.wall:6.2f} s  {r.lines:,} events"
        )
    for name in ("text", "avro"):
        if name not in only:
            continue
        runs = [run_pgcdc(pg, dsn, w, name, settings, profile=False) for _ in range(args.repeat)]
        t = _best(runs)
        same = ""
        if name == "text" and server is not None and server.digest:
            equal = t.lines == server.lines and t.digest == server.digest
            ok = ok and equal
            same = (
                "  output identical to test_decoding"
                if equal
                else "  OUTPUT DIFFERS from test_decoding"
            )
        label = f"pgcdc[{impl}] {name} plugin"
        print(
            f"  {label:<28}{_rate(w.rows, t.cpu):>12,.0f} rows/s"
            f"  cpu {t.cpu:6.2f} s  wall {t.wall:6.2f} s  {t.lines:,} "
            f"{'lines' if name == 'text' else 'records'}{same}"
        )
        if args.profile == name:
            run_pgcdc(pg, dsn, w, name, settings, profile=True)
    return ok


if __name__ == "__main__":
    sys.exit(main())
