"""Multirange types (multirangetypes.c): the six built-in ones and user-defined ones.

Receives: a multirange varlena payload and its `TypeInfo`, whose `multirange_range`
names the range type (pg_range.rngtypid for rngmultitypid; the built-in ones are in the
generated table, user-defined ones come from the catalog stage). Hands on: a list of
`Range` or the exact text multirange_out prints: `{` the ranges as range_out prints
them, separated by `,` `}` (no quoting: `{}` when empty).

Layout, offsets from the varlena header: Oid multirangetypid, uint32 rangeCount, then
rangeCount - 1 uint32 items (every 4th, MULTIRANGE_ITEM_OFF_BIT set, is an offset,
the others a length from the previous range), then one flags byte per range, then the
ranges' bound values from the next boundary of the subtype's typalign, each range
starting at its offset from there. A range's bounds are laid out exactly as inside a
range datum, so each is rebuilt as a range payload (rangetypid, bounds, flags) and
handed to `service.types.range`.

`multirange_send_to_stored` turns multirange_send (int32 count, then each range as
int32 length + range_send) into the stored form for the initial snapshot.

Pure; malformed input raises `DecodeError`.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from service.errors import DecodeError
from service.types.deform import align
from service.types.range import range_text, range_value
from service.types.registry import TypeInfo, TypeRegistry

_U32 = struct.Struct("<I")
_BE_I32 = struct.Struct(">i")
ITEM_OFF_BIT = 0x80000000
ITEM_OFFSET_STRIDE = 4
_VARHDRSZ = 4


def _range_info(info: TypeInfo, registry: TypeRegistry) -> TypeInfo:
    if not info.multirange_range:
        raise DecodeError(f"multirange {info.name} has no range type")
    return registry.get(info.multirange_range)


def _ranges(buf: bytes, info: TypeInfo, registry: TypeRegistry) -> list[bytes]:
    """Each range of the multirange as a range payload (what range_out reads)."""
    rng = _range_info(info, registry)
    sub = registry.get(rng.range_subtype)
    if len(buf) < 8:
        raise DecodeError(f"multirange datum of {len(buf)} bytes is too short")
    count = _U32.unpack_from(buf, 4)[0]
    if count == 0:
        return []
    items_at = 8
    flags_at = items_at + 4 * (count - 1)
    if flags_at + count > len(buf):
        raise DecodeError(f"multirange of {len(buf)} bytes says {count} ranges")
    bounds_at = align(flags_at + count + _VARHDRSZ, sub.typalign) - _VARHDRSZ
    offsets = [0]
    for i in range(1, count):
        item = _U32.unpack_from(buf, items_at + 4 * (i - 1))[0]
        if item & ITEM_OFF_BIT:
            offsets.append(item & ~ITEM_OFF_BIT)
        else:
            offsets.append(offsets[-1] + item)
    ends = [*offsets[1:], len(buf) - bounds_at]
    head = _U32.pack(rng.oid)
    out = []
    for i in range(count):
        start, end = bounds_at + offsets[i], bounds_at + ends[i]
        if not bounds_at <= start <= end <= len(buf):
            raise DecodeError("multirange range overruns its datum")
        out.append(head + buf[start:end] + bytes((buf[flags_at + i],)))
    return out


def multirange_text(
    buf: bytes, info: TypeInfo, registry: TypeRegistry, elem: Callable[[bytes, TypeInfo], str]
) -> str:
    """multirange_out."""
    return "{" + ",".join(range_text(r, registry, elem) for r in _ranges(buf, info, registry)) + "}"


def multirange_value(
    buf: bytes, info: TypeInfo, registry: TypeRegistry, elem: Callable[[bytes, TypeInfo], Any]
) -> list[Any]:
    return [range_value(r, registry, elem) for r in _ranges(buf, info, registry)]


def multirange_send_to_stored(
    data: bytes,
    info: TypeInfo,
    registry: TypeRegistry,
    range_to_stored: Callable[[bytes, TypeInfo], bytes],
) -> bytes:
    """multirange_send → the stored multirange (write_multirange_data)."""
    rng = _range_info(info, registry)
    sub = registry.get(rng.range_subtype)
    count = _BE_I32.unpack_from(data, 0)[0]
    off = 4
    ranges: list[bytes] = []
    for _ in range(count):
        size = _BE_I32.unpack_from(data, off)[0]
        off += 4
        ranges.append(range_to_stored(data[off : off + size], rng))
        off += size
    if off != len(data):
        raise DecodeError(f"multirange send value has {len(data) - off} trailing bytes")
    out = bytearray(_U32.pack(info.oid) + _U32.pack(count))
    items_at = len(out)
    out += b"\x00" * (4 * max(count - 1, 0))
    for r in ranges:
        out.append(r[-1])
    bounds_at = align(len(out) + _VARHDRSZ, sub.typalign) - _VARHDRSZ
    out += b"\x00" * (bounds_at - len(out))
    prev = 0
    for i, r in enumerate(ranges):
        here = len(out) - bounds_at
        if i > 0:
            item = here | ITEM_OFF_BIT if i % ITEM_OFFSET_STRIDE == 0 else here - prev
            _U32.pack_into(out, items_at + 4 * (i - 1), item)
            prev = here
        out += r[4:-1]
        out += b"\x00" * (align(len(out) - bounds_at, sub.typalign) - (len(out) - bounds_at))
    return bytes(out)
