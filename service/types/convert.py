"""Typed values from raw datums: `to_python` and `to_text`, the types stage's entry points.

Receives: one raw datum as `deform` produced it (bytes; a `ToastPointer` must have
been resolved with `resolve_toast` first), the column's `TypeInfo`, and the
`TypeRegistry` for the types it refers to (array elements, composite fields, range
subtypes, enum labels). Hands on:

- `to_text`: exactly what the type's output function prints under the session settings
  DateStyle=ISO,MDY, IntervalStyle=postgres, TimeZone=UTC, extra_float_digits=1,
  lc_monetary=C, bytea_output=hex (what the test_decoding-compatible plugin prints);
- `to_python`: a Python value (see each family module for the mapping).

The decoder is chosen by the output function's internal name (`TypeInfo.output_src`);
domains resolve to their base type. A type whose output function pgcdc does not know
raises `UnknownTypeError` naming the column. Such columns are found before any value is
decoded (`undecodable_part`, the start check) and decided by decoding.unknown_types
(`service.types.unknown`): stored bytes are never guessed to be text.

Extension types (hstore, ltree/lquery, isn, cube/earth, seg, PostGIS geometry and
geography, pgvector's vector/halfvec/sparsevec) are recognised by type name and output
function (`service.types.extensions`), never by OID, and decoded by their own modules.

Geometric types, tsvector/tsquery, jsonpath, multiranges, pg_snapshot/txid_snapshot,
aclitem and the reg* types have their own modules; aclitem and reg* need the catalog
stage's name resolver on the registry (`TypeRegistry.oid_names`).

Pure; no I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from service.errors import DecodeError, UnknownTypeError
from service.types import (
    bits,
    cube,
    datetime,
    geometric,
    hstore,
    isn,
    jsonb,
    ltree,
    network,
    numeric,
    pgvector,
    postgis,
    text,
    tsearch,
)
from service.types.acl import aclitem_text
from service.types.array import array_text, array_value, vector_text
from service.types.composite import composite_text, composite_value
from service.types.extensions import extension_type
from service.types.jsonpath import jsonpath_text
from service.types.multirange import multirange_text, multirange_value
from service.types.range import range_text, range_value
from service.types.registry import TypeInfo, TypeRegistry, undecodable
from service.types.regtypes import REG_OUTPUTS, reg_text
from service.types.snapshot_types import snapshot_text
from service.types.varlena import ToastPointer, Unchanged

_Simple = Callable[[bytes], Any]

_TEXT: dict[str, Callable[[bytes], str]] = {
    "boolout": text.bool_text,
    "int2out": text.int2_text,
    "int4out": text.int4_text,
    "int8out": text.int8_text,
    "oidout": text.uint4_text,
    "xidout": text.uint4_text,
    "cidout": text.uint4_text,
    "xid8out": lambda b: str(text.uint8_value(b)),
    "charout": text.char_text,
    "nameout": text.name_text,
    "textout": text.utf8,
    "varcharout": text.utf8,
    "bpcharout": text.utf8,
    "xml_out": text.xml_text,
    "json_out": text.utf8,
    "byteaout": text.bytea_text,
    "uuid_out": text.uuid_text,
    "tidout": text.tid_text,
    "pg_lsn_out": text.pg_lsn_text,
    "numeric_out": numeric.numeric_text,
    "float4out": lambda b: numeric.float_text(numeric.float4_value(b), single=True),
    "float8out": lambda b: numeric.float_text(numeric.float8_value(b), single=False),
    "cash_out": numeric.money_text,
    "date_out": datetime.date_text,
    "time_out": datetime.time_text,
    "timetz_out": datetime.timetz_text,
    "timestamp_out": datetime.timestamp_text,
    "timestamptz_out": datetime.timestamptz_text,
    "interval_out": datetime.interval_text,
    "inet_out": network.inet_text,
    "cidr_out": network.cidr_text,
    "macaddr_out": network.mac_text,
    "macaddr8_out": network.mac_text,
    "bit_out": bits.bits_text,
    "varbit_out": bits.bits_text,
    "jsonb_out": jsonb.jsonb_text,
    "point_out": geometric.point_text,
    "line_out": geometric.line_text,
    "lseg_out": geometric.lseg_text,
    "box_out": geometric.box_text,
    "path_out": geometric.path_text,
    "poly_out": geometric.poly_text,
    "circle_out": geometric.circle_text,
    "tsvectorout": tsearch.tsvector_text,
    "tsqueryout": tsearch.tsquery_text,
    "jsonpath_out": jsonpath_text,
    "pg_snapshot_out": snapshot_text,
}

_PYTHON: dict[str, _Simple] = {
    **_TEXT,
    "boolout": text.bool_value,
    "int2out": text.int2_value,
    "int4out": text.int4_value,
    "int8out": text.int8_value,
    "oidout": text.uint4_value,
    "xidout": text.uint4_value,
    "cidout": text.uint4_value,
    "xid8out": text.uint8_value,
    "byteaout": bytes,
    "uuid_out": text.uuid_value,
    "pg_lsn_out": text.uint8_value,
    "numeric_out": numeric.numeric_value,
    "float4out": numeric.float4_value,
    "float8out": numeric.float8_value,
    "cash_out": numeric.money_value,
    "date_out": datetime.date_value,
    "time_out": datetime.time_value,
    "timetz_out": datetime.timetz_value,
    "timestamp_out": datetime.timestamp_value,
    "timestamptz_out": datetime.timestamptz_value,
    "interval_out": datetime.interval_value,
    "inet_out": network.inet_value,
    "cidr_out": network.cidr_value,
    "point_out": geometric.point_value,
}


# Extension types, by output function: used only for a type `extension_type` recognises
# by its name too (an extension's OIDs differ per database).
_EXT_TEXT: dict[str, Callable[[bytes], str]] = {
    "hstore_out": hstore.hstore_text,
    "ltree_out": ltree.ltree_text,
    "lquery_out": ltree.lquery_text,
    "isn_out": isn.isn_text,
    "ean13_out": isn.ean13_text,
    "cube_out": cube.cube_text,
    "seg_out": cube.seg_text,
    "LWGEOM_out": postgis.geometry_text,
    "geography_out": postgis.geometry_text,
    "vector_out": pgvector.vector_text,
    "halfvec_out": pgvector.halfvec_text,
    "sparsevec_out": pgvector.sparsevec_text,
}

_EXT_PYTHON: dict[str, _Simple] = {
    **_EXT_TEXT,
    "hstore_out": hstore.hstore_value,
    "LWGEOM_out": postgis.gserialized_value,
    "geography_out": postgis.gserialized_value,
    "vector_out": pgvector.vector_value,
    "halfvec_out": pgvector.halfvec_value,
    "sparsevec_out": pgvector.sparsevec_value,
}


def _simple(info: TypeInfo, table: dict[str, Any], ext: dict[str, Any]) -> Any:
    """The plain decoder of a (base) type from `table`, or from `ext` for a recognised
    extension type; None when the type needs more (or is unknown)."""
    found = table.get(info.output_src)
    if found is None and extension_type(info):
        found = ext[info.output_src]
    return found


def _base(info: TypeInfo, registry: TypeRegistry) -> TypeInfo:
    seen = 0
    while info.typtype == "d":
        info = registry.get(info.typbasetype)
        seen += 1
        if seen > 32:
            raise DecodeError(f"domain chain of {info.name} does not end")
    return info


def _enum_label(buf: bytes, info: TypeInfo) -> str:
    oid = text.uint4_value(buf)
    try:
        return info.enum_labels[oid]
    except KeyError:
        raise UnknownTypeError(f"enum {info.name} has no label with OID {oid}") from None


def _unknown(buf: bytes, info: TypeInfo) -> str:
    raise undecodable(info)


def _text(buf: bytes, info: TypeInfo, registry: TypeRegistry) -> str:
    info = _base(info, registry)
    src = info.output_src
    simple = _simple(info, _TEXT, _EXT_TEXT)
    if simple is not None:
        return str(simple(buf))

    def elem(b: bytes, i: TypeInfo) -> str:
        return _text(b, i, registry)

    match src:
        case "array_out":
            return array_text(buf, registry, elem)
        case "int2vectorout" | "oidvectorout":
            return vector_text(buf, registry, elem)
        case "record_out":
            return composite_text(buf, registry, elem)
        case "range_out":
            return range_text(buf, registry, elem)
        case "enum_out":
            return _enum_label(buf, info)
        case "multirange_out":
            return multirange_text(buf, info, registry, elem)
        case "aclitemout":
            return aclitem_text(buf, registry)
        case _ if src in REG_OUTPUTS:
            return reg_text(buf, src, registry)
        case _:
            return _unknown(buf, info)


def _python(buf: bytes, info: TypeInfo, registry: TypeRegistry) -> Any:
    info = _base(info, registry)
    src = info.output_src
    simple = _simple(info, _PYTHON, _EXT_PYTHON)
    if simple is not None:
        return simple(buf)

    def elem(b: bytes, i: TypeInfo) -> Any:
        return _python(b, i, registry)

    match src:
        case "array_out" | "int2vectorout" | "oidvectorout":
            return array_value(buf, registry, elem)
        case "record_out":
            return composite_value(buf, registry, elem)
        case "range_out":
            return range_value(buf, registry, elem)
        case "enum_out":
            return _enum_label(buf, info)
        case "multirange_out":
            return multirange_value(buf, info, registry, elem)
        case "aclitemout":
            return aclitem_text(buf, registry)
        case _ if src in REG_OUTPUTS:
            return reg_text(buf, src, registry)
        case _:
            return _unknown(buf, info)


def simple_functions(
    typeinfo: TypeInfo, registry: TypeRegistry
) -> tuple[Callable[[bytes], Any], Callable[[bytes], str]] | None:
    """(to_python, to_text) of one datum as plain functions of its bytes, when the type
    (a domain: its base type) needs nothing else: not an array, composite, range or
    enum, and an output function pgcdc knows. None otherwise, and when the domain chain
    cannot be resolved now (then `to_python`/`to_text` raise as they would per value).

    The functions raise `DecodeError` for a malformed datum and never `UnknownTypeError`:
    they are exactly what `to_python`/`to_text` call for such a type.
    """
    try:
        info = _base(typeinfo, registry)
    except (DecodeError, UnknownTypeError):
        return None
    value, text_fn = _simple(info, _PYTHON, _EXT_PYTHON), _simple(info, _TEXT, _EXT_TEXT)
    if value is None or text_fn is None:
        return None
    return value, text_fn


def _checked(datum: object, column: str | None) -> bytes:
    if isinstance(datum, bytes):
        return datum
    if isinstance(datum, ToastPointer):
        raise DecodeError("TOAST pointer must be resolved before conversion", field=column)
    if isinstance(datum, Unchanged):
        raise DecodeError(
            "an unchanged TOAST value has no text; check for the marker first", field=column
        )
    raise DecodeError(f"cannot convert a {type(datum).__name__} datum", field=column)


def to_text(
    datum: bytes,
    typeinfo: TypeInfo,
    registry: TypeRegistry,
    *,
    column: str | None = None,
) -> str:
    """What the type's output function prints for this (non-NULL, resolved) datum."""
    buf = _checked(datum, column)
    try:
        return _text(buf, typeinfo, registry)
    except UnknownTypeError as exc:
        if exc.field is None and column is not None:
            raise UnknownTypeError(exc.message, field=column) from exc
        raise


def to_python(
    datum: bytes | ToastPointer | Unchanged | None,
    typeinfo: TypeInfo,
    registry: TypeRegistry,
    *,
    column: str | None = None,
) -> Any:
    """The Python value of a datum; None stays None, the UNCHANGED marker passes through."""
    if datum is None or isinstance(datum, Unchanged):
        return datum
    buf = _checked(datum, column)
    try:
        return _python(buf, typeinfo, registry)
    except UnknownTypeError as exc:
        if exc.field is None and column is not None:
            raise UnknownTypeError(exc.message, field=column) from exc
        raise


def undecodable_part(
    typeinfo: TypeInfo, registry: TypeRegistry, _depth: int = 0
) -> TypeInfo | None:
    """The type inside `typeinfo` that no decoder knows, or None when every value of it
    decodes: its domain base, array elements, composite fields, range subtype and
    multirange range are followed as `to_text` would follow them. The check every
    captured column gets at start (issue 13 part 5), so that an unknown type is reported
    before a value of it can stop the stream.

    Raises `UnknownTypeError` when a type it needs is missing from the registry.
    """
    if _depth > 32:
        raise DecodeError(f"type {typeinfo.name} nests too deeply")
    info = _base(typeinfo, registry)
    src = info.output_src
    if _simple(info, _TEXT, _EXT_TEXT) is not None:
        return None

    def inner(oid: int) -> TypeInfo | None:
        return undecodable_part(registry.get(oid), registry, _depth + 1)

    match src:
        case "array_out" | "int2vectorout" | "oidvectorout":
            return inner(info.typelem)
        case "record_out":
            for f in info.fields:
                found = None if f.dropped else inner(f.typid)
                if found is not None:
                    return found
            return None
        case "range_out":
            return inner(info.range_subtype)
        case "multirange_out":
            return inner(info.multirange_range)
        case "enum_out" | "aclitemout":
            return None
        case _ if src in REG_OUTPUTS:
            return None
        case _:
            return info
