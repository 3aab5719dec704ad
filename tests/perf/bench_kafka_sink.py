"""Benchmark: rows/s through AvroPlugin + KafkaSink into real Kafka (with Apicurio).

    .venv/bin/python -m tests.perf.bench_kafka_sink [ROWS] [ROWS_PER_TXN]

Default: 100,000 rows in 1,000-row source transactions, 5 columns (int8 key, int4,
text, numeric(12,2), timestamptz), max_batch_txns from the settings default (100).
Prints the serialization-only rate (plugin writing into a list), then the full rate
(plugin + transactional sink, committed: the clock stops after the last
commit_transaction), Kafka transactions committed, and bytes written.
"""

from __future__ import annotations

import datetime as dt
import sys
import time
from decimal import Decimal

from service.output.api import (
    ChangeOp,
    ColumnValue,
    OutputRecord,
    PluginContext,
    PluginWrapper,
    RelationInfo,
    RowChange,
    TxnInfo,
)
from tests.fixtures.services import ensure_service
from tests.integration.avro_kafka_support import (
    Harness,
    col,
    constant,
    make_settings,
    text_of,
    unique,
)

REL = RelationInfo(
    18000,
    "public",
    "bench",
    "d",
    ("id",),
    (
        col("id", 20, 1, notnull=True),
        col("n", 23, 2),
        col("label", 25, 3),
        col("amount", 1700, 4, typmod=((12 << 16) | 2) + 4),
        col("at", 1184, 5),
    ),
    defined_at=1,
)
T0 = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)


def make_rows(n: int) -> list[RowChange]:
    out = []
    for i in range(n):
        vals = (i, i % 1000, f"label {i}", Decimal(i) / 100, T0 + dt.timedelta(seconds=i))
        row = [
            ColumnValue(c.name, c.type_oid, c.type_name, constant(v), text_of(None))
            for c, v in zip(REL.columns, vals, strict=True)
        ]
        out.append(RowChange(ChangeOp.INSERT, 0x1000 + i, REL, row, None, False))
    return out


def drive(wrapper: PluginWrapper, rows: list[RowChange], per_txn: int, end_txn: object) -> None:
    for t, start in enumerate(range(0, len(rows), per_txn)):
        chunk = rows[start : start + per_txn]
        end = 0x1000 + start + per_txn + 16
        info = TxnInfo(10_000 + t, chunk[0].lsn, end - 16, end, 0, None)
        wrapper.call("begin", info.first_lsn, info.xid, info)
        for ch in chunk:
            wrapper.call("change", ch.lsn, info.xid, info, ch)
        wrapper.call("commit", info.final_lsn, info.xid, info, info.final_lsn)
        if callable(end_txn):
            end_txn(end)


def main(argv: list[str]) -> int:
    n = int(argv[0]) if argv else 100_000
    per_txn = int(argv[1]) if len(argv) > 1 else 1_000
    kafka, registry = ensure_service("kafka"), ensure_service("registry")
    settings = make_settings(kafka, registry, unique("bench"), unique("slot"))

    # 1. Plugin only: Avro serialization into a list (registry contacted once).
    sink_list: list[OutputRecord] = []
    h0 = Harness(settings)
    h0.wrapper = PluginWrapper(
        h0.plugin, PluginContext("s", "avro", {}, lambda _l, _x, d: sink_list.append(d))
    )
    h0.wrapper.startup(True)
    rows = make_rows(n)
    drive(h0.wrapper, rows[:per_txn], per_txn, None)  # warm-up: registration
    sink_list.clear()
    rows = make_rows(n)
    t = time.perf_counter()
    drive(h0.wrapper, rows, per_txn, None)
    plugin_s = time.perf_counter() - t
    size = sum(r.size for r in sink_list)
    h0.wrapper.shutdown()

    # 2. Plugin + transactional sink into Kafka.
    h = Harness(settings)
    h.start()
    drive(h.wrapper, rows[:per_txn], per_txn, lambda end: h.sink.end_source_txn(end, end, 1))
    h.sink.flush()
    base_txns = h.sink.kafka_txns
    rows = make_rows(n)
    t = time.perf_counter()
    drive(h.wrapper, rows, per_txn, lambda end: h.sink.end_source_txn(end, end, 1))
    h.sink.flush()
    total_s = time.perf_counter() - t
    kafka_txns = h.sink.kafka_txns - base_txns
    h.close()

    print(f"rows={n} rows_per_txn={per_txn} source_txns={n // per_txn}")
    print(
        f"plugin only (Avro + registry serializer): {n / plugin_s:,.0f} rows/s "
        f"({plugin_s:.2f} s, {size / n:.0f} B/record)"
    )
    print(
        f"plugin + transactional sink, committed:   {n / total_s:,.0f} rows/s "
        f"({total_s:.2f} s, {kafka_txns} Kafka transactions, {size / total_s / 1e6:.1f} MB/s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
