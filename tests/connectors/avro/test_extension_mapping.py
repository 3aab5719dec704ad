"""Avro mappings of point and the extension types equal Debezium 3.6's."""

from __future__ import annotations

import io
import struct
from typing import Any

import fastavro
import pytest

from connectors.avro.extension_types import hstore_json, java_hash_order, java_string_hash
from connectors.avro.schema import FieldPlan, column_datum, field_schema, type_mapping
from service.errors import PluginError
from service.output.api import ColumnMeta, ColumnValue
from service.types.geometric import Point
from service.types.pgvector import SparseVector
from service.types.postgis import Geometry


def _meta(oid: int = 90001, ext: str = "", kind: str = "b", notnull: bool = False) -> ColumnMeta:
    return ColumnMeta("c", 1, oid, "t", -1, notnull, kind=kind, elem_type_oid=oid, ext=ext)


def _encode(schema: Any, datum: Any) -> Any:
    """Write and read back the datum with the schema (the schema is valid Avro)."""
    record = {"type": "record", "name": "R", "fields": [{"name": "f", "type": schema}]}
    parsed = fastavro.parse_schema(record)
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, parsed, {"f": datum})
    buf.seek(0)
    return fastavro.schemaless_reader(buf, parsed)["f"]


def _datum(meta: ColumnMeta, value: Any, **kw: str) -> Any:
    mapping = type_mapping(meta, "precise", lambda e, c: None, **kw)
    plan = FieldPlan("c", "c", mapping, not meta.notnull)
    col = ColumnValue("c", meta.type_oid, "t", lambda: value, lambda: str(value))
    out = column_datum(plan, col, lambda e, c: None)
    assert _encode(field_schema(plan)["type"], out) == out
    return mapping.schema, out


def test_point_is_debezium_point_with_wkb() -> None:
    """point → io.debezium.data.geometry.Point {x, y, wkb (2D WKB), srid null}."""
    schema, out = _datum(_meta(600), Point(1.5, -2.0))
    assert schema["connect.name"] == "io.debezium.data.geometry.Point"
    assert [f["name"] for f in schema["fields"]] == ["x", "y", "wkb", "srid"]
    assert out == {"x": 1.5, "y": -2.0, "wkb": struct.pack("<bIdd", 1, 1, 1.5, -2.0), "srid": None}


def test_geometry_and_geography_are_wkb_and_srid() -> None:
    """PostGIS values → Geometry / Geography {wkb: the EWKB, srid: 0 when none}."""
    ewkb = bytes.fromhex("0101000020E6100000000000000000F03F0000000000000040")
    schema, out = _datum(_meta(ext="geometry"), Geometry(ewkb, 4326))
    assert schema["connect.name"] == "io.debezium.data.geometry.Geometry"
    assert out == {"wkb": ewkb, "srid": 4326}
    schema, out = _datum(_meta(ext="geography"), Geometry(b"\x01", 0))
    assert schema["connect.name"] == "io.debezium.data.geometry.Geography"
    assert out == {"wkb": b"\x01", "srid": 0}


def test_hstore_json_and_map_in_java_hashmap_order() -> None:
    """hstore → Json text (default) or map, in java.util.HashMap's iteration order."""
    value = {"z": "1", "aa": None, "b": 'q"\\\n\x01'}
    schema, out = _datum(_meta(ext="hstore"), value)
    assert schema["connect.name"] == "io.debezium.data.Json"
    assert out == '{"aa":null,"b":"q\\"\\\\\\n\\u0001","z":"1"}'
    schema, out = _datum(_meta(ext="hstore"), value, hstore_mode="map")
    assert schema == {"type": "map", "values": ["null", "string"]}
    assert list(out) == ["aa", "b", "z"]
    assert hstore_json({}) == "{}"
    with pytest.raises(PluginError):
        type_mapping(_meta(ext="hstore"), "precise", lambda e, c: None, hstore_mode="xml")


def test_java_hash_order_models_hashmap() -> None:
    """String.hashCode and bucket order, with resizes at 3/4 of the table."""
    assert java_string_hash("aa") == 3104 and java_string_hash("é") == 233
    assert java_string_hash("polygenelubricants") == 0x80000000  # Integer.MIN_VALUE
    keys = [f"k{i}" for i in range(13)]  # 13 > 12: the table grows to 32 buckets
    order = java_hash_order([java_string_hash(k) for k in keys])
    spread = [(h ^ (h >> 16)) & 31 for h in map(java_string_hash, keys)]
    assert order == sorted(range(13), key=lambda i: (spread[i], i))


def test_vectors_as_debezium_vector_types() -> None:
    """vector → DoubleVector of the printed digits; halfvec → FloatVector; sparsevec →
    SparseDoubleVector {dimensions, vector as MapEntry array}."""
    f4 = struct.unpack("<f", struct.pack("<f", 0.1))[0]
    schema, out = _datum(_meta(ext="vector"), [f4, 1.0])
    assert schema["connect.name"] == "io.debezium.data.DoubleVector"
    assert out == [0.1, 1.0]
    schema, out = _datum(_meta(ext="halfvec"), [1.5, 65504.0])
    assert schema["connect.name"] == "io.debezium.data.FloatVector" and out == [1.5, 65504.0]
    schema, out = _datum(_meta(ext="sparsevec"), SparseVector(100, (40, 3), (f4, 2.0)))
    assert schema["connect.name"] == "io.debezium.data.SparseDoubleVector"
    # HashMap(2): 2 buckets, grown to 4 at the second key; 40 & 3 = 0 comes first
    assert out == {
        "dimensions": 100,
        "vector": [{"key": 40, "value": 0.1}, {"key": 3, "value": 2.0}],
    }


@pytest.mark.parametrize("ext", ["ltree", "lquery", "isbn", "ean13", "cube", "seg"])
def test_text_valued_extensions_are_strings(ext: str) -> None:
    """ltree → io.debezium.data.Ltree; the types Debezium omits → their text as string."""
    schema, out = _datum(_meta(ext=ext), "a.b")
    assert out == "a.b"
    if ext == "ltree":
        assert schema["connect.name"] == "io.debezium.data.Ltree"
    else:
        assert schema == "string"


def test_arrays_and_not_null_placeholders() -> None:
    """geometry[] items are Geometry records; a NOT NULL geometry's placeholder is
    Debezium's empty GEOMETRYCOLLECTION."""
    meta = ColumnMeta("c", 1, 90002, "t", -1, False, kind="a", elem_type_oid=90001, ext="geometry")
    schema, out = _datum(meta, [Geometry(b"\x01\x02", 3857), None])
    assert schema["items"][1]["connect.name"] == "io.debezium.data.geometry.Geometry"
    assert out == [{"wkb": b"\x01\x02", "srid": 3857}, None]
    mapping = type_mapping(_meta(ext="geometry", notnull=True), "precise", lambda e, c: None)
    assert FieldPlan("c", "c", mapping, False).zero == {
        "wkb": bytes.fromhex("010700000000000000"),
        "srid": 0,
    }
