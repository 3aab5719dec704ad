"""`kafka.compression_type` reaches the broker: the record batches a sink commits are
stored with that codec, read from the partition's segment file on the shared broker
(the broker keeps the producer's codec under the topic default compression.type=producer),
and a read_committed consumer gets the same records back."""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient

from connectors.kafka.sink import KafkaSink
from service.output.api import OutputRecord
from tests.integration.avro_kafka_support import make_settings, unique

# RecordBatch attributes (Kafka's DefaultRecordBatch): bits 0-2 the codec, bit 5 control.
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
_CONTROL = 0x20


def batch_codecs(segment: bytes) -> list[int]:
    """The codec of each data (non-control) record batch in a log segment: each batch
    is baseOffset (8), batchLength (4), then batchLength bytes, whose attributes sit
    after partitionLeaderEpoch (4), magic (1) and crc (4)."""
    codecs, at = [], 0
    while at + 12 <= len(segment):
        (length,) = struct.unpack_from(">i", segment, at + 8)
        if length <= 0:
            break  # preallocated tail
        magic = segment[at + 16]
        assert magic == 2, f"record batch magic {magic} at byte {at}"
        (attributes,) = struct.unpack_from(">h", segment, at + 21)
        if not attributes & _CONTROL:
            codecs.append(attributes & 0x07)
        at += 12 + length
    return codecs


@pytest.fixture
def prefix(kafka: dict[str, Any]) -> Iterator[str]:
    name = unique("cmp")
    yield name
    admin = AdminClient({"bootstrap.servers": kafka["bootstrap"]})
    mine = [t for t in admin.list_topics(timeout=10).topics if t.startswith(name)]
    for future in admin.delete_topics(mine, operation_timeout=30).values():
        future.result(60)


@pytest.mark.integration
@pytest.mark.parametrize("codec", ["none", "lz4", "zstd"])
def test_batches_are_stored_with_the_configured_codec(
    kafka: dict[str, Any], registry: dict[str, Any], prefix: str, codec: str
) -> None:
    settings = make_settings(kafka, registry, prefix, unique("slot"), compression_type=codec)
    assert settings.kafka.compression_type == codec
    topic = f"{prefix}.public.docs"
    values = [(f"row {i} ".encode() * 400) for i in range(40)]
    sink = KafkaSink(settings, retry_budget_s=10.0)
    sink.start()
    for i, value in enumerate(values):
        sink.write(0x1000 + i, 7, OutputRecord(topic, f"k{i}".encode(), value))
    sink.end_source_txn(0x2000, 0x1000, 1)
    sink.flush()
    sink.close()

    consumer = Consumer(
        {
            "bootstrap.servers": kafka["bootstrap"],
            "group.id": unique("g"),
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < len(values) and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            got.append(msg.value())
    consumer.close()
    assert got == values

    segment = Path(kafka["data"]) / f"{topic}-0" / f"{0:020d}.log"
    codecs = batch_codecs(segment.read_bytes())
    assert codecs, f"no data batch in {segment}"
    assert set(codecs) == {CODECS[codec]}
