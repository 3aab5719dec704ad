"""Avro encoding for the avro plugin: the Confluent wire format, written with fastavro.

Receives: a writer schema (the JSON text registered with the schema registry) and its
registry id, then datums (dicts as `connectors.avro_schema` builds them, union branches
optionally named in fastavro's tuple notation). Hands on: the bytes a Kafka record
carries: magic byte 0, the schema id as 4-byte big-endian unsigned, then the datum's
Avro binary encoding (fastavro's `schemaless_writer`).

Guarantee: the bytes are exactly those confluent_kafka's `AvroSerializer` (with
`auto.register.schemas`, TopicNameStrategy, no rules) writes for the same schema text
and datum. AvroSerializer does the same three things (parse the schema with fastavro,
`schemaless_writer`, `prefix_schema_id_serializer`) plus per-call work this module
does once: the subject lookup, the parse, the header. tests/connectors/test_avro_codec.py
checks the equality byte for byte against AvroSerializer itself.

Pure: no registry or Kafka I/O (registration stays in `connectors.avro_plugin`). An
encoder is not thread-safe (it reuses one buffer); the plugin runs on one thread.
Errors: a datum that does not fit the schema raises what fastavro raises (ValueError,
TypeError), as AvroSerializer let it through.
"""

from __future__ import annotations

import io
import json
import struct
from typing import Any

import fastavro

_WIRE_HEADER = struct.Struct(">bI")  # magic byte 0, schema id (prefix_schema_id_serializer)
_MAGIC_BYTE = 0


def wire_header(schema_id: int) -> bytes:
    """The 5-byte Confluent wire-format prefix of schema `schema_id`."""
    return _WIRE_HEADER.pack(_MAGIC_BYTE, schema_id)


def parse_writer_schema(text: str) -> Any:
    """The fastavro-parsed form of a registered schema text (parse once, write many)."""
    return fastavro.parse_schema(json.loads(text))


class AvroEncoder:
    """Datums of one registered schema → wire-format bytes.

    `parsed` is `parse_writer_schema` of the registered text, `schema_id` its registry
    id. The buffer keeps the 5-byte header; each call truncates it back to the header
    and writes the datum behind it.
    """

    __slots__ = ("_buf", "parsed", "schema_id")

    def __init__(self, parsed: Any, schema_id: int) -> None:
        self.parsed = parsed
        self.schema_id = schema_id
        self._buf = io.BytesIO(wire_header(schema_id))

    def encode(self, datum: Any) -> bytes:
        """The wire-format bytes of `datum` (as AvroSerializer(datum, ctx))."""
        buf = self._buf
        buf.seek(_WIRE_HEADER.size)
        buf.truncate()
        fastavro.schemaless_writer(buf, self.parsed, datum)
        return buf.getvalue()

