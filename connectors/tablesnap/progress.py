"""The snapshot-progress record: what a chunked snapshot has committed, kept in Kafka.

The snapshotter stages one `ProgressRecord` into the Kafka transaction that publishes
a chunk's rows (`KafkaSink.stage`, so it lands just before that transaction's offset
record): a read_committed reader therefore sees the record exactly when it sees the
rows, and the last committed record is the truth about which chunks are published.
Topic `<prefix>.snapshot-progress`, compacted, one partition, keyed by the slot.

Value: one format byte (1), then JSON:
- `last`: the chunk this record commits, `{table, bounds, rows, done}` (`done`: the
  table is complete), or null for a record written for a signal;
- `state`: the snapshotter's whole resumable state (connectors.tablesnap.snapshotter's
  `SnapshotState.to_json`): the tables queued, each with its committed prefix and the
  planned chunks not yet committed, the paused flag, the signal topic's next offset,
  and the tables already captured (so a table added to the filters later is known to
  be new).
It does not go through the schema registry (recovery must not depend on it), and it
must stay under the broker's message.max.bytes (1 MB): a few hundred bytes per table.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from connectors.kafka.client_log import client_conf
from connectors.kafka.offsets import read_topic_to_end
from service.config import Settings
from service.errors import DecodeError

PROGRESS_FORMAT = 1


@dataclass(slots=True, frozen=True)
class ProgressRecord:
    last: Mapping[str, Any] | None
    state: Mapping[str, Any]

    def encode(self) -> bytes:
        doc = {"last": self.last, "state": self.state}
        return bytes([PROGRESS_FORMAT]) + json.dumps(doc, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, data: bytes) -> ProgressRecord:
        if not data or data[0] != PROGRESS_FORMAT:
            raise DecodeError(f"snapshot-progress record with unknown format byte {data[:1]!r}")
        doc = json.loads(data[1:])
        if not isinstance(doc, dict) or not isinstance(doc.get("state"), dict):
            raise DecodeError("snapshot-progress record is not a JSON object with a state")
        return cls(doc.get("last"), doc["state"])


def progress_topic(settings: Settings) -> str:
    return f"{settings.kafka.topic_prefix}.snapshot-progress"


def signal_topic(settings: Settings) -> str:
    return f"{settings.kafka.topic_prefix}.signals"


def read_last_progress(settings: Settings) -> ProgressRecord | None:
    """The last committed progress record of the configured slot, or None."""
    raw = read_topic_to_end(settings, progress_topic(settings), settings.source.slot.encode())
    return None if raw is None else ProgressRecord.decode(raw)


def ensure_signal_topic(settings: Settings, timeout_s: float = 30.0) -> None:
    """Create `<prefix>.signals` (one partition) unless it exists: a consumer assigned
    to a missing topic would wait for the client's next metadata refresh (minutes)
    after the first signal created it."""
    from confluent_kafka import KafkaError, KafkaException  # noqa: PLC0415  (only a worker with signals enabled needs the admin client)
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]  # noqa: PLC0415  (kept beside the import above)

    from connectors.kafka.security import security_conf  # noqa: PLC0415  (kept beside the imports above)

    admin = AdminClient(
        client_conf(
            {"bootstrap.servers": settings.kafka.bootstrap_servers, **security_conf(settings)}
        )
    )
    topic = signal_topic(settings)
    if topic in admin.list_topics(timeout=timeout_s).topics:
        return
    future = admin.create_topics([NewTopic(topic, num_partitions=1)])[topic]
    try:
        future.result(timeout_s)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise


class SignalConsumer:
    """Reads `<prefix>.signals` (one partition) from a stored offset on.

    Each record's value is a JSON signal (connectors.tablesnap.snapshotter documents them); the
    snapshotter stores the offset after the last one it acted on in its progress
    state, committed with the effect, so a signal is acted on once across restarts.
    """

    def __init__(self, settings: Settings, offset: int) -> None:
        from confluent_kafka import Consumer, TopicPartition  # noqa: PLC0415  (only a worker with signals enabled needs a consumer)

        from connectors.kafka.offsets import consumer_conf  # noqa: PLC0415  (kept beside the import above)

        ensure_signal_topic(settings)
        conf = consumer_conf(settings)
        conf["enable.partition.eof"] = False
        self._consumer = Consumer(client_conf(conf))
        self._consumer.assign([TopicPartition(signal_topic(settings), 0, offset)])

    def poll(self, timeout_s: float = 0.0) -> list[tuple[int, Any]]:
        """(offset, parsed value) of the signals that arrived; malformed ones as None."""
        out: list[tuple[int, Any]] = []
        for msg in self._consumer.consume(100, timeout_s):
            if msg.error() is not None:
                continue  # a transient error of the assignment; the next poll retries
            offset = msg.offset()
            assert offset is not None
            try:
                out.append((offset, json.loads(msg.value() or b"null")))
            except ValueError:
                out.append((offset, None))
        return out

    def close(self) -> None:
        self._consumer.close()
