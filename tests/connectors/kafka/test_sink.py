"""The Kafka sink's batching and failure rules against a fake producer (no broker).

Checks the adaptive commit (`idle`), that a failed Kafka transaction is aborted and
handed to the worker for a replay from the WAL (no record is kept for a re-send), and
the transaction-timeout limit.
"""

from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import ConfigEntry, ConfigSource  # type: ignore[attr-defined]

from connectors.kafka import sink as sink_module
from connectors.kafka.sink import KafkaSink
from service.config import load_settings
from service.errors import (
    ConfigError,
    RecordTooLargeError,
    ReplayFromOffsetsError,
    TransactionTimeoutError,
)
from service.output.api import OutputRecord, RecordRun


class FakeProducer:
    """Records the transactional calls; `fail_produce_at` makes that produce call raise."""

    def __init__(self, conf: dict[str, Any]) -> None:
        self.conf = conf
        self.calls: list[str] = []
        self.produced: list[tuple[str, bytes | None]] = []
        self.headers: list[Any] = []  # each produce call's headers argument
        self.fail_produce_at: int | None = None
        # the transaction's abortable error, as after a record the broker refused: produce
        # raises _STATE and commit_transaction raises this, as librdkafka does
        self.txn_error: KafkaError | None = None
        self.state_on_produce = True
        self.init_error: KafkaError | None = None

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
        self.calls.append(f"metadata {topic}")
        return SimpleNamespace(topics={})

    def init_transactions(self, timeout: float) -> None:
        if self.init_error is not None:
            raise KafkaException(self.init_error)
        self.calls.append("init")

    def begin_transaction(self) -> None:
        self.calls.append("begin")

    def produce(  # confluent_kafka's signature, which the sink fills by position
        self,
        topic: str,
        value: bytes | None = None,
        key: bytes | None = None,
        partition: int = -1,
        callback: Any = None,
        on_delivery: Any = None,
        timestamp: int = 0,
        headers: Any = None,
    ) -> None:
        assert (partition, callback, on_delivery, timestamp) == (-1, None, None, 0)
        size = len(value or b"") + len(key or b"") + sum(len(n) + len(v) for n, v in headers or ())
        if size > self.conf["message.max.bytes"]:  # librdkafka's own check, at produce
            raise KafkaException(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE, "Message too large"))
        if self.txn_error is not None and self.state_on_produce:
            raise KafkaException(KafkaError(KafkaError._STATE, "Erroneous state"))
        if self.fail_produce_at is not None and len(self.produced) + 1 == self.fail_produce_at:
            raise KafkaException(KafkaError(KafkaError._TRANSPORT, "broker gone"))
        self.produced.append((topic, value))
        self.headers.append(headers)

    def commit_transaction(self, timeout: float) -> None:
        if self.txn_error is not None:
            raise KafkaException(self.txn_error)
        self.calls.append("commit")

    def abort_transaction(self, timeout: float) -> None:
        self.calls.append("abort")

    def poll(self, timeout: float) -> int:
        return 0

    def flush(self, timeout: float) -> int:
        return 0

    def purge(self) -> None:
        self.calls.append("purge")


class FakeAdmin:
    """Describes every topic as pgcdc creates its offsets and schema-history topics (one
    partition, cleanup.policy=compact set on the topic); the guard's verdicts on other
    topics are checked against a real broker in test_topics.py."""

    def __init__(self, conf: dict[str, Any]) -> None:
        self.conf = conf

    def poll(self, timeout: float = 0.0) -> int:
        return 0  # no events, no queued log lines

    def describe_topics(self, topics: TopicCollection, **kw: Any) -> dict[str, Future[Any]]:
        return {
            t: _done(SimpleNamespace(topic_id=f"id-{t}", partitions=[0]))
            for t in topics.topic_names
        }

    def describe_configs(self, resources: list[Any], **kw: Any) -> dict[Any, Future[Any]]:
        policy = ConfigEntry("cleanup.policy", "compact", source=ConfigSource.DYNAMIC_TOPIC_CONFIG)
        return {r: _done({"cleanup.policy": policy}) for r in resources}


def _done(value: Any) -> Future[Any]:
    future: Future[Any] = Future()
    future.set_result(value)
    return future


@pytest.fixture
def make_sink(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(sink_module, "Producer", FakeProducer)
    monkeypatch.setattr(sink_module, "AdminClient", FakeAdmin)

    def make(**kafka: Any) -> tuple[KafkaSink, FakeProducer, list[tuple[int, int]]]:
        settings = load_settings(kafka={"transactional_id": "t", **kafka})
        committed: list[tuple[int, int]] = []
        sink = KafkaSink(settings, lambda c, r: committed.append((c, r)), retry_budget_s=1.0)
        sink._known_topics.update({"t.public.a", sink.offsets_topic})
        producer = sink._producer
        assert isinstance(producer, FakeProducer)
        return sink, producer, committed

    return make


def rec(i: int) -> OutputRecord:
    return OutputRecord("t.public.a", str(i).encode(), b"v" * 100)


def test_idle_commits_a_complete_batch_at_once(make_sink: Any) -> None:
    """Below every cap, a finished source transaction waits for the batch, and `idle`
    (the stream has nothing more buffered) commits it with its offset at once."""
    sink, producer, committed = make_sink(max_batch_age_s=60)
    sink.write(100, 7, rec(1))
    assert sink.end_source_txn(200, 150, 1) is False
    assert producer.calls == ["begin"]
    assert sink.idle() is True
    assert producer.calls == ["begin", "commit"]
    assert committed == [(200, 150)]
    assert producer.produced[-1][0] == sink.offsets_topic
    assert sink.idle() is False  # nothing pending: no empty Kafka transaction


def test_idle_never_commits_mid_source_transaction(make_sink: Any) -> None:
    """Records of a source transaction whose end has not been seen stay uncommitted."""
    sink, producer, committed = make_sink(max_batch_age_s=60)
    sink.write(100, 7, rec(1))
    sink.end_source_txn(200, 150, 1)
    sink.write(300, 8, rec(2))  # the next source transaction has begun
    assert sink.idle() is False
    assert "commit" not in producer.calls
    assert committed == []


def test_caps_still_commit_under_load(make_sink: Any) -> None:
    """With the stream never idle, the count cap ends the batch."""
    sink, producer, committed = make_sink(max_batch_txns=3, max_batch_age_s=60)
    for i in range(7):
        sink.write(100 * i, i, rec(i))
        sink.end_source_txn(100 * i + 50, 100 * i, 1)
    assert producer.calls.count("commit") == 2
    assert [c for c, _ in committed] == [250, 550]


def test_failed_transaction_is_aborted_for_a_replay(make_sink: Any) -> None:
    """A produce error mid source transaction aborts the Kafka transaction and raises
    ReplayFromOffsetsError, with nothing committed and no record kept for a re-send."""
    sink, producer, committed = make_sink(max_batch_age_s=60)
    producer.fail_produce_at = 5
    for i in range(4):
        sink.write(10 + i, 7, rec(i))
    with pytest.raises(ReplayFromOffsetsError, match="replaying from the last committed"):
        sink.write(20, 7, rec(99))
    assert producer.calls == ["begin", "abort"]
    assert committed == []
    assert not hasattr(sink, "_records")  # the re-send buffer is gone
    sink.close(commit=False)
    assert "commit" not in producer.calls


def run_of(lsns: list[int]) -> RecordRun:
    keys: list[bytes | None] = [str(n).encode() for n in lsns]
    values: list[bytes | None] = [b"v%d" % n for n in lsns]
    return RecordRun("t.public.a", keys, values, lsns, (("h", b"1"),), "c")


def test_a_run_goes_out_as_its_records_would(make_sink: Any) -> None:
    """write_run produces each record of the run in order, with the run's headers,
    between single records, and counts them as written."""
    sink, producer, committed = make_sink(max_batch_age_s=60)
    sink.write(10, 7, rec(1))
    sink.write_run(11, 7, run_of([11, 12, 13]))
    sink.write(14, 7, rec(2))
    assert [v for _, v in producer.produced] == [b"v" * 100, b"v11", b"v12", b"v13", b"v" * 100]
    assert producer.headers[1:4] == [[("h", b"1")]] * 3
    assert sink.records_sent == 5
    assert sink.end_source_txn(20, 15, 1) is False and sink.idle() is True
    assert committed == [(20, 15)]


def test_a_run_failing_midway_is_aborted_for_a_replay_at_that_record(make_sink: Any) -> None:
    """A produce error on a run's third record aborts the Kafka transaction; the
    ReplayFromOffsetsError carries the LSN of that record's change."""
    sink, producer, committed = make_sink(max_batch_age_s=60)
    producer.fail_produce_at = 3
    with pytest.raises(ReplayFromOffsetsError) as info:
        sink.write_run(100, 7, run_of([100, 101, 102, 103]))
    assert info.value.lsn == 102
    assert producer.calls == ["begin", "abort"]
    assert len(producer.produced) == 2 and committed == []


def test_a_record_over_message_max_bytes_stops_the_worker_naming_it(make_sink: Any) -> None:
    """A record the producer refuses for its size would be refused after every replay:
    the Kafka transaction is aborted and RecordTooLargeError (fatal) names the topic, the
    change's LSN and both limits, instead of a ReplayFromOffsetsError that loops."""
    sink, producer, committed = make_sink(message_max_bytes=1000, max_batch_age_s=60)
    assert producer.conf["message.max.bytes"] == 1000
    sink.write(100, 7, rec(1))
    big = OutputRecord("t.public.a", b"k", b"v" * 2000)
    with pytest.raises(RecordTooLargeError) as info:
        sink.write(200, 8, big)
    assert info.value.lsn == 200 and info.value.relation == "t.public.a"
    assert "a record of 2001 bytes" in str(info.value)
    assert "kafka.message_max_bytes=1000" in str(info.value)
    assert "max.message.bytes" in str(info.value)
    assert producer.calls == ["begin", "abort"] and committed == []


def test_a_run_with_a_record_too_large_names_that_records_change(make_sink: Any) -> None:
    """In a run, the error carries the LSN of the record that is too large."""
    sink, producer, _ = make_sink(message_max_bytes=1000, max_batch_age_s=60)
    run = run_of([100, 101, 102])
    run.values[1] = b"v" * 1000  # with its key and header, over the limit
    with pytest.raises(RecordTooLargeError) as info:
        sink.write_run(100, 7, run)
    assert info.value.lsn == 101
    assert producer.calls == ["begin", "abort"]


def _refused_by_the_broker() -> KafkaError:
    return KafkaError(
        KafkaError.MSG_SIZE_TOO_LARGE,
        "ProduceRequest for t.public.a [0] with 1 message(s) failed: Broker: Message size "
        "too large: current transaction must be aborted",
        txn_requires_abort=True,
    )


def test_a_record_the_broker_refused_is_fatal_at_the_next_produce(make_sink: Any) -> None:
    """A record within message.max.bytes but over the topic's max.message.bytes fails at
    the broker: librdkafka then refuses every produce with _STATE, and the sink learns
    the cause from commit_transaction (which cannot commit in that state): fatal, at the
    LSN of the produce that found it, not a replay that would fail the same way."""
    sink, producer, committed = make_sink(max_batch_age_s=60)
    sink.write(100, 7, rec(1))
    producer.txn_error = _refused_by_the_broker()
    with pytest.raises(RecordTooLargeError) as info:
        sink.write(101, 7, rec(2))
    assert info.value.lsn == 101
    assert "Message size too large" in str(info.value) and "t.public.a" in str(info.value)
    assert producer.calls[-1] == "abort" and committed == []


def test_a_record_the_broker_refused_is_fatal_at_commit(make_sink: Any) -> None:
    """The refusal seen first by commit_transaction: fatal, at the batch's end LSN."""
    sink, producer, committed = make_sink(max_batch_age_s=60)
    sink.write(100, 7, rec(1))
    sink.end_source_txn(200, 150, 1)
    producer.txn_error = _refused_by_the_broker()
    producer.state_on_produce = False  # the offset record went in before the refusal
    with pytest.raises(RecordTooLargeError) as info:
        sink.idle()
    assert info.value.lsn == 200
    assert committed == []


def test_another_failed_transaction_is_still_replayed(make_sink: Any) -> None:
    """_STATE after any other abortable error: the replay from the offsets, as before."""
    sink, producer, _ = make_sink(max_batch_age_s=60)
    sink.write(100, 7, rec(1))
    producer.txn_error = KafkaError(
        KafkaError._MSG_TIMED_OUT, "Local: Message timed out", txn_requires_abort=True
    )
    with pytest.raises(ReplayFromOffsetsError) as info:
        sink.write(101, 7, rec(2))
    assert info.value.lsn == 101
    assert producer.calls[-1] == "abort"


def test_transaction_past_its_timeout_stops_with_the_setting_named(make_sink: Any) -> None:
    """A Kafka transaction still open near transaction.timeout.ms is aborted and the
    error names the broker's transaction.max.timeout.ms and the pgcdc setting."""
    sink, producer, _ = make_sink(transaction_timeout_ms=1000, max_batch_age_s=60)
    sink.write(1, 7, rec(0))
    sink._opened_at -= 10  # as if the replay had run for 10 s
    with pytest.raises(TransactionTimeoutError) as info:
        for i in range(2000):
            sink.write(2 + i, 7, rec(i))
    assert "transaction.max.timeout.ms" in str(info.value)
    assert "kafka.transaction_timeout_ms" in str(info.value)
    assert producer.calls[-1] == "abort"


def test_broker_refusing_the_timeout_is_a_config_error(
    make_sink: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """init_transactions refused for a timeout above the broker's maximum: ConfigError."""
    sink, producer, _ = make_sink(transaction_timeout_ms=3_600_000)
    producer.init_error = KafkaError(KafkaError.INVALID_TRANSACTION_TIMEOUT, "too long")
    monkeypatch.setattr(sink, "ensure_topics", lambda topics, compact=False, backoff=None: None)
    with pytest.raises(ConfigError, match=r"transaction\.max\.timeout\.ms"):
        sink.start()
    assert producer.conf["transaction.timeout.ms"] == 3_600_000


def test_a_run_counts_the_bytes_its_records_would() -> None:
    """RecordRun.size, which the batch rule adds up, is the sum of its records'
    OutputRecord.size: keys and values None (no key, tombstones) or empty included."""
    run = RecordRun(
        "t.public.a", [b"k1", None, b"", b"key4"], [b"v" * 800, b"x", None, b""], [1, 2, 3, 4]
    )
    assert run.size == sum(r.size for r in run.records()) == 4 * 10 + 2 + 4 + 800 + 1


def test_a_delete_run_holds_its_tombstones_as_none_values(make_sink: Any) -> None:
    """A run of DELETE events, each followed by its tombstone (a None value): the sink
    produces them in that order, and `records()` gives the tombstones op "" as a single
    write of one has it (the worker counts them apart from the "d" events)."""
    keys: list[bytes | None] = [b"k1", b"k1", b"k2", b"k2"]
    values: list[bytes | None] = [b"d1", None, b"d2", None]
    run = RecordRun("t.public.a", keys, values, [5, 5, 6, 6], None, "d")
    assert run.tombstones == 2
    assert [(r.key, r.value, r.op) for r in run.records()] == [
        (b"k1", b"d1", "d"),
        (b"k1", None, ""),
        (b"k2", b"d2", "d"),
        (b"k2", None, ""),
    ]
    sink, producer, _ = make_sink(max_batch_age_s=60)
    sink.write_run(5, 7, run)
    assert [v for _, v in producer.produced] == values
    assert sink.records_sent == 4


def test_start_connects_the_producer_before_init_transactions(
    make_sink: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A metadata request on the producer's own connection comes first: init_transactions
    called while that connection is being set up waits for librdkafka's 500 ms
    coordinator retry (KafkaSink._connect_producer)."""
    sink, producer, _ = make_sink()
    monkeypatch.setattr(sink, "ensure_topics", lambda topics, compact=False, backoff=None: None)
    monkeypatch.setattr(sink_module, "read_last_offset", lambda *a, **k: None)
    sink.start()
    assert producer.calls[:2] == [f"metadata {sink.offsets_topic}", "init"]


def test_a_failed_metadata_request_leaves_init_transactions_to_decide(
    make_sink: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    sink, producer, _ = make_sink()
    monkeypatch.setattr(sink, "ensure_topics", lambda topics, compact=False, backoff=None: None)
    monkeypatch.setattr(sink_module, "read_last_offset", lambda *a, **k: None)

    def unreachable(topic: str | None = None, timeout: float = -1) -> Any:
        raise KafkaException(KafkaError(KafkaError._TRANSPORT, "not yet"))

    monkeypatch.setattr(producer, "list_topics", unreachable)
    sink.start()
    assert producer.calls[0] == "init"
