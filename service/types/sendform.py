"""Binary send format to stored form: how the initial snapshot reuses the WAL decoders.

The initial snapshot reads rows with `COPY (SELECT ...) TO STDOUT (FORMAT binary)`,
which carries each value in its type's *send* format (the typsend function: big-endian
integers, numeric as ndigits/weight/sign/dscale, arrays with per-element lengths...).
The WAL carries the *stored* form. Rather than decode a second format into Python
values (a second, diverging set of decoders), `to_stored` rewrites one send-format
value into exactly the bytes `deform` would have handed on for the same value
(fixed-length: the little-endian image; varlena: the payload without its header), and
the caller then runs the very same `service.types.convert.to_python` / `to_text` on it.
So a value read by the snapshot and the same value decoded from the WAL come out of
one code path.

Receives: one non-NULL send-format value, its column's `TypeInfo` and the registry.
Hands on: the stored payload. Containers are rebuilt as PostgreSQL lays them out
(array_send → ArrayType with null bitmap and aligned elements; record_send → a
HeapTupleHeader datum with dropped fields as NULLs; range_send → rangetypid, bounds,
flags), their varlena members always with 4-byte headers (a form the decoders read
like any other: PostgreSQL itself builds arrays that way).

Two types have no stored form reachable from their send form, and are handled so that
the *value* is still PostgreSQL's own:
- jsonb: jsonb_send is a version byte and the text jsonb_out prints (both are
  JsonbToCString). `snapshot_registry` maps jsonb to the text decoder (`json_out`), so
  value and text are that output, which is what the WAL decoder renders from the binary
  jsonb tree (the jsonb text is jsonb's Python value).
- xml: xml_send re-prints the XML declaration; the snapshot selects `xml::text`
  (binary-coercible, the stored text), which is what the WAL path shows.

Types whose output function the decoders do not know (`convertible` is False) are not
rewritten: decoding.unknown_types decides them before a value is read (`fail`: an
error at start; `omit`: not selected; `bytes`: their output text, see
connectors.tablesnap.reader).

Pure; malformed input raises `DecodeError`.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import replace

from service._binary import BE_I16, BE_I32, I16, I32, U16, U32
from service.errors import DecodeError
from service.pgconst import JSONB_OID, TEXT_OID
from service.types import snapshot_rewrites
from service.types.multirange import multirange_send_to_stored
from service.types.registry import TypeInfo, TypeRegistry

_ALIGN = {"c": 1, "s": 2, "i": 4, "d": 8}
_NUMERIC_HEAD = struct.Struct(">hhHH")  # ndigits, weight, sign, dscale (numeric_send)
_TID = struct.Struct(">IH")  # block, offset (tidsend)
_ARRAY_HEAD = struct.Struct("<iiI")
_TUPLE_HEAD = struct.Struct("<iI6xHHB")  # typmod, typeid, ctid, infomask2, infomask, hoff

NAMEDATALEN = 64
HEAP_HASNULL = 0x0001
RANGE_EMPTY, RANGE_LB_INF, RANGE_UB_INF = 0x01, 0x08, 0x10
NUMERIC_SPECIAL = 0xC000

Rewrite = Callable[[bytes, TypeInfo, TypeRegistry], bytes]


def _swap(width: int) -> Rewrite:
    """Big-endian send image of a fixed-width value → its little-endian stored image."""

    def rewrite(data: bytes, info: TypeInfo, registry: TypeRegistry) -> bytes:
        if len(data) != width:
            raise DecodeError(f"{info.name} send value has {len(data)} bytes, not {width}")
        return data[::-1]

    return rewrite


def _same(data: bytes, info: TypeInfo, registry: TypeRegistry) -> bytes:
    return data


def _name(data: bytes, info: TypeInfo, registry: TypeRegistry) -> bytes:
    if len(data) >= NAMEDATALEN:
        raise DecodeError(f"name send value of {len(data)} bytes is too long")
    return data.ljust(NAMEDATALEN, b"\x00")


def _jsonb(data: bytes, info: TypeInfo, registry: TypeRegistry) -> bytes:
    if not data or data[0] != 1:
        raise DecodeError("jsonb send value does not start with version 1")
    return data[1:]


def _tid(data: bytes, info: TypeInfo, registry: TypeRegistry) -> bytes:
    block, pos = _TID.unpack(data)
    # ItemPointerData: BlockIdData {bi_hi, bi_lo}, then the offset, each uint16.
    return U16.pack(block >> 16) + U16.pack(block & 0xFFFF) + U16.pack(pos)


def _numeric(data: bytes, info: TypeInfo, registry: TypeRegistry) -> bytes:
    """numeric_send → the long stored form (NumericLong), or the special header."""
    ndigits, weight, sign, dscale = _NUMERIC_HEAD.unpack_from(data, 0)
    if len(data) != _NUMERIC_HEAD.size + 2 * ndigits:
        raise DecodeError(f"numeric send value of {len(data)} bytes has {ndigits} digits")
    if sign & NUMERIC_SPECIAL == NUMERIC_SPECIAL:
        return U16.pack(sign)
    digits = b"".join(I16.pack(BE_I16.unpack_from(data, 8 + 2 * i)[0]) for i in range(ndigits))
    return U16.pack(sign | (dscale & 0x3FFF)) + I16.pack(weight) + digits


def _timetz(data: bytes, info: TypeInfo, registry: TypeRegistry) -> bytes:
    if len(data) != 12:
        raise DecodeError(f"timetz send value has {len(data)} bytes")
    return data[7::-1] + data[:7:-1]


def _interval(data: bytes, info: TypeInfo, registry: TypeRegistry) -> bytes:
    if len(data) != 16:
        raise DecodeError(f"interval send value has {len(data)} bytes")
    return data[7::-1] + data[11:7:-1] + data[:11:-1]


def _inet(data: bytes, info: TypeInfo, registry: TypeRegistry) -> bytes:
    family, bits, _is_cidr, nb = data[0], data[1], data[2], data[3]
    if len(data) != 4 + nb:
        raise DecodeError(f"inet send value of {len(data)} bytes says {nb} address bytes")
    return bytes((family, bits)) + data[4:]


def _bits(data: bytes, info: TypeInfo, registry: TypeRegistry) -> bytes:
    return I32.pack(BE_I32.unpack_from(data, 0)[0]) + data[4:]


def _enum(data: bytes, info: TypeInfo, registry: TypeRegistry) -> bytes:
    label = data.decode("utf-8")
    for oid, known in info.enum_labels.items():
        if known == label:
            return U32.pack(oid)
    raise DecodeError(f"enum {info.name} has no label {label!r}")


# By output function, as the decoders dispatch (service.types.convert).
_FIXED: dict[str, Rewrite] = {
    "boolout": _same,
    "charout": _same,
    "uuid_out": _same,
    "macaddr_out": _same,
    "macaddr8_out": _same,
    "int2out": _swap(2),
    "int4out": _swap(4),
    "oidout": _swap(4),
    "xidout": _swap(4),
    "cidout": _swap(4),
    "int8out": _swap(8),
    "xid8out": _swap(8),
    "pg_lsn_out": _swap(8),
    "float4out": _swap(4),
    "float8out": _swap(8),
    "cash_out": _swap(8),
    "date_out": _swap(4),
    "time_out": _swap(8),
    "timestamp_out": _swap(8),
    "timestamptz_out": _swap(8),
    "timetz_out": _timetz,
    "interval_out": _interval,
    "tidout": _tid,
    "nameout": _name,
    "textout": _same,
    "varcharout": _same,
    "bpcharout": _same,
    "json_out": _same,
    "xml_out": _same,
    "byteaout": _same,
    "numeric_out": _numeric,
    "inet_out": _inet,
    "cidr_out": _inet,
    "bit_out": _bits,
    "varbit_out": _bits,
    "jsonb_out": _jsonb,
    "enum_out": _enum,
    **snapshot_rewrites.FIXED,
}
_CONTAINERS = frozenset({"array_out", "int2vectorout", "oidvectorout", "record_out", "range_out"})


def base_type(info: TypeInfo, registry: TypeRegistry) -> TypeInfo:
    """A domain's base type (domains are sent and stored as their base type)."""
    for _ in range(33):
        if info.typtype != "d":
            return info
        info = registry.get(info.typbasetype)
    raise DecodeError(f"domain chain of {info.name} does not end")


def base_type_and_typmod(info: TypeInfo, registry: TypeRegistry) -> tuple[TypeInfo, int]:
    """A domain's base type and the typmod its values have, as getBaseTypeAndTypmod
    (lsyscache.c): each domain of the chain sets it, so the innermost one's wins (an
    outer domain cannot carry one: `CREATE DOMAIN d2 AS d1(5,2)` is refused). A type
    that is no domain comes back with -1."""
    typmod = -1
    for _ in range(33):
        if info.typtype != "d":
            return info, typmod
        typmod = info.typtypmod
        info = registry.get(info.typbasetype)
    raise DecodeError(f"domain chain of {info.name} does not end")


def convertible(
    info: TypeInfo, registry: TypeRegistry, no_send: frozenset[int] = frozenset()
) -> bool:
    """Can every value of this type be rewritten: all element/field/subtypes known, and
    none of them (`no_send`: pg_type.typsend = 0) without a send function?"""
    if info.oid in no_send:
        return False
    info = base_type(info, registry)
    src = info.output_src
    if info.oid in no_send:
        return False
    if src in _FIXED or snapshot_rewrites.extension_rewrite(info) is not None:
        return True
    match src:
        case "array_out" | "int2vectorout" | "oidvectorout":
            return convertible(registry.get(info.typelem), registry, no_send)
        case "record_out":
            return all(
                convertible(registry.get(f.typid), registry, no_send)
                for f in info.fields
                if not f.dropped
            )
        case "range_out":
            return convertible(registry.get(info.range_subtype), registry, no_send)
        case "multirange_out":
            return convertible(registry.get(info.multirange_range), registry, no_send)
        case _:
            return False


TEXTUAL = frozenset({"textout", "varcharout", "json_out", "xml_out"})
"""Output functions that print the stored bytes as they are: for these, the value's
output text (`::text`, by I/O conversion when no cast exists) is its stored form."""


def text_is_stored(info: TypeInfo, registry: TypeRegistry) -> bool:
    """Is a value's text (`::text`) its stored form? True for TEXTUAL output functions,
    and for domains over them. The rule the initial snapshot and attmissingval share."""
    return base_type(info, registry).output_src in TEXTUAL


def text_array_is_stored(info: TypeInfo, registry: TypeRegistry) -> TypeInfo | None:
    """For an array (or a domain over one) whose elements' text is their stored form and
    which are laid out as text's: its element type, else None. Read as `::text[]`, such a
    value is stored as a text[] whose header names the element type (at byte 8)."""
    base = base_type(info, registry)
    if base.output_src != "array_out":
        return None
    elem = base_type(registry.get(base.typelem), registry)
    text = registry.get(TEXT_OID)
    if elem.output_src in TEXTUAL and (elem.typlen, elem.typalign) == (text.typlen, text.typalign):
        return registry.get(base.typelem)
    return None


def snapshot_registry(registry: TypeRegistry) -> TypeRegistry:
    """The registry to decode rewritten values with: jsonb read as its printed text."""
    out = registry.fresh(registry.user_types())
    out.add(replace(registry.get(JSONB_OID), output_src="json_out"))
    return out


def to_stored(data: bytes, info: TypeInfo, registry: TypeRegistry) -> bytes:
    """One send-format value → the stored payload the WAL decoders read (see above)."""
    info = base_type(info, registry)
    if info.oid == JSONB_OID:  # by OID: `snapshot_registry` renames its output function
        return _jsonb(data, info, registry)
    src = info.output_src
    simple = _FIXED.get(src) or snapshot_rewrites.extension_rewrite(info)
    if simple is not None:
        return simple(data, info, registry)
    match src:
        case "array_out" | "int2vectorout" | "oidvectorout":
            return _array(data, registry)
        case "record_out":
            return _record(data, info, registry)
        case "range_out":
            return _range(data, info, registry)
        case "multirange_out":
            return multirange_send_to_stored(
                data, info, registry, lambda d, rng: _range(d, rng, registry)
            )
        case _:
            raise DecodeError(f"type {info.name} (output function {src}) has no known send format")


# --- containers ----------------------------------------------------------------------


def _align(off: int, typalign: str) -> int:
    a = _ALIGN[typalign]
    return (off + a - 1) & ~(a - 1)


def _member(stored: bytes, info: TypeInfo) -> bytes:
    """A member as it sits inside a container: varlena with a 4-byte header."""
    if info.typlen == -1:
        return U32.pack((len(stored) + 4) << 2) + stored
    if info.typlen == -2:
        return stored + b"\x00"
    return stored


def _place(out: bytearray, member: bytes, info: TypeInfo, origin: int) -> None:
    """Append `member` aligned to its typalign, offsets counted from `origin`."""
    pad = _align(len(out) - origin, info.typalign) - (len(out) - origin)
    out += b"\x00" * pad
    out += member


def _array(data: bytes, registry: TypeRegistry) -> bytes:
    """array_send → ArrayType (array.h); offsets from the varlena header, as stored."""
    ndim, _flags, elemtype = struct.unpack_from(">iiI", data, 0)
    if not 0 <= ndim <= 6:
        raise DecodeError(f"array send value has {ndim} dimensions")
    dims = [BE_I32.unpack_from(data, 12 + 8 * i)[0] for i in range(ndim)]
    lbounds = [BE_I32.unpack_from(data, 16 + 8 * i)[0] for i in range(ndim)]
    elem = registry.get(elemtype)
    nitems = 0
    if ndim:
        nitems = 1
        for d in dims:
            nitems *= d
    off = 12 + 8 * ndim
    items: list[bytes | None] = []
    for _ in range(nitems):
        size = BE_I32.unpack_from(data, off)[0]
        off += 4
        if size < 0:
            items.append(None)
            continue
        items.append(to_stored(data[off : off + size], elem, registry))
        off += size
    if off != len(data):
        raise DecodeError(f"array send value has {len(data) - off} trailing bytes")
    has_nulls = any(v is None for v in items)
    head = bytearray(b"\x00\x00\x00\x00")  # the varlena header's place, for alignment
    head += _ARRAY_HEAD.pack(ndim, 0, elemtype)
    for d in dims:
        head += I32.pack(d)
    for lb in lbounds:
        head += I32.pack(lb)
    if has_nulls:
        bitmap = bytearray((nitems + 7) // 8)
        for i, v in enumerate(items):
            if v is not None:
                bitmap[i >> 3] |= 1 << (i & 7)
        head += bitmap
    head += b"\x00" * (_align(len(head), "d") - len(head))
    if has_nulls:
        I32.pack_into(head, 8, len(head))  # dataoffset, counted from the header
    for v in items:
        if v is not None:
            _place(head, _member(v, elem), elem, 0)
    return bytes(head[4:])


def _record(data: bytes, info: TypeInfo, registry: TypeRegistry) -> bytes:
    """record_send → a composite datum: HeapTupleHeader, null bitmap, aligned fields."""
    ncols = BE_I32.unpack_from(data, 0)[0]
    live = [f for f in info.fields if not f.dropped]
    if ncols != len(live):
        raise DecodeError(f"composite {info.name} sent {ncols} fields, type has {len(live)}")
    off = 4
    sent: dict[int, bytes | None] = {}
    for f in live:
        _oid, size = struct.unpack_from(">Ii", data, off)
        off += 8
        if size < 0:
            sent[f.attnum] = None
            continue
        sent[f.attnum] = to_stored(data[off : off + size], registry.get(f.typid), registry)
        off += size
    values = [None if f.dropped else sent[f.attnum] for f in info.fields]
    natts = len(values)
    has_nulls = any(v is None for v in values)
    bitmap = bytearray((natts + 7) // 8) if has_nulls else bytearray()
    for i, v in enumerate(values):
        if has_nulls and v is not None:
            bitmap[i >> 3] |= 1 << (i & 7)
    hoff = _align(23 + len(bitmap), "d")
    out = bytearray(b"\x00\x00\x00\x00")  # datum_len_, dropped below
    out += _TUPLE_HEAD.pack(-1, info.oid, natts, HEAP_HASNULL if has_nulls else 0, hoff)
    out += bitmap
    out += b"\x00" * (hoff - len(out))
    for f, v in zip(info.fields, values, strict=True):
        if v is not None:
            ftype = registry.get(f.typid)
            _place(out, _member(v, ftype), ftype, 0)
    return bytes(out[4:])


def _range(data: bytes, info: TypeInfo, registry: TypeRegistry) -> bytes:
    """range_send → rangetypid, stored bounds, flags byte (rangetypes.c)."""
    flags = data[0]
    sub = registry.get(info.range_subtype)
    out = bytearray(b"\x00\x00\x00\x00")
    out += U32.pack(info.oid)
    off = 1
    for absent in (RANGE_EMPTY | RANGE_LB_INF, RANGE_EMPTY | RANGE_UB_INF):
        if flags & absent:
            continue
        size = BE_I32.unpack_from(data, off)[0]
        off += 4
        _place(out, _member(to_stored(data[off : off + size], sub, registry), sub), sub, 0)
        off += size
    if off != len(data):
        raise DecodeError(f"range send value has {len(data) - off} trailing bytes")
    out.append(flags)
    return bytes(out[4:])
