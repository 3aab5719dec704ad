"""Benchmark (a script, not a test): update-heavy traffic on 8 KB documents, with
`toast.unchanged` = fill against = placeholder (issue 32).

    PGCDC_PG_ROOT=... PGCDC_STATE_DIR=... python -m tests.perf.bench_toast_fill
        [--pg pg18] [--rows 2000] [--updates 20000] [--txn-rows 100] [--reps 1]

Per mode and repetition, a fresh database and worker (`python -m service.app.cli run`,
snapshot.mode=never, the implementation PGCDC_IMPL selects) on the shared services:
`--rows` rows of (id, n, doc jsonb of about 8 KB of random hex, stored out of line) are
written before the worker starts, so none of their chunks is in the WAL it reads. Then
`--updates` UPDATEs of n only, in transactions of `--txn-rows` rows, walking the ids
round and round: every UPDATE logs only the document's TOAST pointer. Fill reads each
document once from the TOAST table (batched per transaction) and from its cache after.

Reported per mode: rows/s = updates / (first UPDATE -> the committed offset passing the
last commit, i.e. readable by a read_committed consumer), the worker's CPU seconds over
that interval (/proc: utime + stime) and CPU µs per row, and the events' placeholders
(read back from Kafka: fill must have none, placeholder mode one per event). The load
average is printed beside: the machine is shared.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path
from typing import Any

from tests.fixtures.services import ensure_service
from tests.integration.pipeline_kafka_support import Pipeline, insert_lsn, read_all, unique

PLACEHOLDER = "__debezium_unavailable_value"
_TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime


def run_once(
    pg: dict[str, Any], kafka: dict[str, Any], registry: dict[str, Any], mode: str, args: Any
) -> dict[str, float]:
    p = Pipeline(pg, kafka, registry, unique(f"tbench{mode[:4]}"))
    p.extra_env.update({"PGCDC_TOAST__UNCHANGED": mode, "PGCDC_SNAPSHOT__MODE": "never"})
    try:
        p.create(
            [
                "CREATE TABLE docs (id int PRIMARY KEY, n int NOT NULL, doc jsonb)",
                f"""INSERT INTO docs SELECT i, 0, jsonb_build_object('id', i, 'body',
                      (SELECT string_agg(md5(g::text || i::text), '')
                       FROM generate_series(1, 250) g))
                    FROM generate_series(1, {args.rows}) i""",
                "VACUUM ANALYZE docs",
            ]
        )
        worker = p.start_worker()
        worker.wait_ready(120)
        conn = p.connect()
        conn.autocommit = False
        cpu0, t0 = cpu_seconds(worker.pid), time.monotonic()
        done = 0
        with conn.cursor() as cur:
            while done < args.updates:
                lo = done % args.rows + 1
                hi = min(lo + args.txn_rows - 1, args.rows, lo + args.updates - done - 1)
                cur.execute("UPDATE docs SET n = n + 1 WHERE id BETWEEN %s AND %s", (lo, hi))
                conn.commit()
                done += hi - lo + 1
            end = insert_lsn(cur)
        conn.commit()
        conn.close()
        p.wait_confirmed(end, 1800, worker)
        elapsed, cpu = time.monotonic() - t0, cpu_seconds(worker.pid) - cpu0
        events = [
            r.value
            for r in read_all(p.settings(), [p.topic("docs")], timeout_s=300)
            if r.value is not None and r.value["op"] == "u"
        ]
        holes = sum(1 for ev in events if ev["after"]["doc"] == PLACEHOLDER)
        worker.terminate()
        return {
            "rows_s": done / elapsed,
            "cpu_s": cpu,
            "cpu_us_row": cpu / done * 1e6,
            "events": len(events),
            "placeholders": holes,
        }
    finally:
        p.drop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pg", default="pg18")
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--updates", type=int, default=20000)
    parser.add_argument("--txn-rows", type=int, default=100)
    parser.add_argument("--reps", type=int, default=1)
    args = parser.parse_args()
    pg, kafka, registry = (
        ensure_service(args.pg),
        ensure_service("kafka"),
        ensure_service("registry"),
    )
    results: dict[str, list[dict[str, float]]] = {"placeholder": [], "fill": []}
    for _ in range(args.reps):
        for mode, runs in results.items():
            runs.append(run_once(pg, kafka, registry, mode, args))
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(
        f"{args.pg}, {args.rows} rows of ~8 KB jsonb, {args.updates} updates "
        f"in {args.txn_rows}-row transactions, PGCDC_IMPL={os.environ.get('PGCDC_IMPL', '')}"
    )
    print(
        f"{'mode':<12}{'rows/s':>10}{'CPU s':>9}{'CPU µs/row':>12}{'events':>8}{'placeholders':>14}"
    )
    for mode, runs in results.items():
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        print(
            f"{mode:<12}{med['rows_s']:>10.0f}{med['cpu_s']:>9.2f}{med['cpu_us_row']:>12.0f}"
            f"{med['events']:>8.0f}{med['placeholders']:>14.0f}"
        )
    fill, ph = (
        statistics.median(r["cpu_us_row"] for r in results[m]) for m in ("fill", "placeholder")
    )
    print(f"fill / placeholder CPU per row: {fill / ph:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
