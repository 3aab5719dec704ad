"""Benchmark (a script, not a test): update-heavy traffic on 8 KB documents, with
`toast.unchanged` = fill against = placeholder, and Debezium beside them (issue 32).

    PGCDC_PG_ROOT=... PGCDC_STATE_DIR=... python -m tests.perf.bench_toast_fill
        [--pg pg18] [--rows 2000] [--updates 20000] [--txn-rows 100] [--reps 1]
        [--systems placeholder,fill,debezium]

Per system and repetition, a fresh database on the shared services: `--rows` rows of
(id, n, doc jsonb of about 8 KB of random hex, stored out of line) are written before
the CDC system starts, so none of their chunks is in the WAL it reads. Then `--updates`
UPDATEs of n only, in transactions of `--txn-rows` rows, walking the ids round and
round: every UPDATE logs only the document's TOAST pointer.

- placeholder, fill: `python -m service.app.cli run` (snapshot.mode=never, the
  implementation PGCDC_IMPL selects) with that `toast.unchanged`. Fill reads each
  document once from the TOAST table (batched per transaction) and from its cache after.
- debezium: Debezium 3.6.1's PostgreSQL connector in the shared Kafka Connect
  (deploy/local/svc_connect.py; started here if it is not running, and left running:
  it is shared), configured as tests/perf/bench_vs_debezium.py does (pgoutput,
  snapshot.mode no_data, provide.transaction.metadata=true, Apicurio's AvroConverter).
  With the default REPLICA IDENTITY it publishes `__debezium_unavailable_value` for
  every unchanged TOAST value.

Reported per system: rows/s = updates / (first UPDATE -> every event readable: for
pgcdc the committed offset passing the last commit, i.e. readable by a read_committed
consumer; for Debezium, not transactional, the topic's end offsets reaching the count),
split into "write s" (the UPDATEs themselves, which share the 2 cores with the CDC
system, the broker and the TOAST reads) and "lag s" (the rest),
the worker's CPU seconds over that interval (/proc: utime + stime of pgcdc's process,
of the Connect JVM for Debezium; the JVM is shared, so other connectors running at the
same time would count too) and CPU µs per row, and, read back from the topic
(read_committed, raw bytes): the events, those carrying the placeholder, and the mean
value size. The load average is printed beside: the machine is shared.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from tests.fixtures.services import ensure_service
from tests.integration.pipeline_kafka_support import Pipeline, insert_lsn, unique
from tests.perf.bench_vs_debezium import TABLE, Debezium, svc_connect

PLACEHOLDER = b"__debezium_unavailable_value"  # as Avro writes the string: its bytes
_TICK = os.sysconf("SC_CLK_TCK")
SYSTEMS = ("placeholder", "fill", "debezium")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime


def create_docs(p: Pipeline, rows: int) -> None:
    """The database, `docs` with `rows` documents stored out of line, and (for
    Debezium's warm-up, tests/perf/bench_vs_debezium.Debezium.start) `bench`."""
    p.create(
        [
            "CREATE TABLE docs (id int PRIMARY KEY, n int NOT NULL, doc jsonb)",
            f"""INSERT INTO docs SELECT i, 0, jsonb_build_object('id', i, 'body',
                  (SELECT string_agg(md5(g::text || i::text), '')
                   FROM generate_series(1, 250) g))
                FROM generate_series(1, {rows}) i""",
            "VACUUM ANALYZE docs",
            TABLE,
        ]
    )


def update_docs(p: Pipeline, args: Any) -> tuple[int, int]:
    """The workload: (updates done, an LSN inside the last transaction, before its
    commit record: pgcdc's confirmed LSN passes it once that commit is published,
    whereas the insert LSN after the commit is passed only when more WAL follows)."""
    conn = p.connect()
    conn.autocommit = False
    done = end = 0
    with conn.cursor() as cur:
        while done < args.updates:
            lo = done % args.rows + 1
            hi = min(lo + args.txn_rows - 1, args.rows, lo + args.updates - done - 1)
            cur.execute("UPDATE docs SET n = n + 1 WHERE id BETWEEN %s AND %s", (lo, hi))
            end = insert_lsn(cur)
            conn.commit()
            done += hi - lo + 1
    conn.close()
    return done, end


def read_back(bootstrap: str, topic: str, expected: int) -> dict[str, float]:
    """Every record of `topic` (read_committed, from the start, until `expected` values
    or 60 s without one): values, those holding the placeholder, mean value bytes."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique("tbench-read"),
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    try:
        meta = c.list_topics(topic, timeout=10).topics[topic]
        c.assign([TopicPartition(topic, part, 0) for part in meta.partitions])
        events = holes = size = 0
        quiet = time.monotonic() + 60
        while events < expected and time.monotonic() < quiet:
            for msg in c.consume(1000, timeout=1.0):
                if msg.error() is not None or msg.value() is None:
                    continue
                value = msg.value()
                events += 1
                size += len(value)
                holes += PLACEHOLDER in value
                quiet = time.monotonic() + 60
        return {"events": events, "placeholders": holes, "value_bytes": size / max(events, 1)}
    finally:
        c.close()


def run_pgcdc(
    pg: dict[str, Any], kafka: dict[str, Any], registry: dict[str, Any], mode: str, args: Any
) -> dict[str, float]:
    p = Pipeline(pg, kafka, registry, unique(f"tbench{mode[:4]}"))
    p.extra_env.update({"PGCDC_TOAST__UNCHANGED": mode, "PGCDC_SNAPSHOT__MODE": "never"})
    try:
        create_docs(p, args.rows)
        worker = p.start_worker()
        worker.wait_ready(120)
        cpu0, t0 = cpu_seconds(worker.pid), time.monotonic()
        done, end = update_docs(p, args)
        written = time.monotonic()
        p.wait_confirmed(end - 1, 1800, worker)
        elapsed, cpu = time.monotonic() - t0, cpu_seconds(worker.pid) - cpu0
        worker.terminate()
        return {
            "rows_s": done / elapsed,
            "write_s": written - t0,
            "lag_s": t0 + elapsed - written,
            "cpu_s": cpu,
            "cpu_us_row": cpu / done * 1e6,
            **read_back(kafka["bootstrap"], p.topic("docs"), done),
        }
    finally:
        p.drop(topics=True)


def run_debezium(
    pg: dict[str, Any], kafka: dict[str, Any], registry: dict[str, Any], args: Any
) -> dict[str, float]:
    d = Debezium(pg, kafka, registry)
    d.p = p = Pipeline(pg, kafka, registry, unique("tbenchdbz"))
    try:
        create_docs(p, args.rows)
        d.start()  # its warm-up rows go to `bench`, not `docs`
        jvm = d.pid()
        cpu0, t0 = cpu_seconds(jvm), time.monotonic()
        done, end = update_docs(p, args)
        written = time.monotonic()
        caught_up = d.wait_caught_up(end, done, [d.topic("docs")])
        elapsed, cpu = caught_up - t0, cpu_seconds(jvm) - cpu0
        return {
            "rows_s": done / elapsed,
            "write_s": written - t0,
            "lag_s": caught_up - written,
            "cpu_s": cpu,
            "cpu_us_row": cpu / done * 1e6,
            **read_back(kafka["bootstrap"], d.topic("docs"), done),
        }
    finally:
        d.stop()  # drops the connector, its slot, then the database


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pg", default="pg18")
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--updates", type=int, default=20000)
    parser.add_argument("--txn-rows", type=int, default=100)
    parser.add_argument("--reps", type=int, default=1)
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    args = parser.parse_args()
    names = [n for n in SYSTEMS if n in args.systems.split(",")]
    pg, kafka, registry = (
        ensure_service(args.pg),
        ensure_service("kafka"),
        ensure_service("registry"),
    )
    if "debezium" in names:
        connect = svc_connect.Connect()
        if not connect.healthy():  # shared: started if need be, never stopped here
            connect.install()
            connect.start()
            connect.wait_healthy()
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    results: dict[str, list[dict[str, float]]] = {n: [] for n in names}
    for _ in range(args.reps):
        for name in names:
            r = (
                run_debezium(pg, kafka, registry, args)
                if name == "debezium"
                else run_pgcdc(pg, kafka, registry, name, args)
            )
            results[name].append(r)
            print(f"  {name}: {r} (load {os.getloadavg()[0]:.2f})", flush=True)
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(
        f"{args.pg}, {args.rows} rows of ~8 KB jsonb, {args.updates} updates "
        f"in {args.txn_rows}-row transactions, PGCDC_IMPL={os.environ.get('PGCDC_IMPL', '')}"
        f", median of {args.reps}"
    )
    print(
        f"{'system':<20}{'rows/s':>9}{'write s':>9}{'lag s':>7}{'CPU s':>8}{'CPU µs/row':>12}"
        f"{'events':>8}{'placeholders':>14}{'value B':>9}"
    )
    med = {
        n: {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        for n, runs in results.items()
    }
    labels = {
        "placeholder": "pgcdc placeholder",
        "fill": "pgcdc fill",
        "debezium": "Debezium 3.6.1",
    }
    for name, m in med.items():
        print(
            f"{labels[name]:<20}{m['rows_s']:>9.0f}{m['write_s']:>9.1f}{m['lag_s']:>7.1f}"
            f"{m['cpu_s']:>8.2f}{m['cpu_us_row']:>12.0f}"
            f"{m['events']:>8.0f}{m['placeholders']:>14.0f}{m['value_bytes']:>9.0f}"
        )
    for other in ("placeholder", "debezium"):
        if "fill" in med and other in med:
            ratio = med["fill"]["cpu_us_row"] / med[other]["cpu_us_row"]
            print(f"fill / {labels[other]} CPU per row: {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
