"""The schema history kept in Kafka, committed atomically with the offsets.

`KafkaSchemaStore` implements `service.schema.store.SchemaStore` on the compacted topic
`<prefix>.schema-history`, keyed by the slot: `save` stages a snapshot (encoded by
`connectors.kafka.offsets.encode_snapshot`) into the sink's next Kafka transaction, so it
is committed together with that transaction's offset record; `load_latest` reads the last
committed one back with a read_committed consumer, and returns it only once the sink's
guard has verified again that the topic is still the one pgcdc created
(connectors.kafka.topics; `OffsetsTopicError` otherwise). A snapshot staged into a
transaction that is aborted is never seen.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from connectors.kafka.offsets import (
    decode_snapshot,
    encode_snapshot,
    history_topic,
    read_topic_to_end,
)
from connectors.kafka.sink import KafkaSink
from service.config import Settings


class KafkaSchemaStore:
    """Schema-history snapshots kept in Kafka, committed atomically with the offsets."""

    def __init__(self, settings: Settings, sink: KafkaSink) -> None:
        self.settings = settings
        self.sink = sink
        self.topic = history_topic(settings)
        self.key = settings.source.slot.encode()

    def save(self, version: int, snapshot: Mapping[str, Any]) -> None:
        """Stage `snapshot` (schema-history `version`) into the sink's next transaction."""
        self.sink.stage(self.topic, self.key, encode_snapshot(version, snapshot))

    def load_latest(self) -> tuple[int, dict[str, Any]] | None:
        """(version, snapshot) last committed for this slot, or None."""
        raw = read_topic_to_end(self.settings, self.topic, self.key)
        self.sink.guard.verify()  # what was just read came from pgcdc's own topic
        return None if raw is None else decode_snapshot(raw)
