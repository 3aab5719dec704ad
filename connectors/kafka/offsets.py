"""The offset record, and reading back what a worker last committed to Kafka.

The Kafka sink writes one `OffsetRecord` as the last record of every Kafka transaction,
to the compacted topic `<prefix>.offsets`, keyed by the slot name. Because it is in the
same transaction as the events it describes, a `read_committed` reader sees it exactly
when it sees those events: the last committed offset record is the truth about what
was published. On start the worker reads it (`read_last_offset`), resumes WAL at
`restart_lsn`, and skips every source transaction whose commit end LSN is at or below
`confirmed_lsn`.

Fields: `confirmed_lsn` is the commit end LSN of the last source transaction (or the
heartbeat LSN) included; `restart_lsn` is the oldest LSN still needed to rebuild every
unpublished transaction (the reorder buffer's restart point when that transaction
committed); `schema_version` is the schema-history version in force at `confirmed_lsn`.

Encoding: one format byte (1), then the record in Avro binary (schemaless, with
`schemas/offsets.avsc`). It does not go through the schema registry, so
recovery works even when the registry is down.

Schema-history snapshots (`encode_snapshot` / `decode_snapshot`) are encoded here too:
JSON, zlib-compressed, behind a format byte (1) and its version (8 bytes, big-endian);
one must stay under the broker's message.max.bytes (1 MB by default) after compression.
`connectors.kafka.schema_store` keeps them in Kafka.

Reads use a throwaway consumer (no group offsets committed; security options from
`connectors.kafka.security`) with `isolation.level=read_committed`, assigned every
partition from the beginning, and read until every partition reports end of partition
at its high watermark.
"""

from __future__ import annotations

import io
import json
import time
import uuid
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import fastavro
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from connectors.kafka.client_log import client_conf
from connectors.kafka.security import security_conf
from connectors.schemas import load_static
from service.config import Settings
from service.errors import BrokerUnavailableError, DecodeError

OFFSET_FORMAT = 1
SNAPSHOT_FORMAT = 1
READ_TIMEOUT_S = 30.0

_OFFSET_SCHEMA = fastavro.parse_schema(load_static("offsets"))


@dataclass(slots=True, frozen=True)
class OffsetRecord:
    """What one committed Kafka transaction published up to (see the module docstring)."""

    slot: str
    confirmed_lsn: int
    restart_lsn: int
    schema_version: int
    ts_ms: int

    def encode(self) -> bytes:
        buf = io.BytesIO()
        buf.write(bytes([OFFSET_FORMAT]))
        fastavro.schemaless_writer(
            buf,
            _OFFSET_SCHEMA,
            {
                "slot": self.slot,
                "confirmed_lsn": self.confirmed_lsn,
                "restart_lsn": self.restart_lsn,
                "schema_version": self.schema_version,
                "ts_ms": self.ts_ms,
            },
        )
        return buf.getvalue()

    @classmethod
    def decode(cls, data: bytes) -> OffsetRecord:
        if not data or data[0] != OFFSET_FORMAT:
            raise DecodeError(f"offset record with unknown format byte {data[:1]!r}")
        doc = fastavro.schemaless_reader(io.BytesIO(data[1:]), _OFFSET_SCHEMA)
        assert isinstance(doc, dict)
        return cls(
            str(doc["slot"]),
            int(doc["confirmed_lsn"]),
            int(doc["restart_lsn"]),
            int(doc["schema_version"]),
            int(doc["ts_ms"]),
        )


def offsets_topic(settings: Settings) -> str:
    return f"{settings.kafka.topic_prefix}.offsets"


def history_topic(settings: Settings) -> str:
    return f"{settings.kafka.topic_prefix}.schema-history"


def consumer_conf(settings: Settings) -> dict[str, Any]:
    """A read_committed, assign-only consumer that commits nothing."""
    conf: dict[str, Any] = {
        "bootstrap.servers": settings.kafka.bootstrap_servers,
        "group.id": f"pgcdc-reader-{uuid.uuid4().hex}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "isolation.level": "read_committed",
        "auto.offset.reset": "earliest",
        "enable.partition.eof": True,
    }
    conf.update(security_conf(settings))
    return conf


_TRANSIENT = frozenset(
    {
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError._TIMED_OUT,
        KafkaError._TRANSPORT,
    }
)


def _watermarks(consumer: Consumer, tp: TopicPartition, timeout_s: float) -> tuple[int, int]:
    """get_watermark_offsets, retried while a fresh topic's leader is being elected."""
    deadline = time.monotonic() + timeout_s
    delay = 0.1
    while True:
        try:
            low, high = consumer.get_watermark_offsets(tp, timeout=timeout_s, cached=False)
            return int(low), int(high)
        except KafkaException as exc:
            err = exc.args[0]
            if err.code() not in _TRANSIENT or time.monotonic() + delay > deadline:
                raise BrokerUnavailableError(
                    f"cannot read the end of {tp.topic}[{tp.partition}]: {err.str()}"
                ) from exc
            time.sleep(delay)
            delay = min(delay * 2, 2.0)


def read_topic_to_end(
    settings: Settings, topic: str, key: bytes, timeout_s: float = READ_TIMEOUT_S
) -> bytes | None:
    """The value of the last committed record with `key` in `topic`, or None.

    Raises BrokerUnavailableError when the topic's end cannot be reached in time.
    """
    consumer = Consumer(client_conf(consumer_conf(settings)))
    try:
        try:
            meta = consumer.list_topics(topic, timeout=timeout_s)
        except KafkaException as exc:
            raise BrokerUnavailableError(f"cannot read metadata of {topic}: {exc}") from exc
        tmeta = meta.topics.get(topic)
        if tmeta is None or tmeta.error is not None or not tmeta.partitions:
            return None
        parts = [TopicPartition(topic, p, 0) for p in sorted(tmeta.partitions)]
        ends: dict[int, int] = {}
        for tp in parts:
            low, high = _watermarks(consumer, tp, timeout_s)
            if high > low:
                ends[tp.partition] = high
        if not ends:
            return None
        consumer.assign([TopicPartition(topic, p, 0) for p in ends])
        last: bytes | None = None
        pending = set(ends)
        deadline = time.monotonic() + timeout_s
        while pending:
            if time.monotonic() > deadline:
                raise BrokerUnavailableError(
                    f"could not read {topic} to its end within {timeout_s:.0f}s"
                )
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            err = msg.error()
            part, off = msg.partition(), msg.offset()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    # At EOF a read_committed reader stops at the last stable offset; an
                    # open transaction of another writer may hold it below the high
                    # watermark, in which case keep reading until it resolves.
                    assert part is not None
                    pos = consumer.position([TopicPartition(topic, part)])[0].offset
                    if pos >= ends[part] or (off or 0) >= ends[part]:
                        pending.discard(part)
                    continue
                raise BrokerUnavailableError(f"reading {topic} failed: {err.str()}")
            if msg.key() == key:
                last = msg.value()
            assert part is not None and off is not None
            if off + 1 >= ends[part]:
                pending.discard(part)
        return last
    finally:
        consumer.close()


def read_last_offset(settings: Settings, slot: str | None = None) -> OffsetRecord | None:
    """The last committed offset record of `slot` (default: the configured slot)."""
    slot = slot or settings.source.slot
    raw = read_topic_to_end(settings, offsets_topic(settings), slot.encode())
    return None if raw is None else OffsetRecord.decode(raw)


def encode_snapshot(version: int, snapshot: Mapping[str, Any]) -> bytes:
    body = zlib.compress(json.dumps(snapshot, separators=(",", ":")).encode(), 6)
    return bytes([SNAPSHOT_FORMAT]) + version.to_bytes(8, "big") + body


def decode_snapshot(data: bytes) -> tuple[int, dict[str, Any]]:
    if len(data) < 9 or data[0] != SNAPSHOT_FORMAT:
        raise DecodeError(f"schema-history snapshot with unknown format byte {data[:1]!r}")
    doc = json.loads(zlib.decompress(data[9:]))
    if not isinstance(doc, dict):
        raise DecodeError("schema-history snapshot is not a JSON object")
    return int.from_bytes(data[1:9], "big"), doc
