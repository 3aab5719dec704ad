"""Table rewrites decoded long after they happened: never stuck, line for line.

TRUNCATE, CLUSTER and VACUUM FULL fire no event trigger: pgcdc learns which relation
their new relfilenodes belong to from the pg_class rows they write, rebuilt off the WAL
(`service.schema.pgclass`), never from the live catalog, which no longer knows a table
dropped or rewritten again since. Each workload here runs to its end before pgcdc
decodes any of it (no DRAIN: a worker stopped during the workload and started after),
and test_decoding, reading the same WAL through a logical slot, is the judge: every
line must be equal, on 15, 16, 17 and 18, and the rows written after each rewrite must
be among them. The same through `pgcdc run` into Kafka is
tests/integration/test_rewrites_kafka.py.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Any

import psycopg2
import pytest
import structlog.testing

from tests.integration.decoding_support import compare

pytestmark = pytest.mark.integration

T1 = "CREATE TABLE t1 (id int PRIMARY KEY, data text)"
FIVE = "INSERT INTO t1 SELECT g, 'row ' || g FROM generate_series(1, 5) g"
AFTER = "table public.t1: INSERT: id[integer]:100 data[text]:'after'"

# The workloads: each statement its own transaction, a rewrite then a DROP (or
# a second rewrite) before pgcdc decodes any of it.
VARIANTS: dict[str, list[str]] = {
    "cluster_drop": [
        FIVE,
        "CLUSTER t1 USING t1_pkey",
        "INSERT INTO t1 VALUES (100, 'after')",
        "DROP TABLE t1",
    ],
    "vacuum_full_drop": [
        FIVE,
        "VACUUM FULL t1",
        "INSERT INTO t1 VALUES (100, 'after')",
        "DROP TABLE t1",
    ],
    "truncate_drop": [
        FIVE,
        "TRUNCATE t1",
        "INSERT INTO t1 VALUES (100, 'after')",
        "DROP TABLE t1",
    ],
    "truncate_twice": [
        FIVE,
        "BEGIN; TRUNCATE t1; INSERT INTO t1 VALUES (100, 'after'); COMMIT",
        "INSERT INTO t1 VALUES (101, repeat('long ', 2000))",
        "TRUNCATE t1",
        "INSERT INTO t1 VALUES (102, 'last')",
    ],
    "vacuum_full_twice": [
        FIVE,
        "VACUUM FULL t1",
        "INSERT INTO t1 VALUES (100, 'after')",
        "VACUUM FULL t1",
        "INSERT INTO t1 VALUES (101, 'last')",
    ],
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_rewrite_then_drop_decoded_afterwards(pg: dict[str, Any], variant: str) -> None:
    """The issue's five variants (CLUSTER, VACUUM FULL, TRUNCATE followed by DROP;
    TRUNCATE twice; VACUUM FULL twice), decoded only after all of them: equal to
    test_decoding, with the row inserted after the rewrite printed (once stopped the
    worker at the same LSN on every restart)."""
    out = compare(pg, [T1], VARIANTS[variant])
    assert out.actual == out.expected
    assert AFTER in out.expected
    assert sum("table public.t1: INSERT" in line for line in out.expected) >= 6


@pytest.mark.parametrize("two_phase", [False, True])
def test_cluster_in_prepared_transaction_decoded_afterwards(
    pg: dict[str, Any], two_phase: bool
) -> None:
    """CLUSTER, then inserts, inside a prepared transaction, committed later, then the
    table dropped, all before pgcdc decodes: decoded at COMMIT PREPARED (or at PREPARE
    with two-phase decoding), the inserts after the swap are the table's, the
    rewrite's own output is not printed. (VACUUM FULL cannot run inside a transaction
    block, so it has no prepared form.)"""
    out = compare(
        pg,
        [T1, "CREATE TABLE other (id int PRIMARY KEY)"],
        [
            FIVE,
            "BEGIN; CLUSTER t1 USING t1_pkey; INSERT INTO t1 VALUES (100, 'after');"
            " PREPARE TRANSACTION 'pgcdc_cl'",
            "INSERT INTO other VALUES (200)",  # beside it: t1 stays locked until COMMIT
            "COMMIT PREPARED 'pgcdc_cl'",
            "INSERT INTO t1 VALUES (300, 'later')",
            "DROP TABLE t1",
        ],
        two_phase=two_phase,
    )
    assert out.actual == out.expected
    assert AFTER in out.expected
    assert any("300" in line for line in out.expected)


def test_alter_type_rewrite_decoded_afterwards(pg: dict[str, Any]) -> None:
    """A rewriting ALTER TABLE ... TYPE between inserts, the table dropped after: the
    rewrite's heap inserts are not printed, the rows before and after it are, each with
    its own column type."""
    with structlog.testing.capture_logs() as logs:
        out = compare(
            pg,
            [T1],
            [
                FIVE,
                "ALTER TABLE t1 ALTER COLUMN id TYPE bigint",
                "INSERT INTO t1 VALUES (100, 'after')",
                "TRUNCATE t1",
                "INSERT INTO t1 VALUES (101, 'last')",
                "DROP TABLE t1",
            ],
        )
    assert out.actual == out.expected
    assert "table public.t1: INSERT: id[bigint]:100 data[text]:'after'" in out.expected
    # The rewrite's five heap inserts were dropped, and said so once, not per row.
    skipped = [e for e in logs if e["event"] == "rewrite_changes_skipped"]
    assert len(skipped) == 1, skipped


def test_truncate_partition_decoded_afterwards(pg: dict[str, Any]) -> None:
    """TRUNCATE of one partition, and of the partitioned table, between inserts, the
    whole dropped after: every partition's rows are printed under its own name."""
    out = compare(
        pg,
        [
            "CREATE TABLE pt (id int, k int, PRIMARY KEY (id, k)) PARTITION BY RANGE (k)",
            "CREATE TABLE pt1 PARTITION OF pt FOR VALUES FROM (0) TO (10)",
            "CREATE TABLE pt2 PARTITION OF pt FOR VALUES FROM (10) TO (20)",
        ],
        [
            "INSERT INTO pt SELECT g, g % 20 FROM generate_series(1, 8) g",
            "TRUNCATE pt1",
            "INSERT INTO pt VALUES (100, 1), (101, 11)",
            "TRUNCATE pt",
            "INSERT INTO pt VALUES (102, 2)",
            "DROP TABLE pt",
        ],
    )
    assert out.actual == out.expected
    assert "table public.pt1: INSERT: id[integer]:100 k[integer]:1" in out.expected
    assert "table public.pt1: INSERT: id[integer]:102 k[integer]:2" in out.expected


@pytest.fixture
def tablespace(pg: dict[str, Any]) -> Any:
    """A tablespace in a fresh directory owned by the server's OS user, dropped after."""
    pgdata = Path(pg["pgdata"])
    where = Path(tempfile.mkdtemp(prefix="pgcdc-ts-", dir=pgdata.parent))
    st = os.stat(pgdata)
    os.chown(where, st.st_uid, st.st_gid)
    name = f"ts_{uuid.uuid4().hex[:8]}"
    admin = psycopg2.connect(host=pg["host"], port=pg["port"], user=pg["user"], dbname="postgres")
    admin.autocommit = True
    admin.cursor().execute(f"CREATE TABLESPACE {name} LOCATION '{where}'")
    try:
        yield name
    finally:
        admin.cursor().execute(f"DROP TABLESPACE IF EXISTS {name}")
        admin.close()
        shutil.rmtree(where, ignore_errors=True)


def test_set_tablespace_decoded_afterwards(pg: dict[str, Any], tablespace: str) -> None:
    """ALTER TABLE ... SET TABLESPACE there and back, a TRUNCATE in the other tablespace,
    inserts between, the table dropped after: the rows in each tablespace are printed."""
    out = compare(
        pg,
        [T1],
        [
            FIVE,
            f"ALTER TABLE t1 SET TABLESPACE {tablespace}",
            "INSERT INTO t1 VALUES (100, 'after')",
            "TRUNCATE t1",
            "INSERT INTO t1 VALUES (101, 'there')",
            "ALTER TABLE t1 SET TABLESPACE pg_default",
            "INSERT INTO t1 VALUES (102, 'back')",
            "DROP TABLE t1",
        ],
    )
    assert out.actual == out.expected
    assert AFTER in out.expected
    assert "table public.t1: INSERT: id[integer]:102 data[text]:'back'" in out.expected
