"""Benchmark: end to end, PostgreSQL commit -> `pgcdc run` -> Kafka commit (real services).

    .venv/bin/python -m tests.perf.bench_end_to_end [--pg pg15] [--rows 1000000]
        [--txn-rows 10000] [--pgbench-s 30] [--rate 200] [--latency-s 30]
        [--only bulk,single,pgbench,latency]

The worker is a subprocess (`python -m service.app.cli run`, settings from `PGCDC_*`
variables, `snapshot.mode=never`, default `work_mem` 64MB), already streaming when a
workload starts. Figures:

- **bulk / single**: `--rows` rows (int8 key, int4, text, numeric(12,2), timestamptz)
  inserted in `--txn-rows`-row transactions, then as one transaction. rows/s = rows /
  (time from the workload's first statement until the worker's committed offset passes
  the last source commit, polled every 0.2 s); "after commit" is how long after the last
  source COMMIT returned the Kafka commit was seen.
- **pgbench**: `pgbench -i` (scale 1, before the worker starts), then `pgbench -T
  --pgbench-s -c 4`; events/s (4 row changes per TPC-B transaction) the same way.
- **latency**: single-row transactions at `--rate`/s for `--latency-s` seconds; a
  read_committed consumer in this process measures, per event, receive time minus the
  event's `source.ts_ms` (the commit time), and Kafka's record timestamp (producer
  CreateTime) minus `source.ts_ms`; p50/p99/max.

Beside each workload PostgreSQL's own decoder runs on the same WAL: a `test_decoding`
slot is created in the database before the workload and, after pgcdc has published
everything, `pg_logical_slot_get_changes` is timed (rows/s over the same rows).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import threading
import time
from collections.abc import Callable

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.fixtures.services import ensure_service
from tests.integration.pipeline_kafka_support import (
    Pipeline,
    WorkerProcess,
    insert_lsn,
    unique,
)

TABLE = (
    "CREATE TABLE bench (id bigint PRIMARY KEY, n int, label text, "
    "amount numeric(12,2), at timestamptz)"
)
INSERT = (
    "INSERT INTO bench SELECT g, g % 1000, 'label ' || g, (g % 100000) / 100.0, "
    "'2024-01-01'::timestamptz + g * interval '1 second' "
    "FROM generate_series({a}, {b}) g"
)


def wait_published(
    p: Pipeline, after_lsn: int, worker: WorkerProcess, timeout: float = 1800.0
) -> float:
    """Poll the committed offset until it passes `after_lsn`; the monotonic time seen."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        last = p.last_offset()
        if last is not None and last.confirmed_lsn > after_lsn:
            return time.monotonic()
        if worker.proc.poll() is not None:
            raise RuntimeError(f"worker exited {worker.proc.returncode}:\n{worker.tail()}")
        time.sleep(0.2)
    raise RuntimeError(f"not published within {timeout}s:\n{worker.tail()}")


class PgDecoder:
    """A test_decoding slot created before a workload, drained and timed after it."""

    def __init__(self, p: Pipeline) -> None:
        self.p = p
        self.name = unique("td_")
        p.execute(f"SELECT pg_create_logical_replication_slot('{self.name}', 'test_decoding')")

    def drain(self) -> tuple[int, float]:
        """(change lines, seconds) for pg_logical_slot_get_changes over everything."""
        conn = self.p.connect()
        try:
            with conn.cursor() as cur:
                t0 = time.monotonic()
                cur.execute(
                    "SELECT count(*) FILTER (WHERE data LIKE 'table %%') "
                    "FROM pg_logical_slot_get_changes(%s, NULL, NULL)",
                    (self.name,),
                )
                lines = int(cur.fetchone()[0])
                elapsed = time.monotonic() - t0
                cur.execute("SELECT pg_drop_replication_slot(%s)", (self.name,))
        finally:
            conn.close()
        return lines, elapsed


def start(p: Pipeline) -> WorkerProcess:
    worker = p.start_worker()
    worker.wait_ready(120)
    deadline = time.monotonic() + 60
    while p.last_offset() is None:
        if time.monotonic() > deadline:
            raise RuntimeError(f"no first offset:\n{worker.tail()}")
        time.sleep(0.2)
    return worker


def report(
    name: str, rows: int, seconds: float, after_commit: float, pg: tuple[int, float]
) -> None:
    pg_rows, pg_s = pg
    print(
        f"{name:<28} {rows:>9,} rows  pgcdc {rows / seconds:>9,.0f} rows/s "
        f"({seconds:6.1f} s, Kafka commit {after_commit:5.1f} s after the last source "
        f"commit)   test_decoding {pg_rows / pg_s:>9,.0f} rows/s ({pg_s:5.1f} s, "
        f"{pg_rows:,} rows)",
        flush=True,
    )


def bench_inserts(p: Pipeline, worker: WorkerProcess, rows: int, per_txn: int, name: str) -> None:
    decoder = PgDecoder(p)
    base = int(p.query("SELECT coalesce(max(id), 0) FROM bench")[0][0])
    conn = p.connect()
    cur = conn.cursor()
    t0 = time.monotonic()
    for a in range(base + 1, base + rows + 1, per_txn):
        cur.execute("BEGIN")
        cur.execute(INSERT.format(a=a, b=min(a + per_txn - 1, base + rows)))
        last = insert_lsn(cur)
        cur.execute("COMMIT")
    t_src = time.monotonic()
    conn.close()
    t_kafka = wait_published(p, last, worker)
    report(name, rows, t_kafka - t0, t_kafka - t_src, decoder.drain())


def bench_pgbench(p: Pipeline, worker: WorkerProcess, seconds: int) -> None:
    pgbench = f"{p.pg['bin']}/pgbench"
    args = ["-h", str(p.pg["host"]), "-p", str(p.pg["port"]), "-U", str(p.pg["user"])]
    decoder = PgDecoder(p)
    t0 = time.monotonic()
    out = subprocess.run(
        [pgbench, *args, "-T", str(seconds), "-c", "4", "-j", "2", "-n", p.db],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    t_src = time.monotonic()
    txns = next(
        int(line.split(":")[1])
        for line in out.splitlines()
        if line.startswith("number of transactions actually processed")
    )
    tps = next(
        line.split("=")[1].split("(")[0].strip()
        for line in out.splitlines()
        if line.startswith("tps")
    )
    last = int(p.query("SELECT pg_current_wal_insert_lsn() - '0/0'::pg_lsn")[0][0])
    p.execute("INSERT INTO bench VALUES (-1, 0, 'pgbench end', 0, now())")
    t_kafka = wait_published(p, last, worker)
    report(
        f"pgbench -c4 ({txns:,} txns, {tps} tps)",
        4 * txns,
        t_kafka - t0,
        t_kafka - t_src,
        decoder.drain(),
    )


def bench_latency(p: Pipeline, worker: WorkerProcess, rate: int, seconds: int) -> None:
    topic = p.topic("bench")
    base = int(p.query("SELECT coalesce(max(id), 0) FROM bench")[0][0]) + 1
    conn = p.connect()
    cur = conn.cursor()
    cur.execute("INSERT INTO bench VALUES (%s, 0, 'warm-up', 0, now())", (base,))
    wait_published(p, insert_lsn(cur), worker)  # the topic exists, the schema is known
    consumer = Consumer(
        {
            "bootstrap.servers": p.kafka["bootstrap"],
            "group.id": unique("lat"),
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    parts = []
    for part in consumer.list_topics(topic, timeout=10).topics[topic].partitions:
        high = consumer.get_watermark_offsets(
            TopicPartition(topic, part), timeout=10, cached=False
        )[1]
        parts.append(TopicPartition(topic, part, high))
    consumer.assign(parts)
    registry = SchemaRegistryClient({"url": p.registry["url"]})
    deser = AvroDeserializer(registry)
    ctx = SerializationContext(topic, MessageField.VALUE)
    received: list[tuple[float, int]] = []  # (receive time, Kafka record timestamp)
    stop = threading.Event()
    samples: list[bytes] = []

    def consume() -> None:
        while not stop.is_set():
            for msg in consumer.consume(500, 0.1):
                value = msg.value()
                if msg.error() is None and value is not None:
                    received.append((time.time(), msg.timestamp()[1]))
                    samples.append(value)

    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    n = rate * seconds
    t0 = time.monotonic()
    behind = 0.0
    for i in range(n):
        due = t0 + i / rate
        now = time.monotonic()
        if due > now:
            time.sleep(due - now)
        else:
            behind = max(behind, now - due)
        cur.execute("INSERT INTO bench VALUES (%s, 1, 'latency', 1.00, now())", (base + 1 + i,))
    conn.close()
    deadline = time.monotonic() + 120
    while len(received) < n and time.monotonic() < deadline:
        time.sleep(0.2)
    stop.set()
    thread.join(10)
    consumer.close()
    commit_ms = [deser(raw, ctx)["source"]["ts_ms"] for raw in samples]
    registry.close()
    if len(received) < n:
        raise RuntimeError(f"only {len(received)} of {n} events arrived")
    e2e = sorted(rt * 1000 - c for (rt, _), c in zip(received, commit_ms, strict=True))
    produce = sorted(float(ts - c) for (_, ts), c in zip(received, commit_ms, strict=True))

    def pct(xs: list[float], q: float) -> float:
        return xs[min(len(xs) - 1, int(q * len(xs)))]

    print(
        f"latency at {rate} txn/s x {seconds} s ({n:,} single-row txns, the driver at most "
        f"{behind * 1000:.0f} ms behind schedule):\n"
        f"  source commit -> read_committed consumer: p50 {pct(e2e, 0.5):.0f} ms, "
        f"p99 {pct(e2e, 0.99):.0f} ms, max {e2e[-1]:.0f} ms, mean "
        f"{statistics.fmean(e2e):.0f} ms\n"
        f"  source commit -> record produced (CreateTime): p50 {pct(produce, 0.5):.0f} ms, "
        f"p99 {pct(produce, 0.99):.0f} ms",
        flush=True,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pg", default="pg15", choices=["pg15", "pg18"])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--txn-rows", type=int, default=10_000)
    parser.add_argument("--pgbench-s", type=int, default=30)
    parser.add_argument("--rate", type=int, default=200)
    parser.add_argument("--latency-s", type=int, default=30)
    parser.add_argument("--work-mem", default="64MB")
    parser.add_argument("--only", default="bulk,single,pgbench,latency")
    args = parser.parse_args()
    only = set(args.only.split(","))
    pg = ensure_service(args.pg)
    p = Pipeline(
        pg,
        ensure_service("kafka"),
        ensure_service("registry"),
        unique("bench"),
        work_mem=args.work_mem,
        heartbeat_s=1.0,
        extra_env={"PGCDC_SNAPSHOT__MODE": "never", "PGCDC_LOG__LEVEL": "warning"},
    )
    try:
        p.create([TABLE])
        if "pgbench" in only:
            subprocess.run(
                [
                    f"{pg['bin']}/pgbench",
                    "-h",
                    str(pg["host"]),
                    "-p",
                    str(pg["port"]),
                    "-U",
                    str(pg["user"]),
                    "-i",
                    "-q",
                    p.db,
                ],
                capture_output=True,
                check=True,
            )
        p.extra_env["PGCDC_LOG__LEVEL"] = "info"
        print(f"PostgreSQL {pg['version']}, work_mem {args.work_mem}", flush=True)
        scenarios: list[tuple[str, Callable[[WorkerProcess], None]]] = [
            (
                "bulk",
                lambda w: bench_inserts(
                    p, w, args.rows, args.txn_rows, f"{args.rows:,} rows, {args.txn_rows:,}/txn"
                ),
            ),
            (
                "single",
                lambda w: bench_inserts(p, w, args.rows, args.rows, f"{args.rows:,} rows, one txn"),
            ),
            ("pgbench", lambda w: bench_pgbench(p, w, args.pgbench_s)),
            ("latency", lambda w: bench_latency(p, w, args.rate, args.latency_s)),
        ]
        for name, run in scenarios:
            if name not in only:
                continue
            # A worker per scenario (resuming from the offsets), so one scenario's
            # aftermath does not weigh on the next; a worker that did not stop cleanly
            # is reported.
            worker = start(p)
            run(worker)
            code = worker.terminate()
            if code != 0:
                print(
                    f"  the worker exited {code} after {name}: "
                    f"{worker.tail(600).strip().splitlines()[-1]}",
                    flush=True,
                )
    finally:
        p.drop(topics=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
