"""`pgcdc run` refuses a source it cannot decode correctly before reading any WAL
(issue 11, defect 3)."""

from __future__ import annotations

import subprocess
from typing import Any

import psycopg2
import pytest

from tests.integration.pipeline_kafka_support import Pipeline, unique

pytestmark = [pytest.mark.integration, pytest.mark.faults]


def test_run_refuses_wal_level_replica(
    replica_pg: dict[str, Any], kafka: dict[str, Any], registry: dict[str, Any]
) -> None:
    """On a server with wal_level=replica (a real one, started so), `pgcdc run` exits 1
    at start with an error naming wal_level and the fix, instead of reaching
    "consistent" and silently dropping every INSERT."""
    p = Pipeline(replica_pg, kafka, registry, unique("wl"))
    # `pgcdc setup` would refuse this server, so the database and slot are made by hand.
    conn = psycopg2.connect(replica_pg["dsn"])
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE {p.db}")
        # The slot must start after the start-up's PARAMETER_CHANGE record, as on a
        # server that has run at wal_level=replica for a while (the case):
        # nothing in the decoded WAL then says that the level is too low.
        cur.execute("CHECKPOINT")
        cur.execute("SELECT pg_create_physical_replication_slot(%s, true)", (p.slot,))
    conn.close()
    p.execute("CREATE TABLE t (id int PRIMARY KEY)")
    worker = p.start_worker()
    try:
        try:
            code = worker.wait(30)
        except subprocess.TimeoutExpired:
            code = None  # still running: it did not refuse the server
        p.execute("INSERT INTO t VALUES (1)")
        log = worker.log_text()
    finally:
        worker.kill()
        p.drop()
    assert code == 1, log[-3000:]
    assert "SourceSetupError" in log and "wal_level is 'replica'" in log, log[-3000:]
    assert '"worker_consistent"' not in log
