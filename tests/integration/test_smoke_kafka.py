"""Smoke test of the real Kafka broker started by `deploy/local/services.py up kafka`.

pgcdc's sink relies on Kafka transactions: records of an aborted transaction must never
reach a `read_committed` consumer, and records of an open transaction must stay invisible
until it commits. These tests check exactly that against the broker, on a topic of their
own (unique per run) so that parallel runs do not see each other's records.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

pytestmark = pytest.mark.integration

TIMEOUT = 30.0


def _new_topic(bootstrap: str) -> str:
    """Create a one-partition topic with a unique name and wait until it exists."""
    topic = f"pgcdc-smoke-{uuid.uuid4().hex[:12]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])
    futures[topic].result(timeout=TIMEOUT)
    return topic


def _producer(bootstrap: str) -> Producer:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": f"pgcdc-smoke-{uuid.uuid4().hex}",
            "enable.idempotence": True,
        }
    )
    producer.init_transactions(TIMEOUT)
    return producer


def _read_all(bootstrap: str, topic: str, isolation: str) -> list[str]:
    """Every value a fresh consumer with `isolation` sees from the start to the end."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"pgcdc-smoke-{uuid.uuid4().hex}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": isolation,
        }
    )
    values: list[str] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    return values
                raise AssertionError(f"consumer error: {err}")
            value = msg.value()
            assert isinstance(value, bytes)
            values.append(value.decode())
        raise AssertionError(f"no end of partition within {TIMEOUT}s; read {values}")
    finally:
        consumer.close()


def _send(producer: Producer, topic: str, values: list[str]) -> None:
    for value in values:
        producer.produce(topic, key=b"k", value=value.encode())
    producer.flush(TIMEOUT)


def test_read_committed_sees_committed_records_only(kafka: dict[str, Any]) -> None:
    """Committed transactions are visible in order; an aborted one's records are not.

    A read_uncommitted consumer does see the aborted records, which proves they reached the
    log and that it is the isolation level that hides them.
    """
    bootstrap = str(kafka["bootstrap"])
    topic = _new_topic(bootstrap)
    producer = _producer(bootstrap)
    first = [f"committed-{i}" for i in range(3)]
    aborted = [f"aborted-{i}" for i in range(3)]
    last = [f"committed-{i}" for i in range(3, 5)]

    producer.begin_transaction()
    _send(producer, topic, first)
    producer.commit_transaction(TIMEOUT)
    producer.begin_transaction()
    _send(producer, topic, aborted)
    producer.abort_transaction(TIMEOUT)
    producer.begin_transaction()
    _send(producer, topic, last)
    producer.commit_transaction(TIMEOUT)

    assert _read_all(bootstrap, topic, "read_committed") == first + last
    assert _read_all(bootstrap, topic, "read_uncommitted") == first + aborted + last


def test_open_transaction_is_invisible_until_commit(kafka: dict[str, Any]) -> None:
    """Records of a transaction still open are hidden from read_committed, then appear."""
    bootstrap = str(kafka["bootstrap"])
    topic = _new_topic(bootstrap)
    producer = _producer(bootstrap)
    pending = ["pending-0", "pending-1"]

    producer.begin_transaction()
    _send(producer, topic, pending)
    assert _read_all(bootstrap, topic, "read_committed") == []
    assert _read_all(bootstrap, topic, "read_uncommitted") == pending
    producer.commit_transaction(TIMEOUT)

    assert _read_all(bootstrap, topic, "read_committed") == pending
