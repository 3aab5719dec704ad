"""Exactly-once publishing, fencing and schema evolution against real Kafka + Apicurio."""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient

from connectors.kafka.offsets import read_last_offset
from connectors.kafka.sink import KafkaSink
from service.errors import BrokerUnavailableError, FencedError, RegistryRejectedError
from service.output.api import RelationInfo
from tests.integration import avro_sink_worker as worker
from tests.integration.avro_kafka_support import (
    Harness,
    col,
    insert,
    make_settings,
    read_topics,
    unique,
)

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]


def run_worker(
    kafka: dict[str, Any], registry: dict[str, Any], prefix: str, slot: str, mode: str, at: int
) -> str:
    """Run the worker; when it says READY, SIGKILL it. Returns what it printed."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.integration.avro_sink_worker",
            kafka["bootstrap"],
            registry["url"],
            prefix,
            slot,
            mode,
            str(at),
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    assert proc.stdout is not None
    if mode == "none":
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        return out
    lines = []
    while True:  # structlog lines come first on stdout
        line = proc.stdout.readline()
        lines.append(line)
        if line.strip() == "READY" or not line:
            break
    proc.send_signal(signal.SIGKILL)
    assert line.strip() == "READY", (lines, proc.stderr.read() if proc.stderr else "")
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    proc.stdout.close()
    if proc.stderr:
        proc.stderr.close()
    return line


def test_exactly_once_across_sigkills(kafka: dict[str, Any], registry: dict[str, Any]) -> None:
    """Killed mid Kafka transaction and just before commit_transaction, then restarted
    with the same transactional.id, the worker resumes from its offset record: a
    read_committed reader sees every source transaction exactly once, in order."""
    prefix, slot = unique("eos"), unique("slot")
    run_worker(kafka, registry, prefix, slot, "mid_txn", 6)
    settings = make_settings(kafka, registry, prefix, slot)
    first = read_last_offset(settings)
    assert first is not None and first.confirmed_lsn == 0x100000 * 4  # batches of 4
    run_worker(kafka, registry, prefix, slot, "before_commit", 2)  # after one more batch
    second = read_last_offset(settings)
    assert second is not None and second.confirmed_lsn == 0x100000 * 8
    # Mid the big transaction (index 11, 5000 rows).
    run_worker(kafka, registry, prefix, slot, "mid_txn", worker.BIG_TXN)
    out = run_worker(kafka, registry, prefix, slot, "none", -1)
    assert f"DONE {0x100000 * 8}" in out  # the big transaction was not committed

    load = worker.workload()
    last = read_last_offset(settings)
    assert last is not None and last.confirmed_lsn == load[-1][1]

    reads = read_topics(settings, [f"{prefix}.public.eo", f"{prefix}.transaction"])
    rows = [r for r in reads if r.topic.endswith(".eo")]
    ids = [r.value["after"]["id"] for r in rows]
    expected = [rid for _, _, rids in load for rid in rids]
    assert collections.Counter(ids) == collections.Counter(expected)  # each exactly once
    assert ids == expected  # and in commit order
    meta = [(r.value["status"], r.value["id"]) for r in reads if r.topic.endswith("transaction")]
    # Debezium's ids: BEGIN names the first event's LSN, END the commit's end LSN.
    ids_of = [(f"{xid}:{end - 0x80000}", f"{xid}:{end}") for xid, end, _ in load]
    assert meta == [(s, i) for begin, end in ids_of for s, i in (("BEGIN", begin), ("END", end))]

    # The aborted attempts really reached the log: a read_uncommitted view has more.
    raw = read_uncommitted_count(settings, f"{prefix}.public.eo")
    assert raw > len(expected)


def read_uncommitted_count(settings: Any, topic: str) -> int:
    from confluent_kafka import Consumer, TopicPartition  # noqa: PLC0415  (only this helper needs it)

    c = Consumer(
        {
            "bootstrap.servers": settings.kafka.bootstrap_servers,
            "group.id": unique("g"),
            "isolation.level": "read_uncommitted",
        }
    )
    try:
        low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)
        return high - low
    finally:
        c.close()


def _fence_table(oid: int) -> RelationInfo:
    """public.f (id int NOT NULL, the key), as the fencing tests publish it."""
    return RelationInfo(
        oid, "public", "f", "d", ("id",), (col("id", 23, 1, notnull=True),), defined_at=1
    )


@contextmanager
def _committed_once(settings: Any, rel: RelationInfo) -> Iterator[Harness]:
    """A started sink that has committed source transaction 100 (one row of `rel`,
    confirmed at 0x1000): the worker a second one on the same slot then fences."""
    with Harness(settings) as first:
        first.start()
        first.txn(100, 0x1000, [insert(rel, 0x800, id=1)])
        first.sink.flush()
        yield first


def test_second_worker_fences_the_first(kafka: dict[str, Any], registry: dict[str, Any]) -> None:
    """Starting a second sink with the same transactional.id fences the first: its next
    commit raises FencedError; the second carries on from the committed offset."""
    prefix = unique("fence")
    settings = make_settings(kafka, registry, prefix, unique("slot"))
    rel = _fence_table(17100)
    with _committed_once(settings, rel) as first:
        with Harness(settings) as second:
            assert second.start().confirmed_lsn == 0x1000
            with pytest.raises(FencedError, match="took over slot"):
                first.txn(101, 0x2000, [insert(rel, 0x1800, id=2)])
                first.sink.flush()
            second.txn(101, 0x2000, [insert(rel, 0x1800, id=2)])
            second.sink.flush()
        assert first.sink.dead
    ids = [r.value["after"]["id"] for r in read_topics(settings, [f"{prefix}.public.f"])]
    assert ids == [1, 2]


def test_fencing_found_by_poll_is_a_fenced_error(
    kafka: dict[str, Any], registry: dict[str, Any]
) -> None:
    """A worker fenced between two produce calls learns it when librdkafka's ProduceRequest
    fails, and producer.poll raises that fatal error: the sink's poll raises FencedError
    naming the slot (an uncaught KafkaException crashed the worker there, in a CI run of
    test_pipeline_kafka's fencing test), and the sink is dead. librdkafka may find the
    fencing already while the records are produced (AddPartitionsToTxn, then the
    produce path's abort, fails): that path raises the same FencedError."""
    settings = make_settings(kafka, registry, unique("fencepoll"), unique("slot"))
    rel = _fence_table(17101)
    with _committed_once(settings, rel) as first:
        with Harness(settings) as second:
            second.start()
            with pytest.raises(FencedError, match="took over slot"):
                # produced into librdkafka's queue: the broker refuses them afterwards
                first.txn(101, 0x2000, [insert(rel, 0x1800 + i, id=2 + i) for i in range(50)])
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline:
                    first.sink.poll()
                    time.sleep(0.05)
        assert first.sink.dead


def test_schema_evolution_backward(kafka: dict[str, Any], registry: dict[str, Any]) -> None:
    """A new nullable column registers a new version under BACKWARD; changing a column's
    type is rejected with RegistryRejectedError and the committed position stays put."""
    prefix, slot = unique("evo"), unique("slot")
    settings = make_settings(kafka, registry, prefix, slot)
    v1 = RelationInfo(
        17200,
        "public",
        "e",
        "d",
        ("id",),
        (col("id", 23, 1, notnull=True), col("name", 25, 2)),
        defined_at=0x100,
    )
    v2 = RelationInfo(
        17200, "public", "e", "d", ("id",), (*v1.columns, col("qty", 23, 3)), defined_at=0x200
    )
    v3 = RelationInfo(
        17200,
        "public",
        "e",
        "d",
        ("id",),
        (v1.columns[0], col("name", 23, 2), col("qty", 23, 3)),
        defined_at=0x300,
    )
    with Harness(settings) as h:
        h.start()
        h.txn(1, 0x1000, [insert(v1, 0x180, id=1, name="a")])
        h.txn(2, 0x2000, [insert(v2, 0x280, id=2, name="b", qty=5)])
        h.sink.flush()
        with pytest.raises(RegistryRejectedError, match="rejected"):
            h.txn(3, 0x3000, [insert(v3, 0x380, id=3, name=7, qty=1)])
    with SchemaRegistryClient({"url": registry["url"]}) as client:
        assert len(client.get_versions(f"{prefix}.public.e-value")) == 2
    last = read_last_offset(settings)
    assert last is not None and last.confirmed_lsn == 0x2000
    values = [r.value["after"] for r in read_topics(settings, [f"{prefix}.public.e"])]
    assert values == [{"id": 1, "name": "a"}, {"id": 2, "name": "b", "qty": 5}]  # writer schemas


def test_unreachable_broker_is_reported(kafka: dict[str, Any]) -> None:
    """No broker at the address: start() retries, then raises BrokerUnavailableError."""
    settings = make_settings(
        {"bootstrap": "127.0.0.1:9"}, {"url": "http://127.0.0.1:9"}, unique("nob"), unique("slot")
    )
    sink = KafkaSink(settings, retry_budget_s=2.0)
    with pytest.raises(BrokerUnavailableError):
        sink.start()


def test_schema_history_commits_with_the_offsets(
    kafka: dict[str, Any], registry: dict[str, Any]
) -> None:
    """KafkaSchemaStore snapshots are committed only with an offset record: a snapshot
    staged into a Kafka transaction that never commits (the worker is fenced) is lost
    together with that transaction's events."""
    from connectors.kafka.schema_store import KafkaSchemaStore  # noqa: PLC0415  (only this helper needs it)
    from service.schema.store import SchemaStore  # noqa: PLC0415  (only this helper needs it)

    prefix, slot = unique("hist"), unique("slot")
    settings = make_settings(kafka, registry, prefix, slot)
    rel = RelationInfo(
        17300, "public", "h", "d", ("id",), (col("id", 23, 1, notnull=True),), defined_at=1
    )
    h = Harness(settings)
    h.start()
    store: SchemaStore = KafkaSchemaStore(settings, h.sink)
    assert store.load_latest() is None
    store.save(3, {"format": 1, "tables": ["a"]})
    h.txn(1, 0x1000, [insert(rel, 0x800, id=1)], schema_version=3)
    h.sink.flush()
    assert store.load_latest() == (3, {"format": 1, "tables": ["a"]})
    store.save(4, {"format": 1, "tables": ["a", "b"]})
    h.txn(2, 0x2000, [insert(rel, 0x1800, id=2)], schema_version=4)  # not yet committed
    with Harness(settings) as successor:
        last = successor.start()
        assert last is not None
        assert (last.confirmed_lsn, last.schema_version) == (0x1000, 3)
        again = KafkaSchemaStore(settings, successor.sink)
        assert again.load_latest() == (3, {"format": 1, "tables": ["a"]})
    with pytest.raises(FencedError):
        h.sink.flush()
    h.close()
