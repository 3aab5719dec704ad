"""Debezium-compatible Avro schemas and values for PostgreSQL rows (pure; no I/O).

Receives: a `RelationInfo` (the table as defined at a change's LSN) and rows of
`ColumnValue`s. Hands on: Avro schemas as plain JSON-able dicts (the per-table `Key`,
`Value` and `Envelope` records, and the static parts read once from
`schemas/*.avsc`) and Avro datums (dicts) ready for a schemaless writer.
Serialization and registration happen in `connectors.avro.plugin`; this module never
talks to a registry.

Type mapping (Debezium's PostgresValueConverter with decimal.handling.mode=precise,
time.precision.mode=adaptive_time_microseconds, interval.handling.mode=numeric,
binary.handling.mode=bytes), with the `connect.name` / `connect.parameters` props that
Kafka Connect's AvroData writes so Debezium-aware consumers recognise the semantic type:

    bool → boolean; int2 → int (connect.type int16); int4 → int; int8, oid → long;
    float4 → float; float8 → double;
    numeric(p,s) → bytes logicalType decimal (Connect Decimal, scale s, precision p);
    numeric without typmod → record io.debezium.data.VariableScaleDecimal {scale, value};
    money → Connect Decimal scale 2 (precision 64, AvroData's default);
    date → int io.debezium.time.Date (days since 1970-01-01);
    time → long io.debezium.time.MicroTime; timetz → string io.debezium.time.ZonedTime (UTC);
    timestamp → long io.debezium.time.MicroTimestamp (µs since 1970-01-01);
    timestamptz → string io.debezium.time.ZonedTimestamp (ISO-8601 in UTC, `Z`);
    interval → long io.debezium.time.MicroDuration (a month counts 30.4375 days);
    uuid → string io.debezium.data.Uuid; json, jsonb → string io.debezium.data.Json;
    xml → string io.debezium.data.Xml; enum → string io.debezium.data.Enum {allowed};
    bytea → bytes; bit(1) → boolean; bit(n), varbit → bytes io.debezium.data.Bits {length}
    (little-endian, as java.util.BitSet.toByteArray);
    point → record io.debezium.data.geometry.Point {x, y, wkb, srid};
    a type pgcdc cannot decode, with decoding.unknown_types = bytes → bytes, the stored
    datum, with connect.parameters {"__pgcdc.type": the type} (omit: no field at all);
    extension types (hstore, ltree, PostGIS, pgvector, ...): connectors.avro.extension_types;
    text, varchar, bpchar, char, name, inet, cidr, macaddr, macaddr8, ranges, composites,
    and every other type → string holding PostgreSQL's own text output for the value;
    arrays → Avro array of the element mapping, items nullable; multi-dimensional arrays
    are flattened in row-major order (Debezium has no multi-dimensional arrays either).
A domain maps as its base type (Debezium: the column's root type), with the domain's
typmod (numeric(5,2)'s domain: Decimal scale 2, precision 5; a domain over a domain: the
innermost typmod); a domain over an array as that array (a domain over int[]: an array
of int). An array of a domain has items of the domain's base type with its typmod
(Debezium 3.6 has no mapping for it and leaves the column out). A domain described
without its base (`ColumnMeta.elem_type_oid` 0) maps as text.

Special values:
- numeric NaN/±Infinity cannot be held by an Avro decimal. In `precise` mode a nullable
  column gets null and a `numeric_special_value_dropped` warning; a NOT NULL column
  raises `PluginError` telling the user to choose `decimal.handling.mode=string` or
  `double` (both keep the value: "NaN"/"Infinity" text, or a float).
- ±infinity dates and timestamps become the extreme int32/int64 values for the numeric
  encodings (as PostgreSQL stores them) and "infinity"/"-infinity" for ZonedTimestamp.
- An unchanged TOASTed value (UNCHANGED_TOAST) becomes Debezium's placeholder
  `__debezium_unavailable_value` for string fields, its UTF-8 bytes for bytes fields,
  and a one-element array of it for string arrays; any other type gets null (nullable)
  or the type's zero value (NOT NULL) with an `unchanged_toast_unrepresentable` warning.
- A before-image that carries only the replica-identity key (DELETE, or an UPDATE of
  the key, under REPLICA IDENTITY DEFAULT) leaves the other columns null, or the type's
  zero value when the column is NOT NULL (Avro has no "absent" for a required field).

Names: record names and field names are made Avro-safe the way Debezium's
SchemaNameAdjuster does (every character outside [A-Za-z0-9_] becomes `_`, and a leading
digit gets a `_` prefix); topics keep [A-Za-z0-9._-] and replace everything else by `_`.
A named type used by several columns (VariableScaleDecimal) is defined at its first use
in a record and referenced by full name after it, as Kafka Connect's AvroData does.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from types import SimpleNamespace
from typing import Any

from connectors.avro.array_text import array_elements
from connectors.avro.extension_types import (
    HSTORE_MODES,
    POINT_SCHEMA,
    extension_mapping,
    point_datum,
)
from connectors.schemas import load_static
from service.errors import PluginError
from service.output.api import UNCHANGED_TOAST, ColumnMeta, ColumnValue, RelationInfo
from service.pgconst import UNIX_EPOCH_DAYS, UNIX_EPOCH_USECS
from service.types.unknown import TYPE_PARAMETER

DEBEZIUM_RELEASE = "3.6.1.Final"  # the Debezium release whose wire format these mirror
# source.version: Debezium's release, then "-pgcdc". The leading major.minor.micro stay the
# release's, so consumers that parse or compare them (split on ".", Maven's
# ComparableVersion, startswith("3.6")) treat pgcdc as that Debezium, while the qualifier
# says which producer wrote the event.
DEBEZIUM_VERSION = f"{DEBEZIUM_RELEASE}-pgcdc"
CONNECTOR = "postgresql"
UNAVAILABLE = "__debezium_unavailable_value"
UNAVAILABLE_BYTES = UNAVAILABLE.encode()

_UNIX_ORDINAL = dt.date(1970, 1, 1).toordinal()
_MICROS_PER_MONTH = 2_629_800_000_000  # 30.4375 days, Debezium's DAYS_PER_MONTH_AVG
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

DECIMAL_MODES = ("precise", "string", "double")

Converter = Callable[[Any], Any]
"""Turns a (non-null, not unchanged) Python value into its Avro datum."""

Warn = Callable[[str, str], None]
"""(event, column) -> None: how converters report a lossy value."""


# --- static schemas ------------------------------------------------------------------


def inline_references(schema: Any, named: dict[str, dict[str, Any]]) -> Any:
    """Replace references to `named` types by their definition at first use.

    The registry wants a self-contained schema; the .avsc files refer to the Source and
    transaction block records by full name.
    """
    seen: set[str] = set()

    def walk(node: Any) -> Any:
        if isinstance(node, str):
            if node in named and node not in seen:
                seen.add(node)
                return walk(named[node])
            return node
        if isinstance(node, list):
            return [walk(n) for n in node]
        if isinstance(node, dict):
            if node.get("type") == "record":
                full = (
                    node["name"]
                    if "." in node["name"]
                    else (
                        f"{node.get('namespace')}.{node['name']}"
                        if node.get("namespace")
                        else node["name"]
                    )
                )
                seen.add(full)
            return {
                k: (walk(v) if k in ("type", "fields", "items") else v) for k, v in node.items()
            }
        return node

    return walk(schema)


def source_schema() -> dict[str, Any]:
    return load_static("source")


def block_schema() -> dict[str, Any]:
    return load_static("transaction_block")


def static_with_refs(name: str) -> dict[str, Any]:
    """A static schema with Source and event.block inlined."""
    named = {
        "io.debezium.connector.postgresql.Source": source_schema(),
        "event.block": block_schema(),
    }
    resolved: dict[str, Any] = inline_references(load_static(name), named)
    return resolved


# --- names ---------------------------------------------------------------------------

_AVRO_BAD = re.compile(r"[^A-Za-z0-9_]")
_TOPIC_BAD = re.compile(r"[^A-Za-z0-9._-]")


def avro_name(name: str) -> str:
    """An Avro-safe name part (SchemaNameAdjuster's avro mode)."""
    fixed = _AVRO_BAD.sub("_", name)
    if not fixed or fixed[0].isdigit():
        fixed = "_" + fixed
    return fixed


def avro_namespace(*parts: str) -> str:
    return ".".join(avro_name(p) for p in parts)


def topic_name(prefix: str, schema: str, table: str) -> str:
    return f"{prefix}.{_TOPIC_BAD.sub('_', schema)}.{_TOPIC_BAD.sub('_', table)}"


# --- type mapping --------------------------------------------------------------------


def _semantic(base: str, name: str, **params: str) -> dict[str, Any]:
    out: dict[str, Any] = {"type": base, "connect.version": 1}
    if params:
        out["connect.parameters"] = params
    out["connect.name"] = name
    return out


def decimal_schema(precision: int, scale: int, with_precision_param: bool) -> dict[str, Any]:
    params = {"scale": str(scale)}
    if with_precision_param:
        params["connect.decimal.precision"] = str(precision)
    return {
        "type": "bytes",
        "scale": scale,
        "precision": precision,
        "connect.version": 1,
        "connect.parameters": params,
        "connect.name": "org.apache.kafka.connect.data.Decimal",
        "logicalType": "decimal",
    }


def unscaled_bytes(n: int) -> bytes:
    """Big-endian two's complement in the fewest bytes (java.math.BigInteger.toByteArray)."""
    length = ((n if n >= 0 else ~n).bit_length() + 8) // 8
    return n.to_bytes(length, "big", signed=True)


def variable_scale_decimal(d: Decimal) -> dict[str, Any]:
    """Debezium's VariableScaleDecimal datum for a finite Decimal."""
    sign, digits, exp = d.as_tuple()
    assert isinstance(exp, int)
    unscaled = int("".join(map(str, digits)) or "0")
    if sign:
        unscaled = -unscaled
    if exp > 0:
        unscaled *= 10**exp
        exp = 0
    return {"scale": -exp, "value": unscaled_bytes(unscaled)}


def days_of(value: Any) -> int:
    if isinstance(value, dt.date):
        return value.toordinal() - _UNIX_ORDINAL
    infinite = getattr(value, "infinite", 0)
    if infinite:
        return INT32_MAX if infinite > 0 else INT32_MIN
    return int(value.days) + UNIX_EPOCH_DAYS


def _clock_micros(t: dt.time) -> int:
    return ((t.hour * 60 + t.minute) * 60 + t.second) * 1_000_000 + t.microsecond


def _time_micros(value: Any) -> int:
    if isinstance(value, dt.time):
        return _clock_micros(value)
    return int(value.micros)


def timestamp_micros(value: Any) -> int:
    if isinstance(value, dt.datetime):
        d: dt.datetime = value
        if d.tzinfo is not None:
            d = d.astimezone(dt.UTC).replace(tzinfo=None)
        return (d.toordinal() - _UNIX_ORDINAL) * 86_400_000_000 + _clock_micros(d.time())
    infinite = getattr(value, "infinite", 0)
    if infinite:
        return INT64_MAX if infinite > 0 else INT64_MIN
    return clamp_micros(int(value.micros) + UNIX_EPOCH_USECS)


def clamp_micros(micros: int) -> int:
    """A finite timestamp after 294247-01-10 04:00:54.775807 (int64 µs since 1970 runs
    out; PostgreSQL's own range goes to 294276) is clamped to the largest finite long,
    INT64_MAX - 1, which stays distinct from +infinity's INT64_MAX."""
    return min(micros, INT64_MAX - 1)


def _fraction(us: int) -> str:
    return f".{us:06d}".rstrip("0") if us else ""


def _iso_year(year: int) -> str:
    """java.time's ISO year: 4 digits, a sign outside 0000..9999 (year 0 is 1 BC)."""
    if year > 9999:
        return f"+{year}"
    if year < 0:
        return f"-{-year:04d}"
    return f"{year:04d}"


def zoned_timestamp(value: Any) -> str:
    """ZonedTimestamp text: ISO-8601 in UTC with `Z` and always six fraction digits, as
    Debezium 3's ZonedTimestamp formatter prints it (`…05.500000Z`, `…05.000000Z`)."""
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC)
        return (
            f"{_iso_year(value.year)}-{value.month:02d}-{value.day:02d}T"
            f"{value:%H:%M:%S}.{value.microsecond:06d}Z"
        )
    infinite = getattr(value, "infinite", 0)
    if infinite:
        return "infinity" if infinite > 0 else "-infinity"
    from service.types.datetime import ymd  # noqa: PLC0415  (the types package is optional here)

    days, micros = divmod(int(value.micros), 86_400_000_000)
    year, month, day = ymd(days)
    secs, us = divmod(micros, 1_000_000)
    return (
        f"{_iso_year(year)}-{month:02d}-{day:02d}T{secs // 3600:02d}:"
        f"{secs // 60 % 60:02d}:{secs % 60:02d}.{us:06d}Z"
    )


def _zoned_time(value: Any) -> str:
    """ZonedTime text: the time moved to UTC, ISO_OFFSET_TIME with `Z`."""
    if isinstance(value, dt.time):
        micros = _clock_micros(value)
        offset = value.utcoffset()
        if offset is not None:
            micros -= int(offset.total_seconds() * 1_000_000)
    else:
        micros = int(value.micros) + int(value.zone or 0) * 1_000_000  # zone: seconds west
    micros %= 86_400_000_000
    secs, us = divmod(micros, 1_000_000)
    return f"{secs // 3600:02d}:{secs // 60 % 60:02d}:{secs % 60:02d}{_fraction(us)}Z"


def _duration_micros(value: Any) -> int:
    """MicroDuration.durationMicros with DAYS_PER_MONTH_AVG, clamped to int64."""
    if isinstance(value, dt.timedelta):
        total = (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
    else:
        total = value.months * _MICROS_PER_MONTH + value.days * 86_400_000_000 + value.micros
    return int(max(INT64_MIN, min(INT64_MAX, total)))


def _bits(text: str) -> bytes:
    """A bit string as java.util.BitSet.toByteArray: last character is bit 0."""
    if not text:
        return b""
    return int(text, 2).to_bytes((len(text) + 7) // 8, "little")


def _flatten(value: Any) -> list[Any]:
    """An array's elements in row-major order. A decoded array (PgArray) nests one list
    level per dimension, and only those are flattened: an element whose value is
    itself a list (pgvector's vector and halfvec) stays whole."""
    depth = len(getattr(value, "lower_bounds", ())) or None
    return _flatten_levels(value, depth)


def _flatten_levels(value: Any, depth: int | None) -> list[Any]:
    if depth == 1:
        return list(value)
    out: list[Any] = []
    for item in value:
        if isinstance(item, list | tuple) and depth is not None:
            out.extend(_flatten_levels(item, depth - 1))
        elif isinstance(item, list | tuple) and depth is None:
            out.extend(_flatten_levels(item, None))
        else:
            out.append(item)
    return out


@dataclass(slots=True, frozen=True)
class TypeMapping:
    """How one PostgreSQL type becomes Avro.

    `convert` maps the Python value; `use_text` says the datum is the column's text
    output instead (types whose canonical form is PostgreSQL's text); `kind` is the
    Avro base kind ('string', 'bytes', 'int', 'long', 'float', 'double', 'boolean',
    'array', 'record') used for placeholders and zero values.
    """

    schema: Any
    convert: Converter
    use_text: bool
    kind: str
    item_kind: str = ""
    zero: Any = None  # the NOT NULL placeholder when the kind's default does not fit


def _ident(v: Any) -> Any:
    return v


def _to_str(v: Any) -> str:
    return v if isinstance(v, str) else str(v)


def _to_bytes(v: Any) -> bytes:
    return v if isinstance(v, bytes) else bytes(v)


_TEXT = TypeMapping("string", _to_str, True, "string")
_STRING = TypeMapping("string", _to_str, False, "string")

_BY_OID: dict[int, TypeMapping] = {
    16: TypeMapping("boolean", bool, False, "boolean"),
    17: TypeMapping("bytes", _to_bytes, False, "bytes"),
    18: _STRING,  # "char"
    19: _STRING,  # name
    20: TypeMapping("long", int, False, "long"),
    21: TypeMapping({"type": "int", "connect.type": "int16"}, int, False, "int"),
    23: TypeMapping("int", int, False, "int"),
    25: _STRING,
    26: TypeMapping("long", int, False, "long"),  # oid
    114: TypeMapping(_semantic("string", "io.debezium.data.Json"), _to_str, False, "string"),
    142: TypeMapping(_semantic("string", "io.debezium.data.Xml"), _to_str, True, "string"),
    700: TypeMapping("float", float, False, "float"),
    701: TypeMapping("double", float, False, "double"),
    1042: _STRING,  # bpchar
    1043: _STRING,  # varchar
    1082: TypeMapping(_semantic("int", "io.debezium.time.Date"), days_of, False, "int"),
    1083: TypeMapping(_semantic("long", "io.debezium.time.MicroTime"), _time_micros, False, "long"),
    1114: TypeMapping(
        _semantic("long", "io.debezium.time.MicroTimestamp"), timestamp_micros, False, "long"
    ),
    1184: TypeMapping(
        _semantic("string", "io.debezium.time.ZonedTimestamp"), zoned_timestamp, False, "string"
    ),
    1186: TypeMapping(
        _semantic("long", "io.debezium.time.MicroDuration"), _duration_micros, False, "long"
    ),
    1266: TypeMapping(
        _semantic("string", "io.debezium.time.ZonedTime"), _zoned_time, False, "string"
    ),
    2950: TypeMapping(_semantic("string", "io.debezium.data.Uuid"), _to_str, False, "string"),
    3802: TypeMapping(_semantic("string", "io.debezium.data.Json"), _to_str, False, "string"),
    3614: TypeMapping(
        _semantic("string", "io.debezium.data.Tsvector"), _to_str, True, "string"
    ),  # tsvector: its text, as Debezium's Tsvector
}
_NUMERIC, _MONEY, _BIT, _VARBIT, _BOX, _POINT_OID = 1700, 790, 1560, 1562, 603, 600


def _numeric_mapping(
    typmod: int,
    mode: str,
    column: str,
    nullable: bool,
    warn: Warn,
) -> TypeMapping:
    if mode == "string":
        return TypeMapping("string", _to_str, True, "string")
    if mode == "double":
        return TypeMapping("double", float, False, "double")

    def special(d: Decimal) -> bool:
        if d.is_finite():
            return False
        if not nullable:
            raise PluginError(
                f"numeric column {column} holds {d}, which an Avro decimal cannot carry; "
                "set decimal.handling.mode=string or double",
                field=column,
            )
        warn("numeric_special_value_dropped", column)
        return True

    if typmod >= 4:
        precision, scale = ((typmod - 4) >> 16) & 0xFFFF, (typmod - 4) & 0x7FF

        def fixed(v: Any) -> Any:
            d = v if isinstance(v, Decimal) else Decimal(v)
            return None if special(d) else d

        return TypeMapping(decimal_schema(precision, scale, True), fixed, False, "bytes")

    def variable(v: Any) -> Any:
        d = v if isinstance(v, Decimal) else Decimal(v)
        return None if special(d) else variable_scale_decimal(d)

    return TypeMapping(load_static("variable_scale_decimal"), variable, False, "record")


_EMPTY_GEOMETRY = {"wkb": bytes.fromhex("010700000000000000"), "srid": 0}  # createEmpty
_ZERO_BY_EXT: dict[str, Any] = {
    "geometry": _EMPTY_GEOMETRY,
    "geography": _EMPTY_GEOMETRY,
    "sparsevec": {"dimensions": 0, "vector": []},
}
_POINT = TypeMapping(
    POINT_SCHEMA, point_datum, False, "record", zero=point_datum(SimpleNamespace(x=0.0, y=0.0))
)


def type_mapping(
    col: ColumnMeta,
    decimal_mode: str,
    warn: Warn,
    oid: int | None = None,
    *,
    hstore_mode: str = "json",
) -> TypeMapping:
    """The Avro mapping of a column's type (see the module docstring)."""
    oid = col.type_oid if oid is None else oid
    if col.stored_bytes_type:
        # decoding.unknown_types = bytes: the stored bytes, the type named in a parameter
        schema = {"type": "bytes", "connect.parameters": {TYPE_PARAMETER: col.stored_bytes_type}}
        return TypeMapping(schema, _to_bytes, False, "bytes")
    if col.kind == "e":
        allowed = ",".join(col.enum_labels)
        return TypeMapping(
            _semantic("string", "io.debezium.data.Enum", allowed=allowed), _to_str, False, "string"
        )
    if col.kind == "d":
        # A domain maps as its base type (Debezium resolves domains to their base), with
        # the domain's typmod when the column has none. A domain over an array comes as
        # kind 'a' (ColumnMeta.kind); described as a domain, its element is unknown.
        if col.elem_kind == "a":
            raise PluginError(
                f"column {col.name}: a domain over an array must be described as the array",
                field=col.name,
            )
        if col.elem_type_oid:
            typmod = col.typmod if col.typmod >= 0 else col.elem_typmod
            return type_mapping(
                ColumnMeta(
                    col.name,
                    col.attnum,
                    col.elem_type_oid,
                    col.type_name,
                    typmod,
                    col.notnull,
                    kind=col.elem_kind,
                    enum_labels=col.enum_labels,
                    ext=col.ext,
                ),
                decimal_mode,
                warn,
                hstore_mode=hstore_mode,
            )
        return _TEXT
    if col.kind == "a":
        # Items keep the element's mapping: its kind (enum), and the column's typmod,
        # which is the element's (numeric(10,3)[], bit(1)[]), else a domain's (an array
        # of numeric(5,2)'s domain, a domain over numeric(5,2)[]).
        item = type_mapping(col.element(), decimal_mode, warn, hstore_mode=hstore_mode)
        schema = {"type": "array", "items": ["null", item.schema]}
        if item.use_text:
            # Text-mapped items are each element's own output text, cut from the
            # array's text (box is the one built-in type whose delimiter is ';').
            delim = ";" if col.elem_type_oid == _BOX else ","
            item_text = item.convert

            def array_of_texts(text: Any) -> list[Any]:
                return [
                    None if x is None else item_text(x) for x in array_elements(str(text), delim)
                ]

            return TypeMapping(schema, array_of_texts, True, "array", item.kind)
        item_conv = item.convert

        def array(v: Any) -> list[Any]:
            return [None if x is None else item_conv(x) for x in _flatten(v)]

        return TypeMapping(schema, array, False, "array", item.kind)
    if col.kind in ("c", "r"):
        return _TEXT
    if col.ext:
        if hstore_mode not in HSTORE_MODES:
            raise PluginError(
                f"hstore.handling.mode must be one of {HSTORE_MODES}", field="hstore.handling.mode"
            )
        ext = extension_mapping(col.ext, hstore_mode)
        if ext is None:
            return _STRING  # Debezium has no mapping: the value is PostgreSQL's text
        schema, convert, kind = ext
        zero = _ZERO_BY_EXT.get(col.ext)
        if col.ext == "hstore":
            zero = {} if hstore_mode == "map" else "{}"
        return TypeMapping(schema, convert, False, kind, zero=zero)
    if oid == _POINT_OID:
        return _POINT
    found = _BY_OID.get(oid)
    if found is not None:
        return found
    if oid == _NUMERIC:
        return _numeric_mapping(col.typmod, decimal_mode, col.name, not col.notnull, warn)
    if oid == _MONEY:
        if decimal_mode == "string":
            return _TEXT
        if decimal_mode == "double":
            return TypeMapping("double", float, False, "double")
        return TypeMapping(
            decimal_schema(64, 2, False),
            lambda v: v if isinstance(v, Decimal) else Decimal(v) / 100,
            False,
            "bytes",
        )
    if oid in (_BIT, _VARBIT):
        if oid == _BIT and col.typmod == 1:
            return TypeMapping("boolean", lambda t: t == "1", True, "boolean")
        length = col.typmod if col.typmod > 0 else 2_147_483_647
        return TypeMapping(
            _semantic("bytes", "io.debezium.data.Bits", length=str(length)), _bits, True, "bytes"
        )
    return _TEXT


_ZERO: dict[str, Any] = {
    "string": "",
    "bytes": b"",
    "int": 0,
    "long": 0,
    "float": 0.0,
    "double": 0.0,
    "boolean": False,
    "array": [],
    "record": {"scale": 0, "value": b"\x00"},
}


# --- per-table plans -----------------------------------------------------------------


@dataclass(slots=True, frozen=True)
class FieldPlan:
    """One column of the Value (or Key) record."""

    column: str  # the PostgreSQL column name (rows are matched by it)
    field: str  # the Avro field name
    mapping: TypeMapping
    optional: bool

    @property
    def zero(self) -> Any:
        if self.mapping.zero is not None:
            return self.mapping.zero
        if (
            self.mapping.kind == "bytes"
            and isinstance(self.mapping.schema, dict)
            and self.mapping.schema.get("logicalType") == "decimal"
        ):
            return Decimal(0)
        return _ZERO[self.mapping.kind]


def define_named_once(fields: list[dict[str, Any]], namespace: str) -> list[dict[str, Any]]:
    """Record fields in which each named type is defined at its first use only.

    Avro forbids a second definition of a name; a table with two unconstrained numeric
    columns (or one and a numeric[]) names VariableScaleDecimal twice. Later uses become
    references by full name, as Kafka Connect's AvroData writes them. Fields without a
    repeated name come back equal, key order included (the schema text is unchanged).
    """
    seen: set[str] = set()

    def walk(node: Any, namespace: str) -> Any:
        if isinstance(node, list):
            return [walk(n, namespace) for n in node]
        if not isinstance(node, dict):
            return node
        kind = node.get("type")
        if kind in ("record", "enum", "fixed", "error"):
            name = str(node["name"])
            space = str(node.get("namespace", namespace))
            full = name if "." in name or not space else f"{space}.{name}"
            if full in seen:
                return full
            seen.add(full)
            if kind in ("record", "error"):
                inner = full.rsplit(".", 1)[0] if "." in full else ""
                return {
                    **node,
                    "fields": [{**f, "type": walk(f["type"], inner)} for f in node["fields"]],
                }
            return node
        if kind == "array":
            return {**node, "items": walk(node["items"], namespace)}
        if kind == "map":
            return {**node, "values": walk(node["values"], namespace)}
        if isinstance(kind, dict | list):
            return {**node, "type": walk(kind, namespace)}
        return node

    return [{**f, "type": walk(f["type"], namespace)} for f in fields]


def field_schema(plan: FieldPlan) -> dict[str, Any]:
    if plan.optional:
        return {"name": plan.field, "type": ["null", plan.mapping.schema], "default": None}
    return {"name": plan.field, "type": plan.mapping.schema}


@dataclass(slots=True, frozen=True)
class TablePlan:
    """Everything needed to turn one table's rows into Avro, for one definition."""

    topic: str
    namespace: str
    fields: tuple[FieldPlan, ...]
    key_fields: tuple[FieldPlan, ...]  # empty: the table has no key, messages get none
    key_schema: dict[str, Any] | None
    envelope_schema: dict[str, Any]


def build_table_plan(
    prefix: str,
    rel: RelationInfo,
    excluded: frozenset[str],
    decimal_mode: str,
    warn: Warn,
    *,
    hstore_mode: str = "json",
) -> TablePlan:
    """The Key and Envelope schemas of `rel` and how to fill them.

    `excluded` holds column names dropped by the column filters (never key columns:
    the key must stay whole).
    """
    ns = avro_namespace(prefix, rel.schema, rel.name)
    plans: list[FieldPlan] = []
    for col in rel.columns:
        if col.name in excluded and col.name not in rel.key_columns:
            continue
        mapping = type_mapping(col, decimal_mode, warn, hstore_mode=hstore_mode)
        plans.append(FieldPlan(col.name, avro_name(col.name), mapping, not col.notnull))
    by_name = {p.column: p for p in plans}
    key_plans = tuple(
        FieldPlan(p.column, p.field, p.mapping, False)
        for name in rel.key_columns
        if (p := by_name.get(name)) is not None
    )
    value_record = {
        "type": "record",
        "name": "Value",
        "namespace": ns,
        "fields": define_named_once([field_schema(p) for p in plans], ns),
        "connect.name": f"{ns}.Value",
    }
    key_schema = None
    if key_plans:
        key_schema = {
            "type": "record",
            "name": "Key",
            "namespace": ns,
            "fields": define_named_once([field_schema(p) for p in key_plans], ns),
            "connect.name": f"{ns}.Key",
        }
    envelope = {
        "type": "record",
        "name": "Envelope",
        "namespace": ns,
        "fields": [
            {"name": "before", "type": ["null", value_record], "default": None},
            {"name": "after", "type": ["null", f"{ns}.Value"], "default": None},
            {"name": "source", "type": source_schema()},
            {"name": "transaction", "type": ["null", block_schema()], "default": None},
            {"name": "op", "type": "string"},
            {"name": "ts_ms", "type": ["null", "long"], "default": None},
            {"name": "ts_us", "type": ["null", "long"], "default": None},
            {"name": "ts_ns", "type": ["null", "long"], "default": None},
        ],
        # Debezium 3's envelope (Envelope.SCHEMA_VERSION 2: ts_us and ts_ns).
        "connect.version": 2,
        "connect.name": f"{ns}.Envelope",
    }
    return TablePlan(
        topic_name(prefix, rel.schema, rel.name), ns, tuple(plans), key_plans, key_schema, envelope
    )


def unchanged_toast_datum(mapping: TypeMapping) -> Any:
    """Debezium's placeholder for an unchanged TOASTed value of this mapping: the
    string, its UTF-8 bytes (a bytes field that is not a decimal), or a one-element
    array of it (an array of strings); None when the type has none (the caller warns
    `unchanged_toast_unrepresentable`). The native encoder writes the same
    (connectors.avro.native_plan.placeholder_field)."""
    if mapping.kind == "string":
        return UNAVAILABLE
    if mapping.kind == "bytes" and not (
        isinstance(mapping.schema, dict) and mapping.schema.get("logicalType") == "decimal"
    ):
        return UNAVAILABLE_BYTES
    if mapping.kind == "array" and mapping.item_kind == "string":
        return [UNAVAILABLE]
    return None


def column_datum(plan: FieldPlan, col: ColumnValue, warn: Warn) -> Any:
    """The datum of one column for its field (the generic path: any ColumnValue)."""
    mapping = plan.mapping
    if mapping.use_text:
        text = col.text
        if text is not None:
            return mapping.convert(text)
        value = col.value
    else:
        value = col.value
        if value is not None and value is not UNCHANGED_TOAST:
            out = mapping.convert(value)
            if out is None and not plan.optional:
                return plan.zero
            return out
    if value is None:
        return None if plan.optional else plan.zero
    if value is UNCHANGED_TOAST:
        placeholder = unchanged_toast_datum(mapping)
        if placeholder is not None:
            return placeholder
        warn("unchanged_toast_unrepresentable", plan.column)
        return None if plan.optional else plan.zero
    # use_text but no text for a non-null value: the text function gave up.
    return mapping.convert(str(value))


_COLUMNS: dict[int, tuple[Sequence[FieldPlan], list[str]]] = {}


def _columns_of(plans: Sequence[FieldPlan]) -> list[str]:
    """The column names of a plan, in order (kept per plan object: rows are checked
    against them once per row)."""
    found = _COLUMNS.get(id(plans))
    if found is not None and found[0] is plans:
        return found[1]
    names = [p.column for p in plans]
    if len(_COLUMNS) >= 1024:
        _COLUMNS.clear()
    _COLUMNS[id(plans)] = (plans, names)
    return names


def row_datum(
    plans: Sequence[FieldPlan],
    row: Sequence[ColumnValue],
    warn: Warn,
) -> dict[str, Any]:
    """The Value (or Key) record of a row; columns the row lacks are null (or zero)."""
    if len(row) == len(plans) and [c.name for c in row] == _columns_of(plans):
        return {
            plan.field: column_datum(plan, col, warn) for plan, col in zip(plans, row, strict=True)
        }
    out: dict[str, Any] = {}
    by_name = {c.name: c for c in row}
    for plan in plans:
        found = by_name.get(plan.column)
        if found is None:
            out[plan.field] = None if plan.optional else plan.zero
        else:
            out[plan.field] = column_datum(plan, found, warn)
    return out


def key_values(plans: Sequence[FieldPlan], row: Sequence[ColumnValue]) -> tuple[Any, ...]:
    """The raw key values of a row, for detecting an UPDATE that changes the key."""
    by_name = {c.name: c for c in row}
    return tuple(by_name[p.column].value if p.column in by_name else None for p in plans)
