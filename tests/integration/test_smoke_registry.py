"""Smoke test of the real Apicurio Registry started by `deploy/local/services.py up registry`.

pgcdc's Avro plugin talks to the registry through confluent_kafka's schema registry client
and Apicurio's Confluent-compatible API (`/apis/ccompat/v7`). These tests check what the
plugin relies on: registering a schema and reading it back by id and by subject, the
Confluent wire format of serialized records, and that a subject with BACKWARD
compatibility accepts a compatible evolution and rejects an incompatible one. Every test
uses a subject of its own, unique per run.
"""

from __future__ import annotations

import json
import struct
import uuid
from collections.abc import Iterator
from datetime import datetime
from decimal import Decimal
from typing import Any

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext

pytestmark = pytest.mark.integration


def _schema(*extra_fields: dict[str, object]) -> str:
    return json.dumps(
        {
            "type": "record",
            "name": "Row",
            "namespace": "pgcdc.smoke",
            "fields": [
                {"name": "id", "type": "long"},
                {"name": "name", "type": ["null", "string"], "default": None},
                *extra_fields,
            ],
        }
    )


def _subject() -> str:
    return f"pgcdc-smoke-{uuid.uuid4().hex[:12]}-value"


@pytest.fixture
def client(registry: dict[str, Any]) -> Iterator[SchemaRegistryClient]:
    """A client of the ccompat API, closed (with its HTTP connections) after the test."""
    with SchemaRegistryClient({"url": str(registry["url"])}) as sr_client:
        yield sr_client


def test_register_and_fetch_back(client: SchemaRegistryClient) -> None:
    """A registered schema comes back by id and as its subject's latest version."""
    subject = _subject()
    schema_str = _schema()

    schema_id = client.register_schema(subject, Schema(schema_str, "AVRO"))

    by_id = client.get_schema(schema_id)
    assert by_id.schema_type == "AVRO"
    assert json.loads(str(by_id.schema_str)) == json.loads(schema_str)
    latest = client.get_latest_version(subject)
    assert latest.schema_id == schema_id
    assert latest.subject == subject
    assert latest.version == 1
    assert latest.schema is not None
    assert json.loads(str(latest.schema.schema_str)) == json.loads(schema_str)
    assert client.get_versions(subject) == [1]  # the subject exists, one version
    # Registering the same schema again is idempotent: same id, no new version.
    assert client.register_schema(subject, Schema(schema_str, "AVRO")) == schema_id
    assert client.get_versions(subject) == [1]


def test_avro_round_trip_in_confluent_wire_format(
    client: SchemaRegistryClient, registry: dict[str, Any]
) -> None:
    """AvroSerializer writes magic byte 0 + the registered id; AvroDeserializer reads it back."""
    topic = f"pgcdc-smoke-{uuid.uuid4().hex[:12]}"
    subject = f"{topic}-value"
    serializer = AvroSerializer(client, _schema(), conf={"auto.register.schemas": True})
    deserializer = AvroDeserializer(client)
    ctx = SerializationContext(topic, MessageField.VALUE)
    record = {"id": 42, "name": "forty-two"}

    payload = serializer(record, ctx)

    assert payload is not None
    magic, schema_id = struct.unpack_from(">bI", payload, 0)
    assert magic == 0
    assert schema_id == client.get_latest_version(subject).schema_id
    # A fresh client has no cached schema: it must fetch the writer schema by id.
    with SchemaRegistryClient({"url": str(registry["url"])}) as fresh:
        assert AvroDeserializer(fresh)(payload, ctx) == record
    assert deserializer(payload, ctx) == record


def test_backward_compatibility_is_enforced(client: SchemaRegistryClient) -> None:
    """Under BACKWARD, adding an optional field is accepted and a required one is rejected."""
    subject = _subject()
    first_id = client.register_schema(subject, Schema(_schema(), "AVRO"))
    client.set_compatibility(subject, "BACKWARD")
    assert client.get_compatibility(subject) == "BACKWARD"

    # A new reader with a defaulted field can read old data: backward compatible.
    compatible = Schema(_schema({"name": "note", "type": "string", "default": ""}), "AVRO")
    assert client.test_compatibility(subject, compatible)
    second_id = client.register_schema(subject, compatible)
    assert second_id != first_id

    # A new required field has no value in old data: backward incompatible.
    incompatible = Schema(_schema({"name": "required_col", "type": "int"}), "AVRO")
    assert not client.test_compatibility(subject, incompatible)
    with pytest.raises(SchemaRegistryError) as excinfo:
        client.register_schema(subject, incompatible)
    assert excinfo.value.http_status_code == 409
    assert client.get_versions(subject) == [1, 2]
    assert client.get_latest_version(subject).schema_id == second_id


def test_writer_schema_decoder_equals_the_avro_deserializer(client: SchemaRegistryClient) -> None:
    """The tests' readers (`writer_schema.WriterSchemaDecoder`) return what
    AvroDeserializer returns, logical types included, and refuse a record that does not
    match: the first record of a schema id is decoded both ways and compared."""
    from tests.integration.writer_schema import WriterSchemaDecoder  # noqa: PLC0415

    topic = f"pgcdc-smoke-{uuid.uuid4().hex[:12]}"
    micros: dict[str, object] = {
        "name": "at",
        "type": {"type": "long", "logicalType": "timestamp-micros"},
    }
    amount: dict[str, object] = {
        "name": "amount",
        "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2},
    }
    serializer = AvroSerializer(
        client, _schema(micros, amount), conf={"auto.register.schemas": True}
    )
    ctx = SerializationContext(topic, MessageField.VALUE)
    records = [
        {
            "id": i,
            "name": None if i % 2 else f"n{i}",
            "at": 1_700_000_000_000_000 + i,
            "amount": Decimal(i) / 100,
        }
        for i in range(5)
    ]
    payloads = [p for p in (serializer(r, ctx) for r in records) if p is not None]
    assert len(payloads) == len(records)
    decoder = WriterSchemaDecoder(client)
    reference = AvroDeserializer(client)
    for payload in payloads:
        assert decoder(payload) == reference(payload, None)
    assert isinstance(decoder(payloads[0])["at"], datetime)
    with pytest.raises(ValueError, match="not a Confluent-framed"):
        decoder(b"\x01" + payloads[0][1:])
