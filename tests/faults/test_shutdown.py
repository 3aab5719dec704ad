"""SIGTERM during the replay of a large transaction (issue 11, defect 7)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.integration.pipeline_kafka_support import (
    current_xid,
    insert_lsn,
    pipeline,
    read_all,
    uncommitted_count,
)

pytestmark = [pytest.mark.integration, pytest.mark.faults]

# Large enough that the replay outlasts the SIGTERM: the native path publishes one
# spilled transaction at ~200k rows/s, so 300,000 rows could be through before it lands.
ROWS = 600_000


def test_sigterm_mid_replay_aborts_within_the_shutdown_timeout(
    pg15: dict[str, Any], kafka: dict[str, Any], registry: dict[str, Any]
) -> None:
    """SIGTERM while a 600,000-row transaction is being written into its Kafka
    transaction: the worker aborts that Kafka transaction and exits 0 within
    kafka.shutdown_timeout_s (1 s here) plus a few seconds, instead of finishing the
    replay; nothing of the transaction is visible to read_committed consumers; a
    restarted worker publishes it once, whole."""
    with pipeline(
        pg15,
        kafka,
        registry,
        "term",
        ["CREATE TABLE big (id int PRIMARY KEY)"],
        extra_env={"PGCDC_KAFKA__SHUTDOWN_TIMEOUT_S": "1"},
    ) as p:
        worker = p.start_worker()
        worker.wait_ready(90)
        conn = p.connect()
        cur = conn.cursor()
        cur.execute("BEGIN")
        xid = current_xid(cur)
        cur.execute(f"INSERT INTO big SELECT generate_series(1, {ROWS})")
        cur.execute("COMMIT")
        end = insert_lsn(cur)
        conn.close()
        topic = p.topic("big")
        deadline = time.monotonic() + 180
        while uncommitted_count(p.kafka["bootstrap"], topic) < ROWS // 100:
            assert time.monotonic() < deadline, worker.tail()
            time.sleep(0.2)
        t0 = time.monotonic()
        code = worker.terminate(120)
        took = time.monotonic() - t0
        assert code == 0, worker.tail()
        assert took < 6.0, f"SIGTERM took {took:.1f}s"
        assert worker.has_event("worker_shutdown_aborts_transaction")
        reads = read_all(p.settings(), [topic])
        assert not [r for r in reads if r.value and r.value["source"]["txId"] == xid]

        worker = p.start_worker()
        worker.wait_ready(90)
        p.wait_confirmed(end - 1, 300, worker)
        assert worker.terminate() == 0
        ids = [
            r.key["id"]
            for r in read_all(p.settings(), [topic], timeout_s=240)
            if r.value is not None
        ]
        assert len(ids) == ROWS and len(set(ids)) == ROWS
