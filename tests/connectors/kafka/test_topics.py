"""Recognising pgcdc's own offsets and schema-history topics (issue 27).

`judge` is checked case by case; `TopicGuard`, through the sink that uses it, against
the shared broker, which has auto.create.topics.enable=true: a topic auto-created by a
plain produce, one made by hand with the wrong configuration, and the offsets topic
deleted under a running sink (caught before the next offset commit, and by a commit
stalled on it) are all refused with OffsetsTopicError.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigSource, NewTopic  # type: ignore[attr-defined]

from connectors.kafka.offsets import OffsetRecord, history_topic, offsets_topic
from connectors.kafka.sink import KafkaSink
from connectors.kafka.topics import TopicFacts, TopicGuard, judge
from service.config import Settings
from service.errors import BrokerUnavailableError, OffsetsTopicError
from service.output.api import OutputRecord
from tests.integration.avro_kafka_support import make_settings, unique

OURS = TopicFacts("id-a", 1, "compact", ConfigSource.DYNAMIC_TOPIC_CONFIG)


@pytest.mark.parametrize(
    ("facts", "pinned", "why"),
    [
        (OURS, None, None),
        (OURS, "id-a", None),
        (None, None, "does not exist"),
        (None, "id-a", "was deleted while this worker ran"),
        (OURS, "id-b", "was deleted and re-created"),
        (TopicFacts("id-a", 3, "compact", ConfigSource.DYNAMIC_TOPIC_CONFIG), None, "3 part"),
        (TopicFacts("id-a", 1, "delete", ConfigSource.DEFAULT_CONFIG), None, "policy=delete"),
        (
            TopicFacts("id-a", 1, "compact,delete", ConfigSource.DYNAMIC_TOPIC_CONFIG),
            None,
            "policy=compact,delete",
        ),
        (
            TopicFacts("id-a", 1, "compact", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
            None,
            "inherited from the broker",
        ),
        (
            TopicFacts("id-a", 1, "compact", ConfigSource.STATIC_BROKER_CONFIG),
            None,
            "auto-created it",
        ),
    ],
)
def test_judge_accepts_only_the_topic_pgcdc_made(
    facts: TopicFacts | None, pinned: str | None, why: str | None
) -> None:
    """Only one compacted partition, its policy set on the topic, with the pinned id (if
    any) passes; each other case is refused with a reason saying what differs. A broker
    whose default policy is compact still cannot make an auto-created topic pass."""
    verdict = judge("p.offsets", facts, pinned)
    if why is None:
        assert verdict is None
    else:
        assert verdict is not None and why in verdict, verdict


def test_a_broker_that_does_not_answer_is_retryable_not_fatal() -> None:
    """With no broker at the address the guard retries until its deadline, then raises
    BrokerUnavailableError (retryable): only a topic seen to be wrong, or a permission
    the principal lacks, is OffsetsTopicError."""
    admin = AdminClient({"bootstrap.servers": "127.0.0.1:9"})
    guard = TopicGuard(admin, ("p.offsets", "p.schema-history"), timeout_s=2.0)
    started = time.monotonic()
    with pytest.raises(BrokerUnavailableError):
        guard.verify()
    assert time.monotonic() - started < 15
    assert guard.pinned == {}


@pytest.fixture
def state(kafka: dict[str, Any], registry: dict[str, Any]) -> Iterator[Settings]:
    """Settings with a fresh topic prefix; its topics are deleted afterwards."""
    settings = make_settings(kafka, registry, unique("wtoff"), unique("slot"))
    yield settings
    admin = AdminClient({"bootstrap.servers": kafka["bootstrap"]})
    prefix = settings.kafka.topic_prefix
    mine = [t for t in admin.list_topics(timeout=10).topics if t.startswith(prefix)]
    if mine:
        for future in admin.delete_topics(mine, operation_timeout=30).values():
            future.result(60)


def _admin(settings: Settings) -> AdminClient:
    return AdminClient({"bootstrap.servers": settings.kafka.bootstrap_servers})


def _delete(settings: Settings, topic: str) -> None:
    admin = _admin(settings)
    for future in admin.delete_topics([topic], operation_timeout=30).values():
        future.result(60)
    deadline = time.monotonic() + 60
    while topic in admin.list_topics(timeout=10).topics:
        assert time.monotonic() < deadline, f"{topic} not deleted"
        time.sleep(0.2)


def _commit_one(sink: KafkaSink, lsn: int) -> None:
    """One source transaction with one record, committed with its offset."""
    topic = f"{sink.settings.kafka.topic_prefix}.public.t"
    sink.write(lsn - 8, 7, OutputRecord(topic, b"k", b"v"))
    sink.end_source_txn(lsn, lsn - 8, 1)
    sink.flush()


@pytest.mark.integration
def test_topics_pgcdc_created_are_accepted_and_pinned(state: Settings) -> None:
    """A first start creates both topics, accepts them and pins their ids; a second
    sink (the next start) accepts them again and reads the committed offset."""
    sink = KafkaSink(state, retry_budget_s=10.0)
    assert sink.start() is None
    assert set(sink.guard.pinned) == {offsets_topic(state), history_topic(state)}
    _commit_one(sink, 0x1000)
    sink.close()
    again = KafkaSink(state, retry_budget_s=10.0)
    last = again.start()
    assert last is not None and last.confirmed_lsn == 0x1000
    assert again.guard.pinned == sink.guard.pinned
    again.close()


@pytest.mark.integration
def test_offsets_topic_auto_created_by_a_produce_is_refused_at_start(state: Settings) -> None:
    """The broker auto-creates `<prefix>.offsets` for a plain producer (as it did for the
    running worker's own produce once the topic was deleted), with cleanup.policy=delete;
    even holding a valid offset record it is refused at start, before anything is read."""
    producer = Producer({"bootstrap.servers": state.kafka.bootstrap_servers})
    record = OffsetRecord(state.source.slot, 0x2000, 0x1000, 1, 0)
    producer.produce(offsets_topic(state), record.encode(), state.source.slot.encode())
    assert producer.flush(30) == 0
    sink = KafkaSink(state, retry_budget_s=10.0)
    with pytest.raises(OffsetsTopicError, match=r"cleanup\.policy=delete") as info:
        sink.start()
    assert info.value.topic == offsets_topic(state)
    assert "--fresh-start" in str(info.value)
    assert sink.last_committed is None
    sink.close()


@pytest.mark.integration
def test_compacted_offsets_topic_with_more_partitions_is_refused(state: Settings) -> None:
    """A hand-made `<prefix>.offsets`, compacted but with 3 partitions, is not the topic
    pgcdc creates: refused at start."""
    topic = offsets_topic(state)
    new = NewTopic(
        topic, num_partitions=3, replication_factor=1, config={"cleanup.policy": "compact"}
    )
    admin = _admin(state)
    for future in admin.create_topics([new]).values():
        future.result(30)
    sink = KafkaSink(state, retry_budget_s=10.0)
    with pytest.raises(OffsetsTopicError, match="has 3 partitions") as info:
        sink.start()
    assert info.value.topic == topic
    sink.close()


@pytest.mark.integration
def test_offsets_topic_deleted_under_a_running_sink_is_refused(state: Settings) -> None:
    """The offsets topic is deleted after a commit. The next offset commit, once the
    check is due, raises OffsetsTopicError and commits nothing; a replay's fresh sink
    (which adopts the pins) refuses too and does not re-create the topic; and once
    something re-creates it, that topic is refused as a different one."""
    sink = KafkaSink(state, retry_budget_s=10.0)
    sink.start()
    _commit_one(sink, 0x1000)
    _delete(state, offsets_topic(state))
    sink.guard.every_s = 0.0  # the check is due at the next commit
    with pytest.raises(OffsetsTopicError, match="was deleted while this worker ran"):
        _commit_one(sink, 0x2000)
    assert sink.last_committed is not None and sink.last_committed.confirmed_lsn == 0x1000
    sink.close(commit=False)

    replay = KafkaSink(state, retry_budget_s=10.0)
    replay.guard.adopt(sink.guard)
    with pytest.raises(OffsetsTopicError, match="was deleted while this worker ran"):
        replay.start()
    assert offsets_topic(state) not in _admin(state).list_topics(timeout=10).topics
    replay.close()

    KafkaSink(state, retry_budget_s=10.0).start()  # a new process creates it again
    replay = KafkaSink(state, retry_budget_s=10.0)
    replay.guard.adopt(sink.guard)
    with pytest.raises(OffsetsTopicError, match="was deleted and re-created"):
        replay.start()
    replay.close()


@pytest.mark.integration
def test_commit_stalled_on_a_deleted_offsets_topic_is_refused(state: Settings) -> None:
    """The offsets topic is deleted right after a check, so the next commit is not
    preceded by one: the producer (which never auto-creates) cannot deliver the offset
    record and the commit times out; the check after the failed commit raises
    OffsetsTopicError rather than retrying or replaying, and nothing is confirmed."""
    confirmed: list[tuple[int, int]] = []
    sink = KafkaSink(state, lambda c, r: confirmed.append((c, r)), retry_budget_s=3.0)
    sink.start()
    _commit_one(sink, 0x1000)
    _delete(state, offsets_topic(state))
    sink.guard.every_s = math.inf  # only the failed commit leads to a check
    started = time.monotonic()
    with pytest.raises(OffsetsTopicError, match="was deleted while this worker ran"):
        _commit_one(sink, 0x2000)
    assert time.monotonic() - started < 30
    assert confirmed == [(0x1000, 0x1000 - 8)]
    assert offsets_topic(state) not in _admin(state).list_topics(timeout=10).topics
    sink.close(commit=False)
