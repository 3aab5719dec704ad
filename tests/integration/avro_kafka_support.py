"""Helpers for the Avro/Kafka integration tests: drive the plugin, read topics back.

The plugin is driven through `PluginWrapper` with plain-data TxnInfo/RowChange values
(no mocks); Kafka and the registry are the real local services.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from confluent_kafka import Consumer, KafkaError, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient

from connectors.avro.plugin import AvroPlugin
from connectors.kafka.sink import KafkaSink
from service.config import Settings
from service.output.api import (
    ChangeOp,
    ColumnMeta,
    ColumnValue,
    Message,
    PluginContext,
    PluginWrapper,
    RelationInfo,
    RowChange,
    TruncateChange,
    TxnInfo,
)
from tests.integration.txn_markers import await_markers
from tests.integration.writer_schema import WriterSchemaDecoder


def unique(name: str) -> str:
    return f"{name}{uuid.uuid4().hex[:10]}"


def make_settings(
    kafka: dict[str, Any], registry: dict[str, Any], prefix: str, slot: str, **kafka_opts: Any
) -> Settings:
    return Settings(
        source={"slot": slot, "dbname": "shop"},
        kafka={"bootstrap_servers": kafka["bootstrap"], "topic_prefix": prefix, **kafka_opts},
        registry={"url": registry["url"]},
    )


def col(
    name: str, oid: int, attnum: int, *, notnull: bool = False, typmod: int = -1, kind: str = "b"
) -> ColumnMeta:
    return ColumnMeta(name, attnum, oid, str(oid), typmod, notnull, kind)


def constant(value: object) -> Callable[[], object]:
    return lambda: value


def text_of(value: object) -> Callable[[], str | None]:
    return lambda: None if value is None else str(value)


def row(**values: object) -> list[ColumnValue]:
    return [
        ColumnValue(name, 0, "", constant(value), text_of(value)) for name, value in values.items()
    ]


@dataclass
class Harness:
    """Plugin + sink wired the way the driver wires them."""

    settings: Settings
    on_committed: list[tuple[int, int]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.sink = KafkaSink(self.settings, lambda c, r: self.on_committed.append((c, r)))
        self.plugin = AvroPlugin(self.settings)
        self.ctx = PluginContext(self.settings.source.slot, "avro", {}, self.sink.write)
        self.wrapper = PluginWrapper(self.plugin, self.ctx)

    def close(self) -> None:
        self.wrapper.shutdown()
        self.sink.close()

    def __enter__(self) -> Harness:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> Any:
        last = self.sink.start()
        self.wrapper.startup(True)
        return last

    def txn(
        self,
        xid: int,
        end_lsn: int,
        events: Sequence[RowChange | TruncateChange | Message],
        *,
        restart_lsn: int = 0,
        schema_version: int = 1,
    ) -> TxnInfo:
        """Replay one committed source transaction and end it at the sink."""
        first = min((e.lsn for e in events), default=end_lsn - 16)
        info = TxnInfo(xid, first, end_lsn - 16, end_lsn, 760_000_000_000_000 + xid, None)
        self.wrapper.call("begin", first, xid, info)
        for ev in events:
            if isinstance(ev, RowChange):
                self.wrapper.call("change", ev.lsn, xid, info, ev)
            elif isinstance(ev, TruncateChange):
                self.wrapper.call("truncate", ev.lsn, xid, info, ev)
            else:
                self.wrapper.call("message", ev.lsn, xid, info, ev)
        self.wrapper.call("commit", info.final_lsn, xid, info, info.final_lsn)
        self.sink.end_source_txn(end_lsn, restart_lsn or first, schema_version)
        return info


def insert(rel: RelationInfo, lsn: int, **values: object) -> RowChange:
    return RowChange(ChangeOp.INSERT, lsn, rel, row(**values), None, False)


def update(
    rel: RelationInfo,
    lsn: int,
    new: dict[str, object],
    old: dict[str, object] | None,
    old_is_key: bool,
) -> RowChange:
    return RowChange(ChangeOp.UPDATE, lsn, rel, row(**new), row(**old) if old else None, old_is_key)


def delete(rel: RelationInfo, lsn: int, old_is_key: bool, **old: object) -> RowChange:
    return RowChange(ChangeOp.DELETE, lsn, rel, None, row(**old), old_is_key)


@dataclass
class Read:
    topic: str
    key: Any
    value: Any
    headers: dict[str, bytes]
    raw_value: bytes | None


def read_topics(
    settings: Settings, topics: Sequence[str], *, deserialize: bool = True, timeout_s: float = 30.0
) -> list[Read]:
    """Every committed record of `topics` (read_committed), from the start up to each
    partition's end offset when the read begins.

    The end is fixed at the start: records a worker still publishes meanwhile (a test's
    writer may go on) are not chased, which on a loaded machine could outpace this reader
    for ever. A partition is done once the consumer's position reaches that end offset
    (past any transaction markers and aborted records) or it reports its end.
    `timeout_s` bounds the time without progress, not the whole read: a large topic on a
    loaded machine takes longer than any fixed total, but a stalled one still fails."""
    consumer = Consumer(
        {
            "bootstrap.servers": settings.kafka.bootstrap_servers,
            "group.id": unique("reader"),
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    registry = SchemaRegistryClient({"url": settings.registry.url})
    deser = WriterSchemaDecoder(registry)
    try:
        parts = []
        ends: dict[tuple[str, int], int] = {}
        for topic in topics:
            meta = consumer.list_topics(topic, timeout=10).topics[topic]
            for p in meta.partitions:
                low, high = consumer.get_watermark_offsets(
                    TopicPartition(topic, p), timeout=10, cached=False
                )
                if high > low:
                    parts.append(TopicPartition(topic, p, 0))
                    ends[(topic, p)] = high
        await_markers(settings, parts)
        consumer.assign(parts)
        pending = set(ends)
        out: list[Read] = []
        deadline = time.monotonic() + timeout_s
        while pending and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                for tp in consumer.position([TopicPartition(t, n) for t, n in pending]):
                    if tp.offset >= ends[(tp.topic, tp.partition)]:
                        pending.discard((tp.topic, tp.partition))
                        deadline = time.monotonic() + timeout_s
                continue
            deadline = time.monotonic() + timeout_s
            err = msg.error()
            if err is not None:
                assert err.code() == KafkaError._PARTITION_EOF, err.str()
                pending.discard((msg.topic(), msg.partition()))
                continue
            mtopic = msg.topic()
            assert mtopic is not None
            where = (mtopic, msg.partition())
            offset = msg.offset()
            assert offset is not None
            if where not in pending:
                continue  # past the end fixed at the start
            if offset + 1 >= ends[where]:
                pending.discard(where)
            raw_key, value = msg.key(), msg.value()
            key: Any = raw_key
            dvalue: Any = value
            if deserialize:
                key = deser(raw_key) if raw_key is not None else None
                dvalue = deser(value) if value is not None else None
            headers: dict[str, bytes] = {}
            for name, hval in cast(list[tuple[str, Any]], msg.headers() or []):
                headers[name] = hval if isinstance(hval, bytes) else str(hval).encode()
            out.append(Read(mtopic, key, dvalue, headers, value))
        assert not pending, f"did not reach the end of {pending}"
        return out
    finally:
        consumer.close()
        registry.close()
