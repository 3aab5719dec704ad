"""The reorder buffer's slot-stats counters against a real test_decoding slot (issue 4).

One workload runs on the server; a test_decoding slot decodes it with
`logical_decoding_work_mem` set on its own session, and pgcdc decodes the same WAL with
`work_mem` equal to it. Then the slot's row of `pg_stat_replication_slots` is compared
with `ReorderBuffer.stats`, and the two text outputs line for line (by digest).

What PostgreSQL counts, so that the workloads compare like with like:

- `total_txns` is incremented in ReorderBufferProcessTXN only, i.e. for a transaction
  that commits in the slot's database with a base snapshot. A transaction of another
  database is forgotten at its commit (DecodeTXNNeedSkip), an xid with no decodable
  change has no base snapshot (ReorderBufferReplay returns early), an abort is never
  replayed: none of them counts, and the workload has one of each to prove pgcdc
  agrees. A transaction with changes but no output line (DDL, filtered changes) does
  count, and pgcdc counts it too (the DDL case below).
- `spill_txns` counts a (sub)transaction the first time ReorderBufferSerializeTXN
  writes something for it; `spill_count` each such write, including the final one at
  commit (ReorderBufferIterTXNInit serializes what is still in memory);
  `spill_bytes` the accounted size written. With 1 MB and narrow rows only the big
  transaction exceeds the limit, and both sides make the same number of spills of the
  same size because pgcdc's change size is ReorderBufferChangeSize's (80 + 24 + t_len
  for an insert).
- `total_bytes` is the accounted size of every change replayed. It is equal for DML;
  a DDL transaction differs, because PostgreSQL also buffers the transaction's catalog
  row changes (with no tuple data), command-id and invalidation changes, which pgcdc's
  schema history handles outside the reorder buffer.

The sizes are kept small for CI (100,000 rows under 1 MB); the 1,000,000-row version is
tests/perf/bench_reorderbuffer_vs_pg.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.reorderbuffer_vs_pg_support import Result, Step, run_vs_pg, small_and_large

pytestmark = pytest.mark.integration

TABLES = [
    # autovacuum off: no autoanalyze transaction may land in the compared WAL range
    "CREATE TABLE small (id int, note text) WITH (autovacuum_enabled = off)",
    "CREATE TABLE big (id int) WITH (autovacuum_enabled = off)",
]

# Transactions neither side may count in total_txns.
NOT_COUNTED = [
    Step("BEGIN; SELECT txid_current(); COMMIT"),  # an xid, no change: no base snapshot
    Step("BEGIN; INSERT INTO small VALUES (-1, 'rolled back'); ROLLBACK"),
    Step("INSERT INTO small VALUES (-2, 'other database')", db="other"),
]


def _assert_common(r: Result) -> None:
    assert r.pgcdc_out.count == r.server_out.count
    assert r.pgcdc_out.digest == r.server_out.digest
    # PG15+ write slot stats to shared memory during the call: no flush lag.
    assert r.server_stats_at_once == r.server_stats
    # the bound of issue 4: work_mem plus one change, whatever the transaction size
    assert r.peak_memory <= r.work_mem + r.largest_change
    assert r.peak_memory >= r.work_mem  # the limit was reached, so the bound was tested
    assert r.spill_left == []
    for name in ("stream_txns", "stream_count", "stream_bytes"):
        assert r.server_stats[name] == r.pgcdc_stats[name] == 0


def test_many_small_and_one_large_transaction(pg: dict[str, Any]) -> None:
    """200 one-row transactions and one 100,000-row transaction under 1 MB: every
    counter equals the server's, and only the large transaction spilled."""
    rows = 100_000
    r = run_vs_pg(pg, TABLES, [*small_and_large(200, rows), *NOT_COUNTED], work_mem_kb=1024)
    _assert_common(r)
    assert r.server_out.count == 200 * 3 + rows + 2
    assert r.server_stats["total_txns"] == 201
    assert r.server_stats["spill_txns"] == 1
    # 100,000 x 132 bytes over a 1 MB limit: 12 evictions, then the rest at commit
    assert r.server_stats["spill_count"] == 13
    assert r.pgcdc_stats == r.server_stats


def test_subtransactions_and_ddl(pg15: dict[str, Any]) -> None:
    """A large transaction with a released and a rolled-back subtransaction (each
    spilled), plus a DDL-only transaction: total_txns and the spill counters equal the
    server's, with subtransactions counted in spill_txns as PostgreSQL counts them."""
    workload = [
        *small_and_large(20, 60_000, savepoint=True),
        Step("CREATE TABLE ddl_only (a int)"),
        *NOT_COUNTED,
    ]
    r = run_vs_pg(pg15, TABLES, workload, work_mem_kb=1024)
    _assert_common(r)
    assert r.server_stats["total_txns"] == 20 + 1 + 1
    assert r.server_stats["spill_txns"] == 3  # top-level, kept and rolled-back subxacts
    for name in ("total_txns", "spill_txns", "spill_count", "spill_bytes"):
        assert r.pgcdc_stats[name] == r.server_stats[name], name
    # PostgreSQL also buffers the DDL's catalog, command-id and invalidation changes.
    assert 0 < r.server_stats["total_bytes"] - r.pgcdc_stats["total_bytes"] < 10_000
