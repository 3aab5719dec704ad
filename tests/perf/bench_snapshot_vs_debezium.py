"""Benchmark (a script, not a test): the initial snapshot of one table, pgcdc beside Debezium.

    PGCDC_STATE_DIR=... python -m tests.perf.bench_snapshot_vs_debezium [--pg pg16]
        [--rows 500000] [--reps 2] [--chunk-rows 20000] [--table narrow|wide]
        [--write-rate 0] [--systems pgcdc-1,pgcdc-2,pgcdc-blocking-2,debezium]
        [--keep-connect] [--timeline] [--env PGCDC_X=V ...]

Every run gets a fresh database on `--pg` holding the `--table` shape (tests/perf/shapes:
`narrow`, bench_vs_debezium's 5 columns; `wide`, 13 columns of about 0.8 KB a row) with
`--rows` rows (VACUUM ANALYZEd before the system's slot exists, so neither decodes the
load's WAL; idle source), and snapshots it into the shared Kafka (Avro, schemas in the
shared Apicurio):

- `pgcdc-N`: `pgcdc run` (a subprocess; snapshot.mode initial, snapshot.method chunked,
  snapshot.parallelism N, `--chunk-rows`; the implementation PGCDC_IMPL selects);
  `pgcdc-blocking-N` (`pgcdc-blocking`: N = 1): the same with snapshot.method blocking
  (N readers sharing one exported snapshot, a Kafka transaction per chunk); the rows
  counted are those of the `bench` table in the log (`snapshot_chunk_committed`, or
  `snapshot_table_done` for blocking);
- `debezium`: Debezium 3.6.1's PostgreSQL connector in Kafka Connect 4.1.1
  (deploy/local/svc_connect.py; started here if it is not running and stopped again
  only then), configured as bench_vs_debezium configures it (`connector_config`:
  pgoutput, Apicurio's AvroConverter for keys and values, its producer compressing
  with lz4 as pgcdc's does by default, defaults otherwise) with snapshot.mode initial.

Figures per run:
- rows/s = rows / (start -> every row readable in Kafka). Start: the worker spawned, or
  the connector's config PUT. End: for pgcdc (transactional), the log line of the last
  chunk's commit (`snapshot_chunk_committed`, or `snapshot_done` for blocking); for
  Debezium (not transactional), the topic's end offsets reaching `--rows`.
- snap rows/s: rows over the snapshot alone. pgcdc: first chunk read -> last chunk
  committed (its log); Debezium: the first record in the topic -> the end above.
- CPU s: the worker's CPU over the run (pgcdc's process; Connect's JVM), and rows per
  CPU second, the figure that depends least on what else the machine runs.
- COPY ceiling: before each pgcdc run, one `COPY (SELECT * FROM bench) TO STDOUT
  (FORMAT binary)` of the table into /dev/null (psycopg2, this process): the rate a
  snapshot reading by COPY cannot beat on one connection.
- with `--write-rate R`: a second table `bench_w` (created with `bench`) takes R rows/s
  in 10 transactions a second from just before the system starts until its snapshot is
  done, so that the stream has work beside the snapshot. "behind" is, at each sample
  (every 0.5 s), how long the oldest write transaction not yet readable in Kafka has
  been committed (pgcdc: the offsets record's confirmed LSN has not passed it;
  Debezium: the `bench_w` topic's end offset has not reached its rows); the maximum
  while the snapshot ran, and at the end the time from the last write's commit until
  it is readable. "behind run" is that maximum over the samples after the stream first
  delivered a write: it leaves out the system's start-up (the writes begin before the
  worker does), so it shows what the snapshot costs the stream. Both are printed.
  The blocking method pauses decoding for the snapshot by design, as
  Debezium's initial snapshot holds back streaming: their "behind" is the snapshot's
  length; the chunked method streams between chunks.
- peak RSS: pgcdc's worker's VmHWM (its life is this one run). Connect's JVM lives
  across runs, so its VmHWM only grows: the peak VmRSS sampled (every 0.2 s) during the
  run is printed, with the RSS it had before the connector started.

The machine has 2 cores shared with other work: each run prints the load average, and
the table gives the median and the min-max over `--reps`.
"""

from __future__ import annotations

import argparse
import bisect
import os
import signal
import sys
import threading
import time
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg2

from tests.fixtures.services import ensure_service
from tests.integration.pipeline_kafka_support import Pipeline, insert_lsn, unique
from tests.perf.bench_vs_debezium import (
    Debezium,
    connector_config,
    end_offsets,
    fmt,
    http,
    proc_cpu,
    proc_hwm_mb,
    svc_connect,
)
from tests.perf.shapes import SHAPES, Shape

WRITES_TABLE = "CREATE TABLE bench_w (id bigint PRIMARY KEY, at timestamptz)"


def proc_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _ts(event: dict[str, Any]) -> float:
    return datetime.fromisoformat(str(event["timestamp"]).replace("Z", "+00:00")).timestamp()


@dataclass
class Run:
    rows: int
    seconds: float  # start -> every row readable
    snap_seconds: float  # the snapshot alone (see the module docstring)
    cpu: float
    rss_mb: float
    rss_before_mb: float
    load: float
    behind_max: float = 0.0  # seconds; 0 without a write load
    behind_end: float = 0.0
    behind_run: float = 0.0  # behind_max once the stream has delivered its first write

    @property
    def rate(self) -> float:
        return self.rows / self.seconds

    @property
    def snap_rate(self) -> float:
        return self.rows / self.snap_seconds

    @property
    def cpu_rate(self) -> float:
        return self.rows / max(self.cpu, 0.01)


def _fill(shape: Shape, rows: int) -> list[str]:
    """The rows, then VACUUM ANALYZE: hint bits and the visibility map are written now,
    not by an autovacuum in the middle of a run (its WAL would be decoded by pgcdc)."""
    step = 100_000
    return [
        *(shape.insert.format(a=a, b=min(a + step - 1, rows)) for a in range(1, rows + 1, step)),
        "VACUUM ANALYZE bench",
    ]


class Writes:
    """`rate` rows/s into bench_w, 10 transactions a second, on a thread, until `stop`.

    Keeps per transaction its commit time, the insert LSN read just before its COMMIT
    (a confirmed LSN past it has the commit out) and the rows written so far."""

    def __init__(self, dsn: str, rate: int) -> None:
        self.rate = rate
        self.times: list[float] = []
        self.lsns: list[int] = []
        self.totals: list[int] = []
        self._halt = threading.Event()
        self._conn = psycopg2.connect(dsn)
        self._thread = threading.Thread(target=self._run, daemon=True)
        if rate > 0:
            self._thread.start()

    def _run(self) -> None:
        per, n, tick = max(1, self.rate // 10), 0, 0.1
        due = time.monotonic()
        self._conn.autocommit = False
        with self._conn.cursor() as cur:
            while not self._halt.is_set():
                cur.execute(
                    "INSERT INTO bench_w SELECT g, now() FROM generate_series(%s, %s) g",
                    (n + 1, n + per),
                )
                lsn = insert_lsn(cur)  # before the commit record: passed once it is out
                self._conn.commit()
                n += per
                now = time.time()
                self.lsns.append(lsn)
                self.times.append(now)
                self.totals.append(n)
                due += tick
                time.sleep(max(0.0, due - time.monotonic()))

    def stop(self) -> None:
        self._halt.set()
        if self.rate > 0:
            self._thread.join()
        self._conn.close()

    def behind_lsn(self, confirmed: int, now: float) -> float:
        """Seconds the oldest write past `confirmed` (pgcdc's confirmed LSN) has waited."""
        i = bisect.bisect_left(self.lsns, confirmed)
        return now - self.times[i] if i < len(self.times) else 0.0

    def behind_rows(self, visible: int, now: float) -> float:
        """Seconds the oldest write not within the first `visible` rows has waited."""
        i = bisect.bisect_right(self.totals, visible)
        return now - self.times[i] if i < len(self.times) else 0.0


def _bench_rows(events: list[dict[str, Any]], name: str) -> int:
    return sum(
        int(e["rows"])
        for e in events
        if e.get("event") == name and str(e.get("table", "")).split(".")[-1] == "bench"
    )


class _Discard:
    """A file-like COPY target that keeps nothing (/dev/null)."""

    def write(self, data: bytes | memoryview) -> int:
        return len(data)


def copy_ceiling(dsn: str) -> float:
    """Seconds one `COPY (SELECT * FROM bench) TO STDOUT (FORMAT binary)` takes into
    /dev/null over psycopg2 (the ceiling a snapshot reading the table by COPY has)."""
    conn = psycopg2.connect(dsn)
    try:
        with conn.cursor() as cur:
            started = time.monotonic()
            cur.copy_expert("COPY (SELECT * FROM bench) TO STDOUT (FORMAT binary)", _Discard())
            return time.monotonic() - started
    finally:
        conn.close()


def _print_timeline(events: list[dict[str, Any]], t0: float) -> None:
    """`--timeline`: the worker's events up to its first chunk read, each with the
    seconds since the spawn (where the start-up time goes)."""
    for e in events:
        at = _ts(e) - t0
        print(f"    {at:7.3f} s  {e.get('event')}", flush=True)
        if e.get("event") == "snapshot_chunk_read":
            break


def run_pgcdc(args: argparse.Namespace, system: str, pg: dict[str, Any]) -> Run:
    kafka, registry = ensure_service("kafka"), ensure_service("registry")
    method = "blocking" if system.startswith("pgcdc-blocking") else "chunked"
    readers = int(system.rsplit("-", 1)[1]) if system[-1].isdigit() else 1
    p = Pipeline(
        pg,
        kafka,
        registry,
        unique("svpgc"),
        extra_env={
            "PGCDC_SNAPSHOT__MODE": "initial",
            "PGCDC_SNAPSHOT__METHOD": method,
            "PGCDC_SNAPSHOT__PARALLELISM": str(readers),
            "PGCDC_SNAPSHOT__CHUNK_ROWS": str(args.chunk_rows),
            "PGCDC_LOG__LEVEL": "info",
            **dict(kv.split("=", 1) for kv in args.env),
        },
    )
    try:
        shape = SHAPES[args.table]
        # before the slot: the load's WAL is not decoded
        p.create([shape.table, WRITES_TABLE, *_fill(shape, args.rows)])
        ceiling = copy_ceiling(p.dsn)
        print(
            f"  {system}: COPY (SELECT * FROM bench) TO STDOUT (FORMAT binary) into /dev/null:"
            f" {args.rows / ceiling:,.0f} rows/s ({ceiling:.2f} s)",
            flush=True,
        )
        writes = Writes(p.dsn, args.write_rate)
        t0 = time.time()
        worker = p.start_worker()
        deadline = time.monotonic() + 3600
        cpu = hwm = behind_max = behind_run = 0.0
        sampled = 0.0
        streaming = False
        try:
            while not worker.has_event("snapshot_done"):
                if worker.proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"{system}: the worker stopped or timed out:\n{worker.tail()}")
                cpu, hwm = proc_cpu(worker.pid), proc_hwm_mb(worker.pid)
                if args.write_rate and time.monotonic() - sampled >= 0.5:
                    sampled = time.monotonic()
                    last = p.last_offset()
                    confirmed = last.confirmed_lsn if last is not None else 0
                    behind = writes.behind_lsn(confirmed, time.time())
                    behind_max = max(behind_max, behind)
                    streaming = streaming or bool(writes.lsns and confirmed > writes.lsns[0])
                    if streaming:
                        behind_run = max(behind_run, behind)
                time.sleep(0.2)
        finally:
            writes.stop()
        cpu, hwm = proc_cpu(worker.pid), proc_hwm_mb(worker.pid)
        behind_end = 0.0
        if args.write_rate:
            while True:
                last = p.last_offset()
                if last is not None and last.confirmed_lsn > writes.lsns[-1]:
                    behind_end = time.time() - writes.times[-1]
                    break
                if worker.proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"{system}: the stream did not catch up:\n{worker.tail()}")
                time.sleep(0.1)
        events = worker.events()
        if args.timeline:
            _print_timeline(events, t0)
        if method == "chunked":
            first = min(_ts(e) for e in events if e.get("event") == "snapshot_chunk_read")
            end = max(_ts(e) for e in events if e.get("event") == "snapshot_chunk_committed")
            got = _bench_rows(events, "snapshot_chunk_committed")
        else:
            done = next(e for e in events if e.get("event") == "snapshot_done")
            # `snapshot_table_done` logs each table's published rows; a missing count is
            # a defect of the worker, not zero rows.
            first, end, got = t0, _ts(done), _bench_rows(events, "snapshot_table_done")
        if got != args.rows:
            raise SystemExit(f"{system}: the snapshot published {got} rows, not {args.rows}")
        code = worker.terminate()
        if code != 0:
            print(f"  {system} exited {code}: {worker.tail(400)}", flush=True)
        load = os.getloadavg()[0]
        return Run(
            args.rows,
            end - t0,
            end - first,
            cpu,
            hwm,
            0.0,
            load,
            behind_max,
            behind_end,
            behind_run,
        )
    finally:
        p.drop(topics=True)


def run_debezium(args: argparse.Namespace, pg: dict[str, Any]) -> Run:
    kafka, registry = ensure_service("kafka"), ensure_service("registry")
    d = Debezium(pg, kafka, registry)
    shape = SHAPES[args.table]
    p = d.new_db(pgbench=False, tables=(shape.table, WRITES_TABLE))
    writes: Writes | None = None
    try:
        # Debezium's slot comes with the connector, after the load
        p.execute(*_fill(shape, args.rows))
        pid = d.pid()
        rss_before = proc_rss_mb(pid)
        c0 = proc_cpu(pid)
        topic, wtopic = d.topic("bench"), d.topic("bench_w")
        d.connector = f"svdbz-{p.name}"
        config = connector_config(pg, registry, p, "initial")
        writes = Writes(p.dsn, args.write_rate)
        behind_max = behind_run = 0.0
        t0 = time.time()
        http("PUT", f"{svc_connect.BASE}/connectors/{d.connector}/config", config)
        first = 0.0
        peak = rss_before
        deadline = time.monotonic() + 3600
        while True:
            n = end_offsets([topic], kafka["bootstrap"])
            now = time.time()
            peak = max(peak, proc_rss_mb(pid))
            if n and not first:
                first = now
            if args.write_rate:
                visible = end_offsets([wtopic], kafka["bootstrap"])
                behind = writes.behind_rows(visible, time.time())
                behind_max = max(behind_max, behind)
                if visible:
                    behind_run = max(behind_run, behind)
            if n >= args.rows:
                break
            if time.monotonic() > deadline:
                status = http("GET", f"{svc_connect.BASE}/connectors/{d.connector}/status")
                raise SystemExit(f"debezium: {n} of {args.rows} rows after an hour: {status}")
            time.sleep(0.2)
        writes.stop()
        behind_end = 0.0
        if args.write_rate:
            while end_offsets([wtopic], kafka["bootstrap"]) < writes.totals[-1]:
                if time.monotonic() > deadline:
                    raise SystemExit("debezium: the stream did not catch up")
                time.sleep(0.1)
            behind_end = time.time() - writes.times[-1]
        cpu = proc_cpu(pid) - c0
        load = os.getloadavg()[0]
        return Run(
            args.rows,
            now - t0,
            now - first,
            cpu,
            peak,
            rss_before,
            load,
            behind_max,
            behind_end,
            behind_run,
        )
    finally:
        if writes is not None:
            writes.stop()
        d.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pg", default="pg16")
    ap.add_argument("--rows", type=int, default=500_000)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--chunk-rows", type=int, default=20_000)
    ap.add_argument("--systems", default="pgcdc-1,pgcdc-2,debezium")
    ap.add_argument("--table", choices=sorted(SHAPES), default="narrow")
    ap.add_argument("--write-rate", type=int, default=0, help="rows/s into bench_w meanwhile")
    ap.add_argument(
        "--timeline", action="store_true", help="print pgcdc's start-up events, with times"
    )
    ap.add_argument("--keep-connect", action="store_true", help="leave Connect running")
    ap.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="PGCDC_X=V",
        help="a setting for the pgcdc workers (repeatable), beside the bench's own",
    )
    args = ap.parse_args()
    # SIGTERM ends the run through the `finally`s: connector, slots and databases go.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    systems = args.systems.split(",")
    pg = ensure_service(args.pg)
    started_connect = False
    if "debezium" in systems:
        connect = svc_connect.Connect()
        if not connect.healthy():
            connect.install()
            connect.start()
            connect.wait_healthy()
            started_connect = True
    print(
        f"PostgreSQL {pg['version']} ({args.pg}), {args.rows:,} rows of the {args.table} "
        f"table, write load {args.write_rate} rows/s, chunk_rows "
        f"{args.chunk_rows}, PGCDC_IMPL={os.environ.get('PGCDC_IMPL', '(default)')}, "
        f"load average at start {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    results: dict[str, list[Run]] = defaultdict(list)
    try:
        for rep in range(args.reps):
            for system in systems:
                r = run_debezium(args, pg) if system == "debezium" else run_pgcdc(args, system, pg)
                results[system].append(r)
                before = f" (before {r.rss_before_mb:.0f})" if system == "debezium" else ""
                print(
                    f"rep {rep + 1} {system:<15} {r.rate:>8,.0f} rows/s  snap {r.snap_rate:>8,.0f}"
                    f" rows/s  {r.seconds:6.1f} s  cpu {r.cpu:6.1f} s"
                    f" ({r.cpu_rate:,.0f} rows/cpu-s)  peak rss {r.rss_mb:5.0f} MB{before}"
                    f"  behind max {r.behind_max:.1f} s run {r.behind_run:.1f} s"
                    f" end {r.behind_end:.1f} s"
                    f"  load {r.load:.2f}",
                    flush=True,
                )
    finally:
        if started_connect and not args.keep_connect:
            svc_connect.Connect().stop()
    print(
        f"\nmedian (min-max) over {args.reps} repetitions, {args.rows:,} rows; "
        f"load average now {os.getloadavg()[0]:.2f}"
    )
    print(
        f"{'system':<16}{'rows/s':>24}{'snap rows/s':>24}{'CPU s':>22}"
        f"{'rows/CPU s':>24}{'peak RSS MB':>20}{'behind max s':>20}{'behind run s':>20}"
        f"{'behind end s':>20}"
        f"{'load':>20}"
    )
    for system in systems:
        rs = results[system]
        print(
            f"{system:<16}{fmt([r.rate for r in rs], ',.0f'):>24}"
            f"{fmt([r.snap_rate for r in rs], ',.0f'):>24}{fmt([r.cpu for r in rs], '.1f'):>22}"
            f"{fmt([r.cpu_rate for r in rs], ',.0f'):>24}"
            f"{fmt([r.rss_mb for r in rs], '.0f'):>20}"
            f"{fmt([r.behind_max for r in rs], '.1f'):>20}"
            f"{fmt([r.behind_run for r in rs], '.1f'):>20}"
            f"{fmt([r.behind_end for r in rs], '.1f'):>20}{fmt([r.load for r in rs], '.2f'):>20}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
