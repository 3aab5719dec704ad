"""Benchmark and proof at scale: the chunked snapshot of a large table (real services).

    .venv/bin/python -m tests.perf.bench_snapshot [--pg pg15] [--rows 500000]
        [--readers 1,2] [--chunk-rows 20000] [--prove] [--kills 10]
        [--method chunked|blocking]

Bench (default): one table of `--rows` rows (int8 key, int4, text, numeric(12,2),
timestamptz), snapshotted by `pgcdc run` with `snapshot.parallelism` = each of
`--readers`, idle source (`--method`: the initial snapshot's `snapshot.method`,
chunked by default; blocking is the shared-snapshot one). rows/s = rows / (first
chunk read until the snapshot's last chunk committed, from the worker's log); peak
RSS = the worker process's VmHWM.

Prove (`--prove`): the same table plus two small ones, a writer doing inserts, updates
and deletes throughout, `--kills` SIGKILLs of the worker at random points in the
middle of the snapshot; then prints reads, commits and retries of chunks, committed
chunks read again (must be 0), keys read twice (must be 0), whether the replayed
topics equal `SELECT *` for every table, and the largest stream lag (server WAL
position minus the committed offset) sampled during the snapshot.
"""

from __future__ import annotations

import argparse
import random
import time
from datetime import datetime
from typing import Any

from tests.fixtures.services import ensure_service
from tests.integration.avro_kafka_support import read_topics
from tests.integration.pipeline_kafka_support import Pipeline, WorkerProcess, insert_lsn, unique
from tests.integration.snapshot_chunked_support import Writer, reads_after_commit, replay


def _tables(rows: int) -> list[str]:
    return [
        "CREATE TABLE big (id bigint PRIMARY KEY, v int NOT NULL, note text, "
        "amount numeric(12,2), at timestamptz)",
        "INSERT INTO big SELECT g, g % 1000, 'label ' || g, (g % 100000) / 100.0, "
        f"'2024-01-01'::timestamptz + g * interval '1 second' FROM generate_series(1, {rows}) g",
        "CREATE TABLE s1 (id bigint PRIMARY KEY, v int NOT NULL, note text)",
        "INSERT INTO s1 SELECT g, g, 'pre' FROM generate_series(1, 5000) g",
        "CREATE TABLE s2 (id bigint PRIMARY KEY, v int NOT NULL, note text)",
        "INSERT INTO s2 SELECT g, g, 'pre' FROM generate_series(1, 2000) g",
        "ANALYZE",
    ]


def _ts(event: dict[str, Any]) -> float:
    return datetime.fromisoformat(str(event["timestamp"]).replace("Z", "+00:00")).timestamp()


def _hwm(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return 0
    return 0


def _wait_done(worker: WorkerProcess, timeout: float, on_tick: Any = None) -> int:
    """Wait for snapshot_done; return the worker's peak RSS seen."""
    peak = 0
    deadline = time.monotonic() + timeout
    while not worker.has_event("snapshot_done"):
        if worker.proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"worker stopped or timed out:\n{worker.tail()}")
        peak = max(peak, _hwm(worker.pid))
        if on_tick is not None:
            on_tick()
        time.sleep(0.5)
    return max(peak, _hwm(worker.pid))


def bench(args: argparse.Namespace, pg: dict[str, Any]) -> None:
    for readers in [int(r) for r in args.readers.split(",")]:
        env = {
            "PGCDC_SNAPSHOT__METHOD": args.method,
            "PGCDC_SNAPSHOT__PARALLELISM": str(readers),
            "PGCDC_SNAPSHOT__CHUNK_ROWS": str(args.chunk_rows),
            "PGCDC_SNAPSHOT__CHUNK_BYTES": "32MiB",
            "PGCDC_LOG__LEVEL": "info",
        }
        p = Pipeline(pg, ensure_service("kafka"), ensure_service("registry"), unique("bsnap"))
        p.extra_env = env
        try:
            p.create([*_tables(args.rows)[:2], "ANALYZE"])
            worker = p.start_worker()
            peak = _wait_done(worker, 3600)
            events = worker.events()
            first = min(_ts(e) for e in events if e.get("event") == "snapshot_chunk_read")
            last = max(_ts(e) for e in events if e.get("event") == "snapshot_chunk_committed")
            chunks = sum(1 for e in events if e.get("event") == "snapshot_chunk_committed")
            secs = last - first
            print(
                f"readers={readers} rows={args.rows} chunks={chunks} seconds={secs:.1f} "
                f"rows/s={args.rows / secs:,.0f} peak_rss={peak / 2**20:.0f}MiB",
                flush=True,
            )
            worker.terminate()
        finally:
            p.drop()


def prove(args: argparse.Namespace, pg: dict[str, Any]) -> None:
    rnd = random.Random(args.seed)
    p = Pipeline(pg, ensure_service("kafka"), ensure_service("registry"), unique("psnap"))
    p.extra_env = {
        "PGCDC_SNAPSHOT__METHOD": "chunked",
        "PGCDC_SNAPSHOT__PARALLELISM": "2",
        "PGCDC_SNAPSHOT__CHUNK_ROWS": str(args.chunk_rows),
    }
    try:
        p.create(_tables(args.rows))
        writer = Writer(p, {"s1": 5000, "s2": 2000})
        writer.start()
        big_writer = Writer(p, {"big": args.rows}, seed=args.seed + 1)
        big_writer.start()
        worker = p.start_worker()
        lags: list[int] = []
        peak = 0

        def sample() -> None:
            conn = p.connect()
            server = insert_lsn(conn.cursor())
            conn.close()
            last = p.last_offset()
            if last is not None:
                lags.append(server - last.confirmed_lsn)

        started = time.monotonic()
        for k in range(args.kills):
            committed = sum(
                1
                for w in p.workers
                for e in w.events()
                if e.get("event") == "snapshot_chunk_committed"
            )
            target = committed + rnd.randint(1, 6)
            while (
                sum(
                    1
                    for w in p.workers
                    for e in w.events()
                    if e.get("event") == "snapshot_chunk_committed"
                )
                < target
            ):
                if worker.has_event("snapshot_done"):
                    break
                peak = max(peak, _hwm(worker.pid))
                time.sleep(rnd.uniform(0.05, 0.5))
            if worker.has_event("snapshot_done"):
                print(f"snapshot finished before kill {k + 1}", flush=True)
                break
            worker.kill()
            print(f"kill {k + 1} at {time.monotonic() - started:.0f}s", flush=True)
            worker = p.start_worker()
        peak = max(peak, _wait_done(worker, 7200, sample))
        time.sleep(2)
        writer.stop.set()
        big_writer.stop.set()
        writer.join(30)
        big_writer.join(30)
        conn = p.connect()
        end = insert_lsn(conn.cursor())
        conn.close()
        p.wait_confirmed(end - 1, 600, worker)
        again, reads, commits = reads_after_commit(p.workers)
        retries = sum(
            1 for w in p.workers for e in w.events() if e.get("event") == "snapshot_chunk_retry"
        )
        print(
            f"rows={args.rows} kills={len(p.workers) - 1} chunk reads={reads} commits={commits} "
            f"retries={retries} committed chunks read again={len(again)} "
            f"writer commits={writer.commits + big_writer.commits}",
            flush=True,
        )
        for t in ("big", "s1", "s2"):
            reads_t = read_topics(p.settings(), [p.topic(t)], timeout_s=600)
            state, twice, nr = replay(reads_t)
            rows = p.query(f"SELECT id, v, note FROM {t}")
            expected = {r[0]: (r[1], r[2]) for r in rows}
            got = {k: (v["v"], v["note"]) for k, v in state.items()}
            print(
                f"{t}: r events={nr} keys read twice={len(twice)} "
                f"topic equals SELECT: {got == expected} ({len(expected)} rows)",
                flush=True,
            )
        print(
            f"max stream lag during the snapshot: {max(lags or [0]) / 2**20:.1f} MiB "
            f"({len(lags)} samples); worker peak RSS {peak / 2**20:.0f} MiB",
            flush=True,
        )
        worker.terminate()
    finally:
        p.drop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pg", default="pg15")
    ap.add_argument("--rows", type=int, default=500_000)
    ap.add_argument("--readers", default="1,2")
    ap.add_argument("--chunk-rows", type=int, default=20_000)
    ap.add_argument("--prove", action="store_true")
    ap.add_argument("--kills", type=int, default=10)
    ap.add_argument("--method", choices=["chunked", "blocking"], default="chunked")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    pg = ensure_service(args.pg)
    if args.prove:
        prove(args, pg)
    else:
        bench(args, pg)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
