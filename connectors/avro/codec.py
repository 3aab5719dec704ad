"""Avro encoding for the avro plugin: the Confluent wire format, written with fastavro.

Receives: a writer schema (the JSON text registered with the schema registry) and its
registry id, then datums (dicts as `connectors.avro.schema` builds them, union branches
optionally named in fastavro's tuple notation). Hands on: the bytes a Kafka record
carries: magic byte 0, the schema id as 4-byte big-endian unsigned, then the datum's
Avro binary encoding (fastavro's `schemaless_writer`).

Guarantee: the bytes are exactly those confluent_kafka's `AvroSerializer` (with
`auto.register.schemas`, TopicNameStrategy, no rules) writes for the same schema text
and datum. AvroSerializer does the same three things (parse the schema with fastavro,
`schemaless_writer`, `prefix_schema_id_serializer`) plus per-call work this module
does once: the subject lookup, the parse, the header. tests/connectors/avro/test_codec.py
checks the equality byte for byte against AvroSerializer itself.

Pure: no registry or Kafka I/O (registration stays in `connectors.avro.plugin`). An
encoder is not thread-safe (it reuses one buffer); the plugin runs on one thread.
Errors: a datum that does not fit the schema raises what fastavro raises (ValueError,
TypeError), as AvroSerializer let it through.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import struct
from collections.abc import Callable, Sequence
from functools import partial
from operator import attrgetter
from typing import Any

import fastavro

from connectors.avro.schema import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    FieldPlan,
    Warn,
    column_datum,
    days_of,
    row_datum,
    timestamp_micros,
    zoned_timestamp,
)
from service.output.api import UNCHANGED_TOAST, ColumnValue, StoredValue
from service.pgconst import PG_EPOCH_DATE, UNIX_EPOCH_DAYS, UNIX_EPOCH_USECS, USECS_PER_DAY
from service.types.datetime import (
    date_days,
    date_value,
    timestamp_usecs,
    timestamp_value,
    timestamptz_value,
)
from service.types.numeric import numeric_value, scaled_integer

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


# --- per-definition row encoders ---------------------------------------------------

FieldFn = Callable[[ColumnValue], Any]
"""One column of a row → its Avro datum (what `connectors.avro.schema.column_datum` gives)."""

# Days since 2000-01-01 whose year lies in 1..9999: timestamptz_value gives a datetime.
_FIRST_DAY = dt.date.min.toordinal() - PG_EPOCH_DATE.toordinal()
_LAST_DAY = dt.date.max.toordinal() - PG_EPOCH_DATE.toordinal()
_DAY_PREFIX_MAX = 4096
_day_prefix: dict[int, str] = {}


def _date_prefix(days: int) -> str:
    """'YYYY-MM-DDT' of a day, as zoned_timestamp prints it (a 4-digit year, java.time's
    ISO_OFFSET_DATE_TIME: year 5 is `0005`)."""
    found = _day_prefix.get(days)
    if found is None:
        if len(_day_prefix) >= _DAY_PREFIX_MAX:
            _day_prefix.clear()
        day = PG_EPOCH_DATE + dt.timedelta(days=days)
        found = _day_prefix[days] = f"{day.year:04d}-{day.month:02d}-{day.day:02d}T"
    return found


def zoned_timestamp_of_stored(buf: bytes) -> str | None:
    """ZonedTimestamp text of a stored timestamptz, None where the generic path must
    decide (±infinity, years outside 1..9999, a malformed datum).

    Equal to connectors.avro.schema._zoned_timestamp(timestamptz_value(buf)): the same UTC wall
    clock (µs floored into days, as timestamp2tm) and the same 4-digit year.
    """
    if len(buf) != 8:
        return None
    days, rest = divmod(timestamp_usecs(buf), USECS_PER_DAY)
    if not _FIRST_DAY <= days <= _LAST_DAY:
        return None
    secs, us = divmod(rest, 1_000_000)
    clock = f"{secs // 3600:02d}:{secs // 60 % 60:02d}:{secs % 60:02d}"
    return f"{_date_prefix(days)}{clock}.{us:06d}Z"


def micro_timestamp_of_stored(buf: bytes) -> int | None:
    """MicroTimestamp of a stored timestamp (connectors.avro.schema._timestamp_micros of its value):
    µs since 1970, ±infinity as INT64_MAX/INT64_MIN."""
    if len(buf) != 8:
        return None
    micros = timestamp_usecs(buf)
    if micros in (INT64_MIN, INT64_MAX):
        return micros
    return min(micros + UNIX_EPOCH_USECS, INT64_MAX - 1)  # as connectors.avro.schema.clamp_micros


def date_of_stored(buf: bytes) -> int | None:
    """io.debezium.time.Date of a stored date (connectors.avro.schema._days of its value)."""
    if len(buf) != 4:
        return None
    days = date_days(buf)
    if days in (INT32_MIN, INT32_MAX):
        return days
    return days + UNIX_EPOCH_DAYS


def decimal_of_stored(buf: bytes, scale: int, precision: int) -> bytes | None:
    """The Avro decimal bytes fastavro writes for a stored numeric in a column of
    `scale`/`precision`, without the Decimal; None where the generic path must decide
    (NaN/±Infinity, more places than `scale`, more digits than `precision`, a malformed
    datum: the generic path warns, or raises as fastavro or numeric_out would).

    The generic value is Decimal(numeric_out text); fastavro's prepare_bytes_decimal
    writes its digits scaled to `scale` as big-endian two's complement sized by the
    magnitude ((|n|.bit_length() + 8) // 8 bytes), which this reproduces.
    """
    found = scaled_integer(buf, scale, precision)
    if found is None:
        return None
    unscaled, negative = found
    size = (unscaled.bit_length() + 8) // 8
    if negative:
        unscaled = -unscaled
    return unscaled.to_bytes(size, "big", signed=True)


def field_converter(plan: FieldPlan, warn: Warn) -> FieldFn:
    """How one field is filled from a column: straight from the stored datum where the
    result is provably what `column_datum` gives, else `column_datum` itself."""
    mapping = plan.mapping

    def generic(col: ColumnValue) -> Any:
        return column_datum(plan, col, warn)

    if mapping.use_text:
        return generic
    schema = mapping.schema
    stored: Callable[[bytes], Any] | None = None
    expect: Callable[[bytes], object] | None = None
    if isinstance(schema, dict) and schema.get("logicalType") == "decimal":
        scale, precision = int(schema["scale"]), int(schema["precision"])
        stored, expect = partial(decimal_of_stored, scale=scale, precision=precision), numeric_value
    elif mapping.convert is zoned_timestamp:
        stored, expect = zoned_timestamp_of_stored, timestamptz_value
    elif mapping.convert is timestamp_micros:
        stored, expect = micro_timestamp_of_stored, timestamp_value
    elif mapping.convert is days_of:
        stored, expect = date_of_stored, date_value
    if stored is not None:
        fast, to_value = stored, expect

        def from_stored(col: ColumnValue) -> Any:
            if type(col) is StoredValue and col.codec.to_value is to_value:
                out = fast(col.datum)
                if out is not None:
                    return out
            return column_datum(plan, col, warn)

        return from_stored
    convert = mapping.convert

    optional = plan.optional

    def direct(col: ColumnValue) -> Any:
        # column_datum's own first case, without its dispatch on the mapping.
        value = col.value
        if value is not None and value is not UNCHANGED_TOAST:
            out = convert(value)
            if out is not None or optional:
                return out
        return column_datum(plan, col, warn)

    return direct


_NAME = attrgetter("name")


class RowEncoder:
    """The Value (or Key) record of rows of one table definition.

    Built once per definition: `fields` are the Avro field names in plan order, `fns`
    their converters (`field_converter`), `names` the PostgreSQL column names a row must
    carry, in that order, for the direct path. Any other row (a key-only old tuple, a
    row missing columns) goes through `connectors.avro.schema.row_datum`, which matches by name.
    The datum equals `row_datum(plans, row, warn)` once written (decimals may be handed
    on as their Avro bytes instead of a Decimal).
    """

    __slots__ = ("fields", "fns", "names", "plans", "warn", "width")

    def __init__(self, plans: Sequence[FieldPlan], warn: Warn) -> None:
        self.plans = plans
        self.warn = warn
        self.fields = tuple(p.field for p in plans)
        self.fns = tuple(field_converter(p, warn) for p in plans)
        self.names = [p.column for p in plans]
        self.width = len(plans)

    def datum(self, row: Sequence[ColumnValue]) -> dict[str, Any]:
        if len(row) == self.width and list(map(_NAME, row)) == self.names:
            return {f: fn(c) for f, fn, c in zip(self.fields, self.fns, row, strict=True)}
        return row_datum(self.plans, row, self.warn)


class KeyFromValue:
    """A Key record taken from the Value record of the same row.

    A key field's datum is the value field's datum, except where that is None (NULL,
    or nothing representable): the key's fields are required, so they get the type's
    zero value, as `row_datum(key_plans, row)` gives.
    """

    __slots__ = ("_spec",)

    def __init__(
        self,
        key_plans: Sequence[FieldPlan],
        value_plans: Sequence[FieldPlan],
    ) -> None:
        by_column = {p.column: p.field for p in value_plans}
        self._spec = tuple((k.field, by_column[k.column], k.zero) for k in key_plans)

    def datum(self, value: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for kf, vf, zero in self._spec:
            v = value[vf]
            out[kf] = zero if v is None else v
        return out
