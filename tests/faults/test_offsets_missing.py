"""A lost offsets topic is refused, and a fresh start is an explicit choice (issue 11,
defect 5); so is an offsets topic that is not the one pgcdc created (issue 27). The
shared broker has auto.create.topics.enable=true: a deleted topic comes back with the
broker's defaults (cleanup.policy=delete) as soon as a client produces to it."""

from __future__ import annotations

import subprocess
import time
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from connectors.kafka.offsets import offsets_topic, read_last_offset
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
        p.wait_confirmed(insert_lsn(p.connect().cursor()) - 1, 60, worker)
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
        p.wait_confirmed(insert_lsn(p.connect().cursor()) - 1, 60, worker)
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


def _topics(bootstrap: str) -> set[str]:
    return set(AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics)


def test_offsets_topic_deleted_under_a_running_worker_is_refused(
    fault_pg15: dict[str, Any], kafka: dict[str, Any], registry: dict[str, Any]
) -> None:
    """The offsets topic is deleted while the worker runs and publishes (issue 27: its
    own produce used to re-create the topic with cleanup.policy=delete, and the next
    start accepted it, so the refusal depended on a race). The running worker stops
    with exit 1 and OffsetsTopicError naming the topic, and has not re-created it.
    The next start refuses the topic as any client's produce would re-create it
    (auto-created, holding the last good offset): OffsetsTopicError, cleanup.policy
    named, nothing resumed. With no topic at all the next start refuses with
    OffsetsMissingError (the schema history shows an earlier run)."""
    ddl = ["CREATE TABLE t (id int PRIMARY KEY, v text)"]
    with pipeline(fault_pg15, kafka, registry, "offrun", ddl) as p:
        topic = offsets_topic(p.settings())
        worker = p.start_worker()
        worker.wait_ready(90)
        p.execute("INSERT INTO t SELECT g, 'a' FROM generate_series(1, 50) g")
        p.wait_confirmed(insert_lsn(p.connect().cursor()) - 1, 60, worker)
        last = read_last_offset(p.settings())
        assert last is not None

        _delete_topic(kafka["bootstrap"], topic)
        p.execute("INSERT INTO t SELECT g, 'b' FROM generate_series(51, 80) g")
        try:
            code: int | None = worker.wait(120)
        except subprocess.TimeoutExpired:
            code = None
        log = worker.log_text()
        assert code == 1, log[-3000:]
        assert "OffsetsTopicError" in log and topic in log, log[-3000:]
        assert "was deleted while this worker ran" in log, log[-3000:]
        assert topic not in _topics(kafka["bootstrap"])

        producer = Producer({"bootstrap.servers": kafka["bootstrap"]})
        producer.produce(topic, last.encode(), p.slot.encode())
        assert producer.flush(30) == 0
        code, log = _exit_code(p)
        assert code == 1, log[-3000:]
        assert "OffsetsTopicError" in log and "cleanup.policy=delete" in log, log[-3000:]
        assert '"worker_resumed"' not in log and '"worker_consistent"' not in log

        _delete_topic(kafka["bootstrap"], topic)
        code, log = _exit_code(p)
        assert code == 1, log[-3000:]
        assert "OffsetsMissingError" in log and "--fresh-start" in log, log[-3000:]


@pytest.mark.parametrize(
    ("partitions", "policy", "why"),
    [(1, "delete", "cleanup.policy=delete"), (3, "compact", "has 3 partitions")],
)
def test_offsets_topic_made_by_someone_else_is_refused_at_start(
    fault_pg15: dict[str, Any],
    kafka: dict[str, Any],
    registry: dict[str, Any],
    partitions: int,
    policy: str,
    why: str,
) -> None:
    """`<prefix>.offsets` created before the first start with a configuration pgcdc
    would not give it: `run` exits 1 with OffsetsTopicError saying what differs, before
    the slot is read or a snapshot taken, and `--fresh-start` does not override it."""
    ddl = ["CREATE TABLE t (id int PRIMARY KEY, v text)"]
    with pipeline(fault_pg15, kafka, registry, "offpre", ddl) as p:
        topic = offsets_topic(p.settings())
        admin = AdminClient({"bootstrap.servers": kafka["bootstrap"]})
        new = NewTopic(topic, partitions, 1, config={"cleanup.policy": policy})
        for future in admin.create_topics([new]).values():
            future.result(30)
        for args in ((), ("--fresh-start",)):
            code, log = _exit_code(p, *args)
            assert code == 1, log[-3000:]
            assert "OffsetsTopicError" in log and topic in log and why in log, log[-3000:]
            assert '"worker_started"' not in log and '"worker_consistent"' not in log
