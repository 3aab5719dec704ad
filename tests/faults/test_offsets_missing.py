"""A lost offsets topic is refused, and a fresh start is an explicit choice (issue 11,
defect 5)."""

from __future__ import annotations

import subprocess
import time
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

from connectors.kafka.offsets import offsets_topic
from tests.integration.pipeline_kafka_support import (
    Pipeline,
    insert_lsn,
    materialize,
    pipeline,
    read_all,
)

pytestmark = [pytest.mark.integration, pytest.mark.faults]


def _delete_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_topics([topic], operation_timeout=30).values():
        future.result(60)
    deadline = time.monotonic() + 60
    while topic in admin.list_topics(timeout=10).topics:
        assert time.monotonic() < deadline, f"{topic} not deleted"
        time.sleep(0.5)


def _exit_code(p: Pipeline, *args: str) -> tuple[int | None, str]:
    worker = p.start_worker(*args)
    try:
        code: int | None = worker.wait(60)
    except subprocess.TimeoutExpired:
        code = None  # still running
    log = worker.log_text()
    worker.kill()
    return code, log


def test_deleted_offsets_topic_is_refused_until_a_fresh_start(
    fault_pg15: dict[str, Any], kafka: dict[str, Any], registry: dict[str, Any]
) -> None:
    """A worker publishes, stops; rows are inserted, updated and deleted while it is
    down, and the offsets topic is deleted. The next `run` exits 1 with
    OffsetsMissingError naming the topic and `--fresh-start` (before: it silently
    re-snapshotted, so the deleted rows stayed in the topic). `run --fresh-start` then
    takes a new snapshot: the topic, materialized by key from that snapshot on, equals
    SELECT * from the table."""
    ddl = ["CREATE TABLE t (id int PRIMARY KEY, v text)"]
    with pipeline(fault_pg15, kafka, registry, "offs", ddl) as p:
        worker = p.start_worker()
        worker.wait_ready(90)
        p.execute("INSERT INTO t SELECT g, 'a' FROM generate_series(1, 50) g")
        p.wait_confirmed(insert_lsn(p.connect().cursor()), 60, worker)
        assert worker.terminate() == 0, worker.tail()
        p.execute(
            "INSERT INTO t SELECT g, 'b' FROM generate_series(51, 80) g",
            "UPDATE t SET v = 'c' WHERE id <= 10",
            "DELETE FROM t WHERE id BETWEEN 20 AND 29",
        )
        _delete_topic(kafka["bootstrap"], offsets_topic(p.settings()))

        code, log = _exit_code(p)
        assert code == 1, log[-3000:]
        assert "OffsetsMissingError" in log and "--fresh-start" in log, log[-3000:]
        assert offsets_topic(p.settings()) in log
        assert '"worker_consistent"' not in log

        worker = p.start_worker("--fresh-start")
        worker.wait_ready(90)
        assert worker.has_event("worker_fresh_start")
        p.wait_confirmed(insert_lsn(p.connect().cursor()), 60, worker)
        assert worker.terminate() == 0, worker.tail()
        reads = read_all(p.settings(), [p.topic("t")])
        # The new snapshot's reads start after the last event of the first run.
        first_read = next(i for i, r in enumerate(reads) if r.value and r.value["op"] == "r")
        rows = materialize(reads[first_read:], lambda k: k["id"])
        table = {i: v for i, v in p.query("SELECT id, v FROM t")}
        assert {k: v["v"] for k, v in rows.items()} == table

        # A valid offset is resumed even with the flag (it is safe to leave it set).
        worker = p.start_worker("--fresh-start")
        event = worker.wait_ready(90)
        assert event["event"] == "worker_resumed", event
        worker.terminate()
