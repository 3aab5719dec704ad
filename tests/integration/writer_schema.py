"""Confluent-framed Avro records decoded by their writer's schema, for the tests' readers.

Receives: a record's bytes as a consumer reads them (magic byte 0, a 4-byte schema id,
the Avro body) and the schema registry the producer used.
Returns: the value confluent's `AvroDeserializer` returns for the same bytes without a
`SerializationContext`: fastavro's reading of the body by the writer's schema (the
registry's schema for that id, parsed once), logical types converted as fastavro does.
Guarantees: the first record of every schema id is decoded by `AvroDeserializer` too and
the two values must be equal (an AssertionError otherwise), so the readers built on this
stay checked against the consumers' own tool on every run.

Why not `AvroDeserializer` for every record: it resolves the writer's schema against
itself and expands it again for each record (confluent-kafka 2.x), about 6x the cost of
the decoding itself; the test processes' record reads were the largest single CPU cost
of the suite in CI. The tests that stand for a consumer's tooling
(`test_smoke_registry`, `tests/consumers`) keep `AvroDeserializer` throughout.
"""

from __future__ import annotations

import io
import json
from typing import Any

import fastavro
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer


class WriterSchemaDecoder:
    """Callable like `AvroDeserializer(registry)` with no context: `decoder(data)`."""

    def __init__(self, registry: SchemaRegistryClient) -> None:
        self._registry = registry
        self._reference = AvroDeserializer(registry)
        self._parsed: dict[int, Any] = {}

    def __call__(self, data: bytes, _ctx: None = None) -> Any:
        if len(data) <= 5 or data[0] != 0:
            raise ValueError(f"not a Confluent-framed Avro record: {data[:8]!r}")
        schema_id = int.from_bytes(data[1:5], "big")
        parsed = self._parsed.get(schema_id)
        body = io.BytesIO(data)
        body.seek(5)
        if parsed is not None:
            return fastavro.schemaless_reader(body, parsed, None)
        schema = self._registry.get_schema(schema_id)
        assert not schema.references, f"schema {schema_id} has references: not handled here"
        assert schema.schema_str is not None
        parsed = fastavro.parse_schema(json.loads(schema.schema_str))
        value = fastavro.schemaless_reader(body, parsed, None)
        reference = self._reference(data, None)
        assert value == reference, f"schema {schema_id}: {value!r} != {reference!r}"
        self._parsed[schema_id] = parsed
        return value
