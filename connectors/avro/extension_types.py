"""Avro mappings of the extension types and of `point`, as Debezium 3.6 maps them.

Receives: the column's `ColumnMeta` (its `ext`: the extension type recognised by name
and output function, service.types.extensions) and the decoders' Python values. Hands
on: `TypeMapping`s for `connectors.avro.schema.type_mapping`:

- point → record io.debezium.data.geometry.Point {x, y, wkb (a 2D WKB point, as
  Point.createValue builds it), srid null};
- geometry / geography → record io.debezium.data.geometry.Geometry / Geography
  {wkb: the EWKB geometry_out prints, srid: its SRID, 0 when none} (PostgisGeometry);
- hstore → string io.debezium.data.Json (`hstore.handling.mode=json`, the default) or
  map<string, string|null> (`map`); both in the order Debezium's HashMap iterates them
  (`java_hash_order`), the JSON compact as Jackson writes it;
- ltree → string io.debezium.data.Ltree;
- vector → array<double> io.debezium.data.DoubleVector, halfvec → array<float>
  io.debezium.data.FloatVector, sparsevec → record io.debezium.data.SparseDoubleVector
  {dimensions: int16, vector: map<int16, double>}, which Kafka Connect's AvroData writes
  as an array of io.confluent.connect.avro.MapEntry {key, value}. Debezium parses the
  vectors from their text, so each double is the float4's printed digits read as a
  double (0.1, not 0.100000001490116);
- lquery, isn, cube, earth, seg (Debezium has no mapping; isbn is a plain string there)
  and citext → string, PostgreSQL's text.

Pure; no I/O.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import Any

from service.types.numeric import float_text

HSTORE_MODES = ("json", "map")

_WKB_POINT = struct.Struct("<bIdd")


def _record(name: str, doc: str, fields: list[dict[str, Any]]) -> dict[str, Any]:
    space, short = name.rsplit(".", 1)
    return {
        "type": "record",
        "name": short,
        "namespace": space,
        "fields": fields,
        "connect.doc": doc,
        "connect.version": 1,
        "connect.name": name,
    }


def _optional(name: str, avro: Any) -> dict[str, Any]:
    return {"name": name, "type": ["null", avro], "default": None}


POINT_SCHEMA = _record(
    "io.debezium.data.geometry.Point",
    "Geometry (POINT)",
    [
        {"name": "x", "type": "double"},
        {"name": "y", "type": "double"},
        _optional("wkb", "bytes"),
        _optional("srid", "int"),
    ],
)
GEOMETRY_SCHEMA = _record(
    "io.debezium.data.geometry.Geometry",
    "Geometry",
    [{"name": "wkb", "type": "bytes"}, _optional("srid", "int")],
)
GEOGRAPHY_SCHEMA = _record(
    "io.debezium.data.geometry.Geography",
    "Geography",
    [{"name": "wkb", "type": "bytes"}, _optional("srid", "int")],
)
SPARSE_VECTOR_SCHEMA = _record(
    "io.debezium.data.SparseDoubleVector",
    "Sparse double vector",
    [
        {"name": "dimensions", "type": {"type": "int", "connect.type": "int16"}},
        {
            "name": "vector",
            "type": {
                "type": "array",
                "items": {
                    "type": "record",
                    "name": "MapEntry",
                    "namespace": "io.confluent.connect.avro",
                    "fields": [
                        {"name": "key", "type": {"type": "int", "connect.type": "int16"}},
                        {"name": "value", "type": "double"},
                    ],
                },
            },
        },
    ],
)


def _vector_schema(items: str, name: str) -> dict[str, Any]:
    return {"type": "array", "items": items, "connect.version": 1, "connect.name": name}


DOUBLE_VECTOR_SCHEMA = _vector_schema("double", "io.debezium.data.DoubleVector")
FLOAT_VECTOR_SCHEMA = _vector_schema("float", "io.debezium.data.FloatVector")


# --- Java's iteration orders and JSON ----------------------------------------------------


def java_string_hash(text: str) -> int:
    """java.lang.String.hashCode: over UTF-16 code units, int32 arithmetic."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h


def _table_size_for(n: int) -> int:
    cap = 1
    while cap < n:
        cap <<= 1
    return cap


def java_hash_order(hashes: Sequence[int], initial_capacity: int | None = None) -> list[int]:
    """The indices of keys (inserted in order, all distinct, with these hashCodes) in the
    order a java.util.HashMap iterates them: by bucket of the final table, insertion
    order within a bucket (resize splits keep it). A bin of 9 in a table under 64 buckets
    resizes, as treeifyBin does; a real tree bin (64+ buckets) is not modelled."""
    cap = 16 if initial_capacity is None else max(_table_size_for(initial_capacity), 1)
    spread = [(h ^ (h >> 16)) & 0xFFFFFFFF for h in hashes]
    for size in range(1, len(hashes) + 1):
        mask = cap - 1
        last = spread[size - 1] & mask
        if cap < 64 and sum(1 for s in spread[: size - 1] if s & mask == last) >= 8:
            cap <<= 1
        if size > cap * 3 // 4:
            cap <<= 1
    mask = cap - 1
    return sorted(range(len(hashes)), key=lambda i: (spread[i] & mask, i))


_JSON_SHORT = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f"}
_JSON_SHORT["\r"] = "\\r"


def _json_string(text: str) -> str:
    out = []
    for ch in text:
        esc = _JSON_SHORT.get(ch)
        if esc is not None:
            out.append(esc)
        elif ord(ch) < 0x20:
            out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _hstore_pairs(value: dict[str, str | None]) -> list[tuple[str, str | None]]:
    items = list(value.items())
    order = java_hash_order([java_string_hash(k) for k, _ in items])
    return [items[i] for i in order]


def hstore_json(value: dict[str, str | None]) -> str:
    """convertHstoreToJsonString: `{"k":"v","n":null}` in HashMap order, as Jackson."""
    body = ",".join(
        f"{_json_string(k)}:{'null' if v is None else _json_string(v)}"
        for k, v in _hstore_pairs(value)
    )
    return "{" + body + "}"


def hstore_map(value: dict[str, str | None]) -> dict[str, str | None]:
    return dict(_hstore_pairs(value))


# --- value converters ------------------------------------------------------------------


def point_datum(value: Any) -> dict[str, Any]:
    x, y = float(value.x), float(value.y)
    return {"x": x, "y": y, "wkb": _WKB_POINT.pack(1, 1, x, y), "srid": None}


def geometry_datum(value: Any) -> dict[str, Any]:
    return {"wkb": bytes(value.ewkb), "srid": int(value.srid)}


def _printed(v: float) -> float:
    """The float4's printed digits read as a double (Double.parseDouble of the text)."""
    return float(float_text(v, single=True))


def double_vector(value: Sequence[float]) -> list[float]:
    return [_printed(v) for v in value]


def float_vector(value: Sequence[float]) -> list[float]:
    return [float(v) for v in value]


def sparse_vector(value: Any) -> dict[str, Any]:
    indices, values = list(value.indices), list(value.values)
    order = java_hash_order([i & 0xFFFF for i in indices], len(indices))
    return {
        "dimensions": int(value.dim),
        "vector": [{"key": indices[k], "value": _printed(values[k])} for k in order],
    }


Mapping = tuple[Any, Callable[[Any], Any], str]
"""(Avro schema, converter, kind), what schema.TypeMapping is built from."""


def extension_mapping(ext: str, hstore_mode: str) -> Mapping | None:
    """The mapping of a recognised extension type, None for one mapped as text."""
    match ext:
        case "hstore" if hstore_mode == "map":
            return {"type": "map", "values": ["null", "string"]}, hstore_map, "map"
        case "hstore":
            json_schema = {
                "type": "string",
                "connect.version": 1,
                "connect.name": "io.debezium.data.Json",
            }
            return json_schema, hstore_json, "string"
        case "ltree":
            ltree_schema = {
                "type": "string",
                "connect.version": 1,
                "connect.name": "io.debezium.data.Ltree",
            }
            return ltree_schema, str, "string"
        case "geometry":
            return GEOMETRY_SCHEMA, geometry_datum, "record"
        case "geography":
            return GEOGRAPHY_SCHEMA, geometry_datum, "record"
        case "vector":
            return DOUBLE_VECTOR_SCHEMA, double_vector, "array"
        case "halfvec":
            return FLOAT_VECTOR_SCHEMA, float_vector, "array"
        case "sparsevec":
            return SPARSE_VECTOR_SCHEMA, sparse_vector, "record"
        case _:
            return None
