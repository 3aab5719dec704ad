"""A record larger than Kafka takes: the worker stops, naming it; a raised limit resumes.

A row with a 1.28 MB text value becomes an Avro record over the producer's
message.max.bytes (kafka.message_max_bytes, 1,000,000 by default: the Java producer's
max.request.size bounds Debezium alike). librdkafka refuses it at produce(), and would
refuse it again after every replay from the offsets, so the worker must not loop on
it: it exits fatal (1), with the topic, the LSN and both limits named, and the
committed offset stays before the row. With kafka.message_max_bytes raised and the
topic's max.message.bytes not (the broker's default, about 1 MB), the broker refuses
the record instead, and that is fatal too. Once both are raised, the row's transaction
is decoded again and every row is in the topic once, the large one whole.
"""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from tests.integration.pipeline_kafka_support import (
    Pipeline,
    WorkerProcess,
    insert_lsn,
    pipeline,
    read_all,
)

pytestmark = pytest.mark.integration

DDL = ["CREATE TABLE docs (id int PRIMARY KEY, body text)"]
# 40,000 md5 hex digests: 1,280,000 characters, which lz4 does not shrink below 1 MB
BIG_TEXT = "(SELECT string_agg(md5(g::text), '') FROM generate_series(1, 40000) g)"
BIG_CHARS = 40_000 * 32
RAISED = 4_000_000


def _raise_topic_limit(bootstrap: str, topic: str) -> None:
    """The topic's max.message.bytes to RAISED (the broker's default is about 1 MB)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    entry = ConfigEntry(
        "max.message.bytes", str(RAISED), incremental_operation=AlterConfigOpType.SET
    )
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[entry])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=30)


def _published(p: Pipeline, worker: WorkerProcess, sql: str) -> None:
    """Once `worker` is ready, run `sql` and wait until its commit is confirmed."""
    worker.wait_ready(120)
    with p.connect() as conn, conn.cursor() as cur:
        cur.execute(sql)
        end = insert_lsn(cur)
    p.wait_confirmed(end - 1, 120, worker)


def test_a_record_over_the_limit_stops_the_worker_and_a_raised_limit_resumes(
    pg15: dict[str, Any], kafka: dict[str, Any], registry: dict[str, Any]
) -> None:
    with pipeline(
        pg15, kafka, registry, "bigrec", DDL, extra_env={"PGCDC_SNAPSHOT__MODE": "never"}
    ) as p:
        topic = p.topic("docs")
        worker = p.start_worker()
        _published(p, worker, "INSERT INTO docs VALUES (1, 'small')")
        with p.connect() as conn, conn.cursor() as cur:
            cur.execute(f"INSERT INTO docs VALUES (2, {BIG_TEXT})")
        with p.connect() as conn, conn.cursor() as cur:
            after_big = insert_lsn(cur)  # at or past the big row's commit end
        assert worker.wait(120) == 1, worker.tail()
        log = worker.log_text()
        assert "RecordTooLargeError" in log or "larger than Kafka takes" in log, worker.tail()
        assert f"relation={topic}" in log, worker.tail()
        assert "kafka.message_max_bytes=1000000" in log and "max.message.bytes" in log
        last = p.last_offset()
        # not confirmed past the row (its commit end is after_big when nothing else wrote)
        assert last is not None and last.confirmed_lsn < after_big

        # the producer's limit raised, the topic's not: the broker refuses the record
        p.extra_env["PGCDC_KAFKA__MESSAGE_MAX_BYTES"] = str(RAISED)
        refused = p.start_worker()
        assert refused.wait(120) == 1, refused.tail()
        log = refused.log_text()
        assert "Message size too large" in log and topic in log, refused.tail()
        assert "kafka.message_max_bytes=4000000" in log
        last = p.last_offset()
        assert last is not None and last.confirmed_lsn < after_big

        _raise_topic_limit(kafka["bootstrap"], topic)
        resumed = p.start_worker()
        _published(p, resumed, "INSERT INTO docs VALUES (3, 'after')")
        assert resumed.terminate() == 0

        rows = [r.value["after"] for r in read_all(p.settings(), [topic]) if r.value is not None]
        assert [r["id"] for r in rows] == [1, 2, 3]
        assert len(rows[1]["body"]) == BIG_CHARS
