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
  agrees. A transaction with a base snapshot but no output line does count: a DDL,
  an ANALYZE (catalog inserts carry no tuple for decoding, but heap_decode calls
  SnapBuildProcessChange before looking), a change to a shared catalog only (CREATE
  and DROP ROLE: database 0, yet the commit is this database's). pgcdc counts them
  too (the subtransaction test has one of each).
- `spill_txns` counts a (sub)transaction when ReorderBufferSerializeTXN writes for it
  and it is not flagged serialized yet (a parent's spill flags its subtransactions
  even when empty, see test_reorderbuffer_spill_txns_vs_pg.py); `spill_count` counts
  each write, including the final one at
  commit (ReorderBufferIterTXNInit serializes what is still in memory);
  `spill_bytes` the accounted size written. With 1 MB and narrow rows only the big
  transaction exceeds the limit, and both sides make the same number of spills of the
  same size because pgcdc's change size is ReorderBufferChangeSize's (80 + 24 + t_len
  for an insert).
- `total_bytes` is the accounted size of every change replayed. It is equal for DML;
  a DDL transaction differs, because PostgreSQL also buffers the transaction's catalog
  row changes (with no tuple data), command-id and invalidation changes, which pgcdc's
  schema history handles outside the reorder buffer.
- When a transaction with catalog changes commits in *any* database while the large
  transaction is open, PostgreSQL queues a new catalog snapshot into it
  (SnapBuildDistributeNewCatalogSnapshot: 80 bytes + sizeof(SnapshotData) + 4 per xid),
  so its spill_bytes and total_bytes grow by that much (and spill_count may move by
  one; with a rolled-back subtransaction the shifted eviction points also change how
  much of it was spilled before the rollback); pgcdc needs no such change. Other
  people's DDL on the shared server can do that at any time, so the harness counts
  catalog-changing commits inside the large transaction's WAL, and the size counters
  are compared exactly only when there was none; one test provokes one on purpose.

The sizes are kept small for CI (100,000 rows under 1 MB); the 1,000,000-row version is
tests/perf/bench_reorderbuffer_vs_pg.py.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from service.impl import selected
from tests.integration.reorderbuffer_vs_pg_support import (
    Result,
    Step,
    run_vs_pg,
    run_vs_pg_quiet,
    small_and_large,
)

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


def _assert_sizes(r: Result, *, exact_total_bytes: bool) -> None:
    """spill_count, spill_bytes (and total_bytes for DML-only runs): equal, unless a
    catalog snapshot was queued into the large transaction on the server."""
    names = ["spill_count", "spill_bytes"] + (["total_bytes"] if exact_total_bytes else [])
    if r.catalog_commits_in_watch == 0:
        for name in names:
            assert r.pgcdc_stats[name] == r.server_stats[name], name
        return
    extra = r.server_stats["spill_bytes"] - r.pgcdc_stats["spill_bytes"]
    assert abs(extra) < 64 * 1024 and extra % 4 == 0
    assert abs(r.server_stats["spill_count"] - r.pgcdc_stats["spill_count"]) <= 1


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
    r = run_vs_pg_quiet(pg, TABLES, [*small_and_large(200, rows), *NOT_COUNTED], work_mem_kb=1024)
    _assert_common(r)
    assert r.server_out.count == 200 * 3 + rows + 2
    assert r.server_stats["total_txns"] == 201
    assert r.server_stats["spill_txns"] == 1
    for name in ("total_txns", "spill_txns"):
        assert r.pgcdc_stats[name] == r.server_stats[name], name
    # 100,000 x 132 bytes over a 1 MB limit: 12 evictions, then the rest at commit
    assert r.pgcdc_stats["spill_count"] == 13
    assert r.pgcdc_stats["spill_bytes"] == rows * (80 + 24 + 28)
    _assert_sizes(r, exact_total_bytes=True)
    # The native reader hands the large transaction's inserts on in InsertRuns
    # (Decoding.process_run): the counters above are those of the run path.
    if selected() == "native":
        assert r.run_changes >= rows * 0.9
    else:
        assert r.run_changes == 0


def test_toasted_rows_spill_with_their_chunks(pg: dict[str, Any]) -> None:
    """One 1,500-row transaction of 5 KB values stored out of line, uncompressed (three
    TOAST chunk inserts before each row, each a change of its own size), under 1 MB:
    every counter equals the server's, spills included, and the text lines (each value
    reassembled from its chunks) are the server's. The native reader hands the chunks
    on inside the InsertRuns of their rows (ReorderBufferToastAppendChunk's input)."""
    rows = 1_500
    tables = [
        *TABLES,
        "CREATE TABLE doc (id int, body text)"
        " WITH (autovacuum_enabled = off, toast.autovacuum_enabled = off)",
        "ALTER TABLE doc ALTER COLUMN body SET STORAGE EXTERNAL",
    ]
    workload = [
        Step("INSERT INTO small VALUES (1, 'one')"),
        Step(
            "INSERT INTO doc SELECT g, repeat(md5(g::text), 160)"
            f" FROM generate_series(1, {rows}) g",
            watch=True,
        ),
        *NOT_COUNTED,
    ]
    r = run_vs_pg_quiet(pg, tables, workload, work_mem_kb=1024)
    _assert_common(r)
    assert r.server_out.count == 3 + rows + 2
    for name in ("total_txns", "spill_txns"):
        assert r.pgcdc_stats[name] == r.server_stats[name], name
    assert r.pgcdc_stats["spill_txns"] == 1 and r.pgcdc_stats["spill_count"] > 5
    # spill_count and spill_bytes equal; total_bytes does not, in either PGCDC_IMPL, and
    # did not before chunks joined runs: the server frees each value's chunk changes at
    # ReorderBufferToastReset (their size leaves txn->total_size before
    # ReorderBufferProcessTXN adds it to totalBytes, and each restore adds only the
    # batch's remaining txn->size), while pgcdc counts every replayed change.
    _assert_sizes(r, exact_total_bytes=False)
    assert r.pgcdc_stats["total_bytes"] > r.server_stats["total_bytes"]
    if selected() == "native":
        # 5,120 bytes in chunks of at most 1,996: 3 per row; the first row's chunks
        # precede the run (a chunk never starts one), and a run ends at a slice's end
        assert r.run_chunks >= rows * 3 * 0.9
        assert r.run_changes >= rows * 4 * 0.9
    else:
        assert r.run_changes == r.run_chunks == 0


def test_subtransactions_and_transactions_without_output(pg: dict[str, Any]) -> None:
    """A large transaction with a released and a rolled-back subtransaction (each
    spilled), and a DDL, an ANALYZE and a shared-catalog-only transaction: total_txns
    and spill_txns equal the server's, with subtransactions counted in spill_txns as
    PostgreSQL counts them and the three output-less transactions counted (on 18 the
    server skips spilling the already-aborted subxact, see below)."""
    role = f"rbpg_role_{uuid.uuid4().hex[:8]}"
    workload = [
        *small_and_large(20, 60_000, savepoint=True),
        Step("CREATE TABLE ddl_only (a int)"),
        Step("ANALYZE small"),
        Step(f"BEGIN; CREATE ROLE {role}; DROP ROLE {role}; COMMIT"),
        *NOT_COUNTED,
    ]
    r = run_vs_pg(pg, TABLES, workload, work_mem_kb=1024)
    _assert_common(r)
    assert r.server_stats["total_txns"] == r.pgcdc_stats["total_txns"] == 20 + 1 + 3
    # the ANALYZE and the roles (the DDL queued the DDL capture's logical message)
    assert len(r.counted_without_rows) == 2
    # top-level, kept and rolled-back subxacts
    assert r.pgcdc_stats["spill_txns"] == 3
    if pg["version"] >= 18:
        # PG18's ReorderBufferCheckMemoryLimit asks the CLOG before evicting
        # (ReorderBufferCheckAndTruncateAbortedTXN): the rolled-back subxact, already
        # aborted on the live server when the slot decodes it, is truncated instead of
        # spilled. pgcdc knows of the abort only from the WAL it has read, so it
        # spills that subxact as 15..17 do: one spill_txns and its bytes apart.
        assert r.server_stats["spill_txns"] == 2
        dropped = r.pgcdc_stats["spill_bytes"] - r.server_stats["spill_bytes"]
        assert dropped > 0
        if r.catalog_commits_in_watch == 0:  # else a queued catalog snapshot adds bytes
            assert dropped % (80 + 24 + 28) == 0
        assert r.server_stats["spill_count"] < r.pgcdc_stats["spill_count"]
    else:
        assert r.server_stats["spill_txns"] == 3
        _assert_sizes(r, exact_total_bytes=False)
    # PostgreSQL also buffers the DDL's catalog, command-id and invalidation changes.
    assert 0 < r.server_stats["total_bytes"] - r.pgcdc_stats["total_bytes"] < 64 * 1024


def test_catalog_snapshot_queued_by_another_database(pg: dict[str, Any]) -> None:
    """A DDL committed in another database while the large transaction is open makes
    the server queue a catalog snapshot into it: its spill_bytes and total_bytes exceed
    pgcdc's by exactly that change's size (80 + 120 + 4 per xid on PG15), while
    total_txns and spill_txns stay equal."""
    rows = 60_000
    workload = [
        Step("INSERT INTO small VALUES (1, 'one')"),
        Step(f"BEGIN; INSERT INTO big SELECT g FROM generate_series(1, {rows // 2}) g", watch=True),
        Step("CREATE TABLE interloper (a int)", db="other", watch=True),
        Step(
            f"INSERT INTO big SELECT g FROM generate_series(1, {rows // 2}) g; COMMIT", watch=True
        ),
    ]
    r = run_vs_pg_quiet(pg, TABLES, workload, work_mem_kb=1024)
    _assert_common(r)
    assert r.catalog_commits_in_watch >= 1
    assert r.pgcdc_stats["total_txns"] == r.server_stats["total_txns"] == 2
    assert r.pgcdc_stats["spill_txns"] == r.server_stats["spill_txns"] == 1
    assert r.pgcdc_stats["spill_bytes"] == rows * (80 + 24 + 28)  # all of it, at the end
    extra = r.server_stats["spill_bytes"] - r.pgcdc_stats["spill_bytes"]
    assert extra >= 80 + 120 and extra % 4 == 0
    assert r.server_stats["total_bytes"] - r.pgcdc_stats["total_bytes"] == extra
    assert abs(r.server_stats["spill_count"] - r.pgcdc_stats["spill_count"]) <= 1


def test_a_transaction_the_workload_did_not_make_is_rerun_then_refused(
    pg15: dict[str, Any],
) -> None:
    """run_vs_pg_quiet tells a counted row-less transaction from the workload's own (here
    an ANALYZE standing in for autovacuum's): each run is warned about with its WAL
    records, and when every run has one the harness fails instead of comparing."""
    workload = [Step("INSERT INTO small VALUES (1, 'one')"), Step("ANALYZE small")]
    with (
        pytest.warns(UserWarning, match=r"run \d of 2 .* did not make") as seen,
        pytest.raises(AssertionError, match="every run had") as failed,
    ):
        run_vs_pg_quiet(pg15, TABLES, workload, work_mem_kb=1024, attempts=2)
    assert len(seen) == 2
    message = str(failed.value)
    assert "desc: COMMIT" in message and "desc: INSERT" in message, message


def test_updates_and_deletes_spill_as_the_server_counts(pg: dict[str, Any]) -> None:
    """One transaction that updates a 20,000-row REPLICA IDENTITY FULL table whole (an
    old and a new tuple per change), updates a keyed table whole (new tuples) and
    deletes it (old keys), over a 1 MB limit: every counter equals the server's, and
    under the native core nearly all its changes were queued in runs (InsertRows of
    updates, with and without old tuples, and of deletes)."""
    rows = 20_000
    tables = [
        *TABLES,  # NOT_COUNTED writes into `small`
        "CREATE TABLE updf (id int, note text) WITH (autovacuum_enabled = off)",
        "ALTER TABLE updf REPLICA IDENTITY FULL",
        "CREATE TABLE updk (id int PRIMARY KEY, note text) WITH (autovacuum_enabled = off)",
    ]
    workload = [
        Step(f"INSERT INTO updf SELECT g, 'f' || g FROM generate_series(1, {rows}) g"),
        Step(f"INSERT INTO updk SELECT g, 'k' || g FROM generate_series(1, {rows}) g"),
        # watched: a commit with catalog changes anywhere on the shared server meanwhile
        # queues a catalog snapshot into it on the server's side (`_assert_sizes`)
        Step(
            "BEGIN; UPDATE updf SET note = note || '!'; UPDATE updk SET note = note || '?';"
            " DELETE FROM updk; COMMIT",
            watch=True,
        ),
        *NOT_COUNTED,
    ]
    r = run_vs_pg_quiet(pg, tables, workload, work_mem_kb=1024)
    _assert_common(r)
    assert r.server_stats["spill_txns"] >= 1
    for name in ("total_txns", "spill_txns"):
        assert r.pgcdc_stats[name] == r.server_stats[name], name
    _assert_sizes(r, exact_total_bytes=True)
    if selected() == "native":
        assert r.run_changes >= 3 * rows * 0.9
    else:
        assert r.run_changes == 0


def test_deleted_toasted_rows_spill_as_the_server_counts(pg: dict[str, Any]) -> None:
    """One transaction deletes 3,000 keyed rows whose 5 KB values are stored out of line
    (after each row's DELETE, toast_delete's DELETEs of its three chunks: no old tuple
    logged), then deletes keyed rows and rows of a REPLICA IDENTITY NOTHING table in
    turn, over a 1 MB limit: every counter equals the server's, spills and total_bytes
    included, and the text lines are the server's. Under the native core the chunk
    deletes join the runs of their rows' deletes (bare deletes, `InsertRows.chunks`:
    each a change with no tuple, 80 bytes) and are dropped at replay as a toast
    relation's; the other table's bare deletes join runs too, and are replayed one by
    one, each printed as test_decoding prints a DELETE without an old tuple."""
    rows, pairs = 3_000, 3_000
    tables = [
        *TABLES,
        "CREATE TABLE docd (id int PRIMARY KEY, body text)"
        " WITH (autovacuum_enabled = off, toast.autovacuum_enabled = off)",
        "ALTER TABLE docd ALTER COLUMN body SET STORAGE EXTERNAL",
        "CREATE TABLE keyed (id int PRIMARY KEY) WITH (autovacuum_enabled = off)",
        "CREATE TABLE nokey (id int PRIMARY KEY) WITH (autovacuum_enabled = off)",
        "ALTER TABLE nokey REPLICA IDENTITY NOTHING",
        # before the slot: the server's total_bytes leaves out the chunks of toasted
        # inserts (test_toasted_rows_spill_with_their_chunks), pgcdc's does not
        f"INSERT INTO docd SELECT g, repeat(md5(g::text), 160) FROM generate_series(1, {rows}) g",
        f"INSERT INTO keyed SELECT generate_series(1, {pairs})",
        f"INSERT INTO nokey SELECT generate_series(1, {pairs})",
    ]
    workload = [
        Step(
            "BEGIN; DELETE FROM docd;"
            f" DO $$ BEGIN FOR i IN 1..{pairs} LOOP"
            " DELETE FROM keyed WHERE id = i; DELETE FROM nokey WHERE id = i;"
            " END LOOP; END $$; COMMIT",
            watch=True,
        ),
        *NOT_COUNTED,
    ]
    r = run_vs_pg_quiet(pg, tables, workload, work_mem_kb=1024)
    _assert_common(r)
    # the deletes' BEGIN, rows and COMMIT; no line of NOT_COUNTED's
    assert r.server_out.count == rows + 2 * pairs + 2
    assert r.server_stats["spill_txns"] >= 1
    for name in ("total_txns", "spill_txns"):
        assert r.pgcdc_stats[name] == r.server_stats[name], name
    _assert_sizes(r, exact_total_bytes=True)
    if selected() == "native":
        # 5,120 bytes in chunks of at most 1,996: 3 chunk deletes per row, and one bare
        # delete of `nokey` after each of `keyed`'s
        assert r.run_chunks >= (rows * 3 + pairs) * 0.9
        assert r.run_changes >= (rows * 4 + pairs * 2) * 0.9
    else:
        assert r.run_changes == r.run_chunks == 0


def test_updated_toasted_values_spill_as_the_server_counts(pg: dict[str, Any]) -> None:
    """One transaction replaces the 5 KB out-of-line value of 1,500 keyed rows (per row:
    the three TOAST chunk inserts of the new value, then toast_tuple_cleanup's three
    chunk deletes of the old one, no old tuple logged, then the UPDATE), over a 1 MB
    limit: spill_count and spill_bytes equal the server's, and the lines (each new value
    reassembled from its chunks) are test_decoding's. Under the native core the chunk
    inserts and deletes join the runs of the rows' updates (`InsertRows.chunks`, of
    which `bares` are the deletes); total_bytes differs as for toasted inserts
    (test_toasted_rows_spill_with_their_chunks)."""
    rows = 1_500
    tables = [
        *TABLES,
        "CREATE TABLE docu (id int PRIMARY KEY, body text)"
        " WITH (autovacuum_enabled = off, toast.autovacuum_enabled = off)",
        "ALTER TABLE docu ALTER COLUMN body SET STORAGE EXTERNAL",
        f"INSERT INTO docu SELECT g, repeat(md5(g::text), 160) FROM generate_series(1, {rows}) g",
    ]
    workload = [
        Step("UPDATE docu SET body = repeat(md5((-id)::text), 160)", watch=True),
        *NOT_COUNTED,
    ]
    r = run_vs_pg_quiet(pg, tables, workload, work_mem_kb=1024)
    _assert_common(r)
    assert r.server_out.count == rows + 2
    assert r.server_stats["spill_txns"] >= 1
    for name in ("total_txns", "spill_txns"):
        assert r.pgcdc_stats[name] == r.server_stats[name], name
    _assert_sizes(r, exact_total_bytes=False)
    if selected() == "native":
        # the first row's chunks precede its run (a chunk never starts one); a run
        # ends at a slice's end
        assert r.run_chunks >= rows * 6 * 0.9
        assert r.run_changes >= rows * 7 * 0.9
    else:
        assert r.run_changes == r.run_chunks == 0
