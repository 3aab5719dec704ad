"""Defect 1 of issue 11: an error in the middle of a source transaction's replay must
never commit the Kafka transaction that already holds part of it.

Runs `pgcdc run` as a subprocess against the shared PostgreSQL 15, Kafka and registry
(no fault is injected: the error is an incompatible schema the registry rejects), and
reads back with a read_committed consumer.
"""

from __future__ import annotations

import json
import urllib.request
from collections import Counter
from typing import Any

import pytest

from tests.integration.pipeline_kafka_support import (
    current_xid,
    insert_lsn,
    pipeline,
    read_all,
)

pytestmark = [pytest.mark.integration, pytest.mark.faults]

TABLES = ["CREATE TABLE a (id int PRIMARY KEY)", "CREATE TABLE b (id int PRIMARY KEY, q int)"]


def _set_compatibility(url: str, subject: str, level: str) -> None:
    req = urllib.request.Request(
        f"{url}/config/{subject}",
        method="PUT",
        data=json.dumps({"compatibility": level}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        assert resp.status == 200


def test_rejected_schema_mid_transaction_commits_nothing_of_it(
    fault_pg15: dict[str, Any], kafka: dict[str, Any], registry: dict[str, Any]
) -> None:
    """The issue's reproduction: a and b published, b's registry subject BACKWARD, then
    `ALTER TABLE b ALTER q TYPE text`, `INSERT INTO a VALUES (2)` and one transaction
    `INSERT INTO a VALUES (3),(4); INSERT INTO b VALUES (2,'x')`. The registry rejects
    b's new value schema while that transaction is half written to the open Kafka
    transaction: the worker must abort it and exit 1 (fatal, not 3), and a
    read_committed consumer must see none of that transaction. Once the operator allows
    the change (compatibility NONE) a restarted worker publishes every transaction
    exactly once and whole."""
    with pipeline(fault_pg15, kafka, registry, "half", TABLES) as p:
        worker = p.start_worker()
        worker.wait_ready(90)
        p.execute("INSERT INTO a VALUES (1)", "INSERT INTO b VALUES (1, 1)")
        conn = p.connect()
        cur = conn.cursor()
        p.wait_confirmed(insert_lsn(cur) - 1, 60, worker)
        assert worker.has_event("worker_consistent")
        # Both subjects exist; b's is BACKWARD (the plugin sets it at registration).
        cur.execute("ALTER TABLE b ALTER q TYPE text")
        cur.execute("INSERT INTO a VALUES (2)")
        cur.execute("BEGIN")
        xid = current_xid(cur)
        cur.execute("INSERT INTO a VALUES (3), (4)")
        cur.execute("INSERT INTO b VALUES (2, 'x')")
        cur.execute("COMMIT")
        conn.close()
        code = worker.wait(90)
        assert code == 1, worker.tail()
        assert "RegistryRejectedError" in worker.log_text(), worker.tail()

        def events_of(target: int) -> Counter[str]:
            reads = read_all(p.settings(), [p.topic("a"), p.topic("b")])
            return Counter(
                f"{r.topic.rsplit('.', 1)[1]}{r.key['id']}"
                for r in reads
                if r.value is not None and r.value["source"]["txId"] == target
            )

        assert events_of(xid) == Counter(), "a partial source transaction was committed"

        _set_compatibility(registry["url"], f"{p.topic('b')}-value", "NONE")
        worker = p.start_worker()
        worker.wait_ready(90)
        p.wait_confirmed(insert_lsn(p.connect().cursor()) - 1, 90, worker)
        assert worker.terminate() == 0
        reads = read_all(p.settings(), [p.topic("a"), p.topic("b")])
        seen = Counter(
            (r.topic.rsplit(".", 1)[1], r.key["id"]) for r in reads if r.value is not None
        )
        assert seen == Counter(
            {("a", 1): 1, ("b", 1): 1, ("a", 2): 1, ("a", 3): 1, ("a", 4): 1, ("b", 2): 1}
        ), seen
        assert events_of(xid) == Counter({"a3": 1, "a4": 1, "b2": 1})
