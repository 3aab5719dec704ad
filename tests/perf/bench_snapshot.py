"""Benchmark and proof at scale: the chunked snapshot of a large table (real services).

    .venv/bin/python -m tests.perf.bench_snapshot [--pg pg15] [--rows 500000]
        [--readers 1,2] [--chunk-rows 20000] [--prove] [--kills 10] [--writer-pause 0.003]
        [--method chunked|blocking]

Bench (default): one table of `--rows` rows (int8 key, int4, text, numeric(12,2),
timestamptz), snapshotted by `pgcdc run` with `snapshot.parallelism` = each of
`--readers`, idle source (`--method`: the initial snapshot's `snapshot.method`,
chunked by default; blocking is the shared-snapshot one). rows/s = rows / (first
chunk read until the snapshot's last chunk committed, from the worker's log); peak
RSS = the worker process's VmHWM.

Prove (`--prove`): the same table plus two small ones, two writers (one on the small
tables, one on the big one) doing inserts, updates and deletes throughout, 1-4 per
transaction with `--writer-pause` seconds between transactions, `--kills` SIGKILLs of
the worker at random points spread over the whole snapshot (distinct committed-chunk
counts drawn from the expected number of chunks, each plus a random 0-4 s delay);
then prints reads, commits and retries of chunks, committed chunks read again (must
be 0), keys read twice (must be 0), whether the replayed topics equal `SELECT *` for
every table (replayed while consuming, so a 5M-row topic needs memory for the state
only), and the largest stream lag (server WAL position minus the committed offset)
sampled every 2 s during the snapshot.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import signal
import struct
import sys
import time
import urllib.request
from datetime import datetime
from typing import Any

import fastavro
from confluent_kafka import Consumer, KafkaError, TopicPartition

from tests.fixtures.services import ensure_service
from tests.integration.pipeline_kafka_support import (
    Pipeline,
    WorkerProcess,
    insert_lsn,
    unique,
)
from tests.integration.snapshot_chunked_support import Writer, reads_after_commit


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


def _committed(workers: list[WorkerProcess]) -> int:
    return sum(
        1 for w in workers for e in w.events() if e.get("event") == "snapshot_chunk_committed"
    )


def replay_topic(
    p: Pipeline, topic: str, idle_s: float = 600.0
) -> tuple[dict[int, tuple[Any, Any]], int, int, int]:
    """(id -> (v, note), keys read twice, r events, events) of one table topic.

    The same replay as `snapshot_chunked_support.replay` (r/c/u set the row, d removes
    it, a key read as r twice is counted), applied while consuming (read_committed, from
    the start to the end offsets taken first), so memory holds the state only, not
    millions of decoded envelopes. Values are Confluent-framed Avro (magic byte, schema
    id): decoded by fastavro with the writer schema fetched once per id from the
    registry's ccompat API.
    """
    consumer = Consumer(
        {
            "bootstrap.servers": p.kafka["bootstrap"],
            "group.id": unique("replay"),
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    schemas: dict[int, Any] = {}
    state: dict[int, tuple[Any, Any]] = {}
    read: set[int] = set()
    twice = nr = events = 0
    try:
        pending: set[tuple[str, int]] = set()
        parts = []
        for part in consumer.list_topics(topic, timeout=10).topics[topic].partitions:
            low, high = consumer.get_watermark_offsets(
                TopicPartition(topic, part), timeout=10, cached=False
            )
            if high > low:
                parts.append(TopicPartition(topic, part, 0))
                pending.add((topic, part))
        consumer.assign(parts)
        last = time.monotonic()
        while pending:
            msgs = consumer.consume(5000, 1.0)
            if not msgs and time.monotonic() - last > idle_s:
                raise SystemExit(f"{topic}: nothing read for {idle_s:.0f}s; {pending} pending")
            for msg in msgs:
                err = msg.error()
                if err is not None:
                    if err.code() != KafkaError._PARTITION_EOF:
                        raise SystemExit(f"{topic}: {err.str()}")
                    pending.discard((str(msg.topic()), int(msg.partition() or 0)))
                    continue
                last = time.monotonic()
                raw = msg.value()
                if raw is None:
                    continue  # a tombstone after a delete
                events += 1
                _, schema_id = struct.unpack(">bI", raw[:5])
                schema = schemas.get(schema_id)
                if schema is None:
                    url = f"{p.registry['url']}/schemas/ids/{schema_id}"
                    with urllib.request.urlopen(url, timeout=30) as resp:
                        text = json.loads(resp.read())["schema"]
                    schema = schemas[schema_id] = fastavro.parse_schema(json.loads(text))
                value = fastavro.schemaless_reader(io.BytesIO(raw[5:]), schema)
                op = value["op"]
                row = value["before"] if op == "d" else value["after"]
                key = row["id"]
                if op == "d":
                    state.pop(key, None)
                    continue
                if op == "r":
                    nr += 1
                    if key in read:
                        twice += 1
                    read.add(key)
                state[key] = (row["v"], row["note"])
        return state, twice, nr, events
    finally:
        consumer.close()


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
            p.drop(topics=True)


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
        writer = Writer(p, {"s1": 5000, "s2": 2000}, pause_s=args.writer_pause)
        writer.start()
        big_writer = Writer(p, {"big": args.rows}, seed=args.seed + 1, pause_s=args.writer_pause)
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
        next_sample = next_report = 0.0

        def tick() -> None:
            nonlocal next_sample, next_report, peak
            peak = max(peak, _hwm(worker.pid))
            now = time.monotonic()
            if now >= next_sample:
                sample()
                next_sample = now + 2.0
            if now >= next_report:
                next_report = now + 60.0
                print(
                    f"  at {now - started:.0f}s: {_committed(p.workers)} chunks committed, "
                    f"lag {(lags[-1] if lags else 0) / 2**20:.1f} MiB, "
                    f"load {os.getloadavg()[0]:.2f}",
                    flush=True,
                )

        # Kill points spread over the whole snapshot: distinct committed-chunk counts
        # drawn from the expected number of chunks, each followed by a random delay
        # (up to about one chunk's read) so the kill lands in a different phase of the
        # readers' and the worker's work every time.
        expected = max(args.kills + 1, args.rows // args.chunk_rows + 2)
        targets = sorted(rnd.sample(range(1, expected), args.kills))
        for k, target in enumerate(targets):
            while _committed(p.workers) < target and not worker.has_event("snapshot_done"):
                if worker.proc.poll() is not None:
                    raise SystemExit(f"worker exited by itself:\n{worker.tail()}")
                tick()
                time.sleep(0.5)
            if worker.has_event("snapshot_done"):
                print(f"snapshot finished before kill {k + 1}", flush=True)
                break
            delay = rnd.uniform(0.0, 4.0)
            deadline = time.monotonic() + delay
            while time.monotonic() < deadline:
                tick()
                time.sleep(min(0.5, max(0.0, deadline - time.monotonic())))
            worker.kill()
            print(
                f"kill {k + 1} at {time.monotonic() - started:.0f}s, after {_committed(p.workers)} "
                f"committed chunks (target {target} + {delay:.1f}s), "
                f"load {os.getloadavg()[0]:.2f}",
                flush=True,
            )
            worker = p.start_worker()
        peak = max(peak, _wait_done(worker, 7200, tick))
        print(
            f"snapshot done at {time.monotonic() - started:.0f}s, load {os.getloadavg()[0]:.2f}",
            flush=True,
        )
        time.sleep(2)
        writer.stop.set()
        big_writer.stop.set()
        writer.join(30)
        big_writer.join(30)
        for w in (writer, big_writer):
            if w.error is not None:
                raise SystemExit(f"the writer failed: {w.error!r}")
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
            t0 = time.monotonic()
            got, twice, nr, events = replay_topic(p, p.topic(t))
            expected_rows = {r[0]: (r[1], r[2]) for r in p.query(f"SELECT id, v, note FROM {t}")}
            missing = len(expected_rows.keys() - got.keys())
            extra = len(got.keys() - expected_rows.keys())
            differ = sum(1 for k, v in got.items() if k in expected_rows and expected_rows[k] != v)
            print(
                f"{t}: events={events} r events={nr} keys read twice={twice} "
                f"topic equals SELECT: {got == expected_rows} ({len(expected_rows)} rows; "
                f"missing {missing}, extra {extra}, differing {differ}; "
                f"checked in {time.monotonic() - t0:.0f}s)",
                flush=True,
            )
            del got, expected_rows
        print(
            f"max stream lag during the snapshot: {max(lags or [0]) / 2**20:.1f} MiB "
            f"({len(lags)} samples); worker peak RSS {peak / 2**20:.0f} MiB",
            flush=True,
        )
        worker.terminate()
    finally:
        p.drop(topics=True)


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
    ap.add_argument(
        "--writer-pause", type=float, default=0.003, help="seconds between a writer's transactions"
    )
    args = ap.parse_args()
    # SIGTERM ends the run through the `finally`s: the slot and the database are dropped
    # (a background job ignores SIGINT).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    pg = ensure_service(args.pg)
    if args.prove:
        prove(args, pg)
    else:
        bench(args, pg)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
