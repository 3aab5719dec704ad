"""The Kafka sink under the native loop holds short runs (a small transaction's few
records, its BEGIN and END) and produces them together: before the Kafka commit,
before a long run (so every partition keeps the order written), or once enough are
held. Nothing held outlives the Kafka transaction it belongs to: an abort drops it,
and a failure producing it aborts for a replay naming the change of that record.

The producer is FakeProducer (tests/connectors/kafka/test_sink.py) and the native
loop a fake recording each call; the real loop against a broker is
tests/connectors/kafka/test_native_produce.py."""

from __future__ import annotations

from typing import Any

import pytest

from connectors.kafka import sink as sink_module
from connectors.kafka.sink import HELD_MAX_RECORDS, SHORT_RUN, KafkaSink
from service.config import load_settings
from service.errors import ReplayFromOffsetsError
from service.output.api import OutputRecord, RecordRun
from tests.connectors.kafka.test_sink import FakeAdmin, FakeProducer

ERR_QUEUE_FULL = -184  # RD_KAFKA_RESP_ERR__QUEUE_FULL, where the loop stops


class FakeLoop:
    """The native loop: records every record it enqueues on the producer, in order;
    `refuse_at` makes it stop at that record (counted over all calls) with an error."""

    def __init__(self, producer: FakeProducer) -> None:
        self.producer = producer
        self.calls = 0
        self.refuse_at: int | None = None

    def produce(
        self, topic: str, keys: list[Any], values: list[Any], start: int, headers: Any
    ) -> tuple[int, int]:
        self.calls += 1
        for i in range(start, len(values)):
            if self.refuse_at is not None and len(self.producer.produced) + 1 == self.refuse_at:
                return i, ERR_QUEUE_FULL
            self.producer.produced.append((topic, values[i]))
            self.producer.headers.append(list(headers))
        return len(values), 0


@pytest.fixture
def make_sink(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(sink_module, "Producer", FakeProducer)
    monkeypatch.setattr(sink_module, "AdminClient", FakeAdmin)
    loops: list[FakeLoop] = []

    def loop(producer: FakeProducer, client_id: str) -> FakeLoop:
        loops.append(FakeLoop(producer))
        return loops[-1]

    monkeypatch.setattr(sink_module, "direct_producer", loop)

    def make(
        **kafka: Any,
    ) -> tuple[KafkaSink, FakeProducer, FakeLoop | None, list[tuple[int, int]]]:
        settings = load_settings(kafka={"transactional_id": "t", **kafka})
        committed: list[tuple[int, int]] = []
        sink = KafkaSink(settings, lambda c, r: committed.append((c, r)), retry_budget_s=1.0)
        sink._known_topics.update({"t.public.a", "t.public.b", "t.tx", sink.offsets_topic})
        producer = sink._producer
        assert isinstance(producer, FakeProducer)
        return sink, producer, loops[-1] if loops else None, committed

    return make


def run_of(topic: str, lsns: list[int]) -> RecordRun:
    keys: list[bytes | None] = [str(n).encode() for n in lsns]
    values: list[bytes | None] = [b"v%d" % n for n in lsns]
    return RecordRun(topic, keys, values, lsns, (("h", b"1"),), "c")


def single(n: int) -> OutputRecord:
    return OutputRecord("t.tx", b"id", b"v%d" % n)


def test_short_runs_go_out_together_before_the_commit(make_sink: Any) -> None:
    """Three small transactions (BEGIN, two one-row runs, END): nothing reaches the
    producer until the Kafka commit, then every record in the order written, before
    the offset record; each counted as written when it was."""
    sink, producer, loop, committed = make_sink(max_batch_age_s=60)
    order = []
    for t in range(3):
        base = 100 * (t + 1)
        sink.write(base, 7, single(base))
        sink.write_runs(
            base + 1, 7, [run_of("t.public.a", [base + 1]), run_of("t.public.b", [base + 2])]
        )
        sink.write(base + 3, 7, single(base + 3))
        sink.end_source_txn(base + 4, base, 1)
        order += [b"v%d" % (base + i) for i in range(4)]
    assert producer.produced == [] and loop.calls == 0
    assert sink.records_sent == 12
    assert sink.idle() is True
    assert [v for _, v in producer.produced] == [*order, producer.produced[-1][1]]
    assert producer.produced[-1][0] == sink.offsets_topic
    assert producer.calls == ["begin", "commit"]
    assert committed == [(304, 300)]


def test_a_long_run_goes_out_after_the_runs_held_before_it(make_sink: Any) -> None:
    """A run of SHORT_RUN records is produced at once, after the runs held before it;
    a short one after it is held again."""
    sink, producer, _, _ = make_sink(max_batch_age_s=60)
    sink.write(1, 7, single(1))
    sink.write_run(2, 7, run_of("t.public.a", [2, 3]))
    assert producer.produced == []
    long = list(range(10, 10 + SHORT_RUN))
    sink.write_run(10, 7, run_of("t.public.a", long))
    assert [v for _, v in producer.produced] == [b"v1", b"v2", b"v3", *(b"v%d" % n for n in long)]
    sink.write_run(40, 7, run_of("t.public.a", [40]))  # held again, after it
    assert len(producer.produced) == 3 + SHORT_RUN


def test_enough_held_records_go_out_without_waiting_for_the_commit(make_sink: Any) -> None:
    """HELD_MAX_RECORDS records held (one large source transaction of one-row runs) are
    produced then, mid transaction: what is held stays bounded."""
    sink, producer, _, _ = make_sink(max_batch_age_s=60, max_batch_txns=100_000)
    n = 0
    while not producer.produced:
        sink.write_run(n, 7, run_of("t.public.a", [n]))
        n += 1
    assert n == HELD_MAX_RECORDS == len(producer.produced)


def test_an_abort_drops_what_is_held(make_sink: Any) -> None:
    """Stopping mid source transaction aborts the Kafka transaction: its held records
    are never produced, not even into the next one."""
    sink, producer, _, committed = make_sink(max_batch_age_s=60)
    sink.write_run(1, 7, run_of("t.public.a", [1, 2]))
    sink.close(commit=False)
    assert producer.calls == ["begin", "abort"] and producer.produced == []
    assert sink._held == [] and committed == []


def test_a_failure_producing_held_records_replays_from_that_records_change(
    make_sink: Any,
) -> None:
    """The loop stops at the third held record and produce() then fails: the Kafka
    transaction is aborted for a replay at that record's LSN, and nothing held after
    it is produced."""
    sink, producer, loop, committed = make_sink(max_batch_age_s=60)
    sink.write_run(1, 7, run_of("t.public.a", [1, 2]))
    sink.write_run(3, 7, run_of("t.public.b", [3, 4]))
    sink.end_source_txn(5, 1, 1)
    loop.refuse_at = 3
    producer.fail_produce_at = 3
    with pytest.raises(ReplayFromOffsetsError) as info:
        sink.idle()
    assert info.value.lsn == 3
    assert [v for _, v in producer.produced] == [b"v1", b"v2"]
    assert producer.calls == ["begin", "abort"] and committed == []
    assert sink._held == []


def test_a_refused_held_record_waits_out_a_full_queue_in_order(make_sink: Any) -> None:
    """The loop stops at a held record (librdkafka's queue full): produce() takes that
    record, and the loop goes on from the next one; all in order."""
    sink, producer, loop, _ = make_sink(max_batch_age_s=60)
    for n in range(1, 6):
        sink.write_run(n, 7, run_of("t.public.a", [n]))
    sink.end_source_txn(6, 1, 1)
    loop.refuse_at = 3
    assert sink.idle() is True
    assert [v for _, v in producer.produced][:5] == [b"v%d" % n for n in range(1, 6)]


def test_the_python_path_holds_nothing(make_sink: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the native loop (PGCDC_IMPL=python, another confluent-kafka) every
    record is produced as it is written, as before."""
    monkeypatch.setattr(sink_module, "direct_producer", lambda producer, client_id: None)
    sink, producer, _, _ = make_sink(max_batch_age_s=60)
    sink.write_run(1, 7, run_of("t.public.a", [1]))
    sink.write(2, 7, single(2))
    assert [v for _, v in producer.produced] == [b"v1", b"v2"]
