"""PostGIS geometry and geography (gserialized1.h/gserialized2.h, lwout_wkb.c).

Receives: the varlena payload of a GSERIALIZED: srid[3] (21 bits, big-endian, sign
extended; 0 is SRID_UNKNOWN), one flags byte, then (version 2, G2FLAG_VER_0 set) an
optional 8-byte extended-flags word (G2FLAG_EXTENDED), an optional float4 bounding box
(G2FLAG_BBOX: 6 floats when geodetic, else 2 per dimension), and the geometry, each
part little-endian and 8-byte aligned: uint32 type and count, then
- point, linestring, circularstring, triangle: `count` points of 2 to 4 float8;
- polygon: `count` uint32 ring sizes, 4 bytes of padding when `count` is odd, then each
  ring's points;
- multi*, collection, compoundcurve, curvepolygon, multicurve, multisurface,
  polyhedralsurface, tin: `count` sub-geometries in the same form.
Version 1 (PostGIS 2, kept by pg_upgrade) has the same layout without the extended
word; its flag bits Z 1, M 2, BBOX 4, GEODETIC 8 match version 2's.

Hands on: `Geometry(ewkb, srid)`, the value geometry_out / geography_out print as
upper-case hex: lwgeom_to_wkb with WKB_EXTENDED in little-endian order (byte order 1,
the WKB type number (liblwgeom numbers polyhedral surface, triangle and TIN 13 to 15,
WKB 15, 17, 16) with Z 0x80000000, M 0x40000000 and SRID 0x20000000 flags, the SRID on the
top level only, an empty point as NaN coordinates, other empties as a zero count, a
triangle as one ring). `srid` is 0 when unknown, as Debezium's PostgisGeometry reads it
back from that EWKB. `ewkb_to_gserialized` is the reverse (geometry_send and
geography_send are that EWKB), without a bounding box, for the initial snapshot.

Pure; malformed input raises `DecodeError`.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from service._binary import U32
from service.errors import DecodeError

G_Z, G_M, G_BBOX, G_GEODETIC, G2_EXTENDED, G2_VERSION = 0x01, 0x02, 0x04, 0x08, 0x10, 0x40
WKB_Z, WKB_M, WKB_SRID = 0x80000000, 0x40000000, 0x20000000
POINT, LINE, POLYGON, TRIANGLE, CIRCSTRING = 1, 2, 3, 14, 8
_POINTLIKE = frozenset({POINT, LINE, CIRCSTRING, TRIANGLE})
_COLLECTIONS = frozenset({4, 5, 6, 7, 9, 10, 11, 12, 13, 15})
# liblwgeom's type numbers (stored) → WKB's (lwgeom_wkb_type): equal up to 12, then
# POLYHEDRALSURFACE 13 → 15, TRIANGLE 14 → 17, TIN 15 → 16.
_TO_WKB = {13: 15, 14: 17, 15: 16}
_FROM_WKB = {v: k for k, v in _TO_WKB.items()}
_NAN = b"\x00\x00\x00\x00\x00\x00\xf8\x7f"


@dataclass(slots=True, frozen=True)
class Geometry:
    """A geometry or geography: its extended WKB (little-endian) and SRID (0: none)."""

    ewkb: bytes
    srid: int

    @property
    def hex(self) -> str:
        return self.ewkb.hex().upper()


def _u32(buf: bytes, at: int) -> int:
    if at + 4 > len(buf):
        raise DecodeError("geometry runs out of its datum")
    return int(U32.unpack_from(buf, at)[0])


def _srid(buf: bytes) -> int:
    raw = (buf[0] << 16) | (buf[1] << 8) | buf[2]
    return raw - (1 << 21) if raw & (1 << 20) else raw


def gserialized_value(buf: bytes) -> Geometry:
    """The EWKB and SRID of a stored geometry or geography."""
    if len(buf) < 4:
        raise DecodeError(f"geometry datum of {len(buf)} bytes is too short")
    srid, flags = _srid(buf), buf[3]
    ndims = 2 + (flags & G_Z) + ((flags & G_M) >> 1)
    at = 4
    if flags & G2_VERSION and flags & G2_EXTENDED:
        at += 8
    if flags & G_BBOX:
        at += 4 * (6 if flags & G_GEODETIC else 2 * ndims)
    out = bytearray()
    end = _write(buf, at, flags, ndims, srid, out, top=True)
    if end != len(buf):
        raise DecodeError(f"geometry of {end} bytes in a datum of {len(buf)}")
    return Geometry(bytes(out), srid)


def _write(
    buf: bytes, at: int, flags: int, ndims: int, srid: int, out: bytearray, *, top: bool
) -> int:
    """Append one serialized geometry's EWKB to `out`; return where it ends."""
    kind, count = _u32(buf, at), _u32(buf, at + 4)
    at += 8
    wkb_type = _TO_WKB.get(kind, kind)
    if flags & G_Z:
        wkb_type |= WKB_Z
    if flags & G_M:
        wkb_type |= WKB_M
    if top and srid != 0:
        wkb_type |= WKB_SRID
    out += b"\x01" + U32.pack(wkb_type)
    if top and srid != 0:
        out += struct.pack("<i", srid)
    point = 8 * ndims
    if kind in _POINTLIKE:
        size = count * point
        if at + size > len(buf):
            raise DecodeError("geometry points run out of their datum")
        if kind == POINT:
            out += buf[at : at + size] if count else _NAN * ndims
        elif kind == TRIANGLE and count:
            out += U32.pack(1) + U32.pack(count) + buf[at : at + size]
        else:
            out += U32.pack(count) + buf[at : at + size]
        return at + size
    if kind == POLYGON:
        sizes = [_u32(buf, at + 4 * r) for r in range(count)]
        at += 4 * count + (4 if count % 2 else 0)
        if not sizes or sizes[0] == 0:  # lwpoly_is_empty: no ring, or an empty first one
            out += U32.pack(0)
            return at + sum(sizes) * point
        out += U32.pack(count)
        for n in sizes:
            if at + n * point > len(buf):
                raise DecodeError("polygon ring runs out of its datum")
            out += U32.pack(n) + buf[at : at + n * point]
            at += n * point
        return at
    if kind in _COLLECTIONS:
        out += U32.pack(count)
        for _ in range(count):
            at = _write(buf, at, flags, ndims, srid, out, top=False)
        return at
    raise DecodeError(f"geometry type {kind} is not a PostGIS geometry type")


def geometry_text(buf: bytes) -> str:
    """geometry_out (LWGEOM_out) and geography_out: the EWKB in upper-case hex."""
    return gserialized_value(buf).hex


# --- EWKB (geometry_send) → gserialized ------------------------------------------------


class _Reader:
    __slots__ = ("at", "data")

    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def take(self, n: int) -> bytes:
        if self.at + n > len(self.data):
            raise DecodeError("EWKB value ends early")
        chunk = self.data[self.at : self.at + n]
        self.at += n
        return chunk


def ewkb_to_gserialized(data: bytes, *, geodetic: bool) -> bytes:
    """geometry_send / geography_send (EWKB) → the stored payload (version 2, no box)."""
    reader = _Reader(data)
    body = bytearray()
    srid, zm = _read(reader, body, top=True)
    if reader.at != len(data):
        raise DecodeError("EWKB value has trailing bytes")
    flags = G2_VERSION | zm | (G_GEODETIC if geodetic else 0)
    raw = srid & 0x1FFFFF
    return bytes([raw >> 16 & 0xFF, raw >> 8 & 0xFF, raw & 0xFF, flags]) + bytes(body)


def _read(reader: _Reader, body: bytearray, *, top: bool) -> tuple[int, int]:
    order = "<" if reader.take(1) == b"\x01" else ">"
    u32 = struct.Struct(order + "I")

    def count() -> int:
        return int(u32.unpack(reader.take(4))[0])

    raw_type = count()
    zm = (G_Z if raw_type & WKB_Z else 0) | (G_M if raw_type & WKB_M else 0)
    ndims = 2 + (1 if zm & G_Z else 0) + (1 if zm & G_M else 0)
    srid = int(struct.unpack(order + "i", reader.take(4))[0]) if raw_type & WKB_SRID else 0
    if not top:
        srid = 0
    kind = raw_type & 0x0FFFFFFF
    kind = _FROM_WKB.get(kind, kind)

    def points(n: int) -> bytes:
        values = struct.unpack(f"{order}{n * ndims}d", reader.take(8 * n * ndims))
        return struct.pack(f"<{n * ndims}d", *values)

    if kind == POINT:
        coords = points(1)
        empty = all(coords[k : k + 8] == _NAN for k in range(0, len(coords), 8))
        body += U32.pack(POINT) + U32.pack(0 if empty else 1) + (b"" if empty else coords)
    elif kind in (LINE, CIRCSTRING):
        n = count()
        body += U32.pack(kind) + U32.pack(n) + points(n)
    elif kind in (POLYGON, TRIANGLE):
        rings = count()
        sizes, data = [], b""
        for _ in range(rings):
            n = count()
            sizes.append(n)
            data += points(n)
        if kind == TRIANGLE:
            body += U32.pack(kind) + U32.pack(sizes[0] if sizes else 0) + data
        else:
            body += U32.pack(kind) + U32.pack(rings) + b"".join(U32.pack(n) for n in sizes)
            body += b"\0\0\0\0" if rings % 2 else b""
            body += data
    elif kind in _COLLECTIONS:
        n = count()
        body += U32.pack(kind) + U32.pack(n)
        for _ in range(n):
            _read(reader, body, top=False)
    else:
        raise DecodeError(f"EWKB geometry type {kind} is not a PostGIS geometry type")
    return srid, zm
