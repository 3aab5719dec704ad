"""spill_txns against a real test_decoding slot: PostgreSQL's flag rule, not distinct xids.

ReorderBufferSerializeTXN flags every (sub)transaction it visits with
RBTXN_IS_SERIALIZED, and a top-level transaction's spill visits all its known
subtransactions, written or empty; a later spill of a flagged one is not counted. The
workload makes the server show it: subtransaction `a` becomes known through its row
lock (the lock record carries the top-level xid, so ReorderBufferAssignChild runs) but
queues no change; inside it, subtransaction `b` pushes the buffer over the limit, the
top-level transaction is the largest and is spilled, with `b`, and `a` is flagged while
empty. Back in `a`, its own rows make it the largest and it is spilled: three xids
written, `spill_txns` = 2 on the server, and pgcdc must say the same.

(An integration test in tests/service because the reorder buffer's owner keeps it with
the unit and property tests of the same counter rule; it uses the shared vs-PG harness.)
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.reorderbuffer_vs_pg_support import Step, run_vs_pg

pytestmark = pytest.mark.integration

TABLES = [
    "CREATE TABLE small (id int, note text) WITH (autovacuum_enabled = off)",
    "CREATE TABLE big (id int) WITH (autovacuum_enabled = off)",
]

# 1 MB holds 7,943 rows of 132 bytes (80 + 24 + 28).
WORKLOAD = [
    Step("INSERT INTO small VALUES (1, 'one')"),
    Step(
        "BEGIN;"
        " INSERT INTO big SELECT g FROM generate_series(1, 7000) g;"
        " SAVEPOINT a;"
        " SELECT * FROM small FOR UPDATE;"  # a is known, and empty
        " SAVEPOINT b;"
        " INSERT INTO big SELECT g FROM generate_series(1, 2000) g;"  # top spilled, b too
        " RELEASE SAVEPOINT b;"
        " INSERT INTO big SELECT g FROM generate_series(1, 9000) g;"  # a spilled alone
        " RELEASE SAVEPOINT a;"
        " COMMIT",
        watch=True,
    ),
]


def test_empty_subtransaction_flagged_by_parent_spill(pg: dict[str, Any]) -> None:
    """Three xids spill but the server counts two in spill_txns; pgcdc's counters and
    output equal the server's."""
    r = run_vs_pg(pg, TABLES, WORKLOAD, work_mem_kb=1024)
    assert r.pgcdc_out.count == r.server_out.count == 3 + 2 + 18_000
    assert r.pgcdc_out.digest == r.server_out.digest
    assert r.spill_left == []
    assert r.server_stats["spill_txns"] == 2  # not 3: `a` was flagged while empty
    assert r.pgcdc_stats["spill_txns"] == 2
    # eviction: b and the top; eviction: a; commit: what a and b still hold
    assert r.pgcdc_stats["spill_count"] == 5
    assert r.pgcdc_stats["spill_bytes"] == 18_000 * 132  # every row, once
    for name in ("total_txns", "stream_txns", "stream_count"):
        assert r.pgcdc_stats[name] == r.server_stats[name], name
    if r.catalog_commits_in_watch == 0:
        for name in ("spill_count", "spill_bytes", "total_bytes"):
            assert r.pgcdc_stats[name] == r.server_stats[name], name
