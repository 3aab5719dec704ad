"""Extension types are recognised by name and output function, and round-trip their send forms."""

from __future__ import annotations

import struct

import pytest

from service.errors import UnknownTypeError
from service.types import hstore, pgvector, postgis
from service.types.convert import to_python, to_text
from service.types.extensions import extension_type
from service.types.registry import TypeInfo, TypeRegistry


def _info(name: str, src: str, oid: int = 90001) -> TypeInfo:
    return TypeInfo(oid, name, -1, False, "i", "b", src)


def test_recognised_by_name_and_output_function_not_oid() -> None:
    """Any OID works; a wrong name or output function is not the extension's type."""
    assert extension_type(_info("hstore", "hstore_out", 70000)) == "hstore"
    assert extension_type(_info("hstore", "hstore_out", 123456)) == "hstore"
    assert extension_type(_info("hstore", "my_hstore_out")) == ""
    assert extension_type(_info("kv", "hstore_out")) == ""
    stored = hstore.hstore_send_to_stored(b"\0\0\0\0")
    registry = TypeRegistry([_info("kv", "hstore_out")])
    with pytest.raises(UnknownTypeError):
        to_text(stored, registry.get(90001), registry, column="c")


def test_hstore_send_round_trip() -> None:
    """hstore_send's pairs rebuild a stored hstore that prints as hstore_out."""
    send = struct.pack(">i", 2)
    for key, value in ((b"a", b"1"), (b"bb", None)):
        send += struct.pack(">i", len(key)) + key
        send += struct.pack(">i", -1) if value is None else struct.pack(">i", len(value)) + value
    stored = hstore.hstore_send_to_stored(send)
    registry = TypeRegistry([_info("hstore", "hstore_out")])
    info = registry.get(90001)
    assert to_text(stored, info, registry) == '"a"=>"1", "bb"=>NULL'
    assert to_python(stored, info, registry) == {"a": "1", "bb": None}


def test_ewkb_gserialized_round_trip() -> None:
    """EWKB (geometry_send) → gserialized → the same EWKB, SRID and hex text."""
    point = b"\x01" + struct.pack("<Ii", 0x20000001, 4326) + struct.pack("<dd", 1.0, 2.0)
    poly = b"\x01" + struct.pack("<III", 3, 1, 4) + struct.pack("<8d", 0, 0, 1, 0, 1, 1, 0, 0)
    coll = b"\x01" + struct.pack("<II", 7, 2) + point[:1] + struct.pack("<I", 1) + point[9:] + poly
    for ewkb, srid in ((point, 4326), (poly, 0)):
        value = postgis.gserialized_value(postgis.ewkb_to_gserialized(ewkb, geodetic=False))
        assert value == postgis.Geometry(ewkb, srid)
    value = postgis.gserialized_value(postgis.ewkb_to_gserialized(coll, geodetic=True))
    assert value.ewkb == coll and value.hex == coll.hex().upper()


def test_vector_send_round_trip() -> None:
    """vector, halfvec and sparsevec send forms rebuild the stored payloads."""
    vec = pgvector.vector_send_to_stored(struct.pack(">hh3f", 3, 0, 1.0, 0.1, -2.5))
    assert pgvector.vector_text(vec) == "[1,0.1,-2.5]"
    half = pgvector.halfvec_send_to_stored(struct.pack(">hh2e", 2, 0, 1.5, 65504))
    assert pgvector.halfvec_text(half) == "[1.5,65504]"
    sparse = pgvector.sparsevec_send_to_stored(struct.pack(">iiiif", 5, 1, 0, 2, 0.5))
    assert pgvector.sparsevec_text(sparse) == "{3:0.5}/5"
    assert pgvector.sparsevec_value(sparse) == pgvector.SparseVector(5, (3,), (0.5,))
