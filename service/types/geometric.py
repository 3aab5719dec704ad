"""Geometric types (geo_decls.h, geo_ops.c): point, line, lseg, box, path, polygon, circle.

Receives: a datum's bytes as `deform` hands them on: the fixed-length little-endian
image (point 16 bytes, line 24, lseg 32, box 32, circle 24) or, for path and polygon,
the varlena payload without its header. Hands on: the exact text the output function
prints, and for point a `Point` (what the Avro mapping needs for Debezium's
io.debezium.data.geometry.Point); the other types' Python value is their text, as
Debezium publishes them.

Layouts (all float8, little-endian):
- Point {x, y}; LSEG {p[2]}; BOX {high, low}; LINE {A, B, C}; CIRCLE {center, radius};
- PATH (varlena) {int32 npts, int32 closed, int32 dummy (padding), Point p[npts]};
- POLYGON (varlena) {int32 npts, BOX boundbox, Point p[npts]}.

Text: every coordinate is printed by float8out_internal, i.e. float8out's shortest
round-trip digits under extra_float_digits=1 (pair_encode, single_encode), in the
shapes point_out `(x,y)`, line_out `{A,B,C}`, lseg_out `[(x1,y1),(x2,y2)]`, box_out
`(hx,hy),(lx,ly)`, path_out `((..),..)` closed or `[(..),..]` open, poly_out
`((..),..)` and circle_out `<(x,y),r>` (path_encode).

`*_send_to_stored` turn the send format (big-endian float8s; path: int8 closed, int32
npts, points; polygon: int32 npts, points, the bounding box recomputed as
make_bound_box does) into that stored form, for the initial snapshot's COPY BINARY.

Pure; malformed input raises `DecodeError`.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from service.errors import DecodeError
from service.types.numeric import float_text

_F8 = struct.Struct("<d")
_I32 = struct.Struct("<i")
_BE_I32 = struct.Struct(">i")
_BE_F8 = struct.Struct(">d")

FIXED_FLOATS = {"point_out": 2, "line_out": 3, "lseg_out": 4, "box_out": 4, "circle_out": 3}
"""Output function → number of float8s in the type's fixed-length image."""


@dataclass(slots=True, frozen=True)
class Point:
    """A point value (the Python value of `point`)."""

    x: float
    y: float


def _floats(buf: bytes, count: int, name: str, at: int = 0) -> list[float]:
    if len(buf) < at + 8 * count:
        raise DecodeError(f"{name} datum of {len(buf)} bytes is too short")
    return [float(_F8.unpack_from(buf, at + 8 * i)[0]) for i in range(count)]


def _f(v: float) -> str:
    return float_text(v, single=False)


def _pair(x: float, y: float) -> str:
    return f"({_f(x)},{_f(y)})"


def _points(coords: list[float]) -> str:
    return ",".join(_pair(coords[i], coords[i + 1]) for i in range(0, len(coords), 2))


def _fixed(buf: bytes, count: int, name: str) -> list[float]:
    if len(buf) != 8 * count:
        raise DecodeError(f"{name} datum has {len(buf)} bytes, not {8 * count}")
    return _floats(buf, count, name)


def point_value(buf: bytes) -> Point:
    x, y = _fixed(buf, 2, "point")
    return Point(x, y)


def point_text(buf: bytes) -> str:
    """point_out."""
    x, y = _fixed(buf, 2, "point")
    return _pair(x, y)


def line_text(buf: bytes) -> str:
    """line_out: {A,B,C} of the line Ax + By + C = 0."""
    a, b, c = _fixed(buf, 3, "line")
    return f"{{{_f(a)},{_f(b)},{_f(c)}}}"


def lseg_text(buf: bytes) -> str:
    """lseg_out: path_encode(PATH_OPEN, 2 points)."""
    return f"[{_points(_fixed(buf, 4, 'lseg'))}]"


def box_text(buf: bytes) -> str:
    """box_out: path_encode(PATH_NONE, high then low)."""
    return _points(_fixed(buf, 4, "box"))


def circle_text(buf: bytes) -> str:
    """circle_out: <(x,y),r>."""
    x, y, r = _fixed(buf, 3, "circle")
    return f"<{_pair(x, y)},{_f(r)}>"


def _counted(buf: bytes, at: int, name: str) -> list[float]:
    npts = _I32.unpack_from(buf, 0)[0] if len(buf) >= 4 else -1
    if npts < 0 or len(buf) != at + 16 * npts:
        raise DecodeError(f"{name} datum of {len(buf)} bytes does not hold {npts} points")
    return _floats(buf, 2 * npts, name, at)


def path_text(buf: bytes) -> str:
    """path_out: closed paths in parentheses, open ones in brackets."""
    coords = _counted(buf, 12, "path")
    closed = _I32.unpack_from(buf, 4)[0]
    body = _points(coords)
    return f"({body})" if closed else f"[{body}]"


def poly_text(buf: bytes) -> str:
    """poly_out: path_encode(PATH_CLOSED) over the points (the bounding box is not shown)."""
    return f"({_points(_counted(buf, 36, 'polygon'))})"


# --- send format → stored form ------------------------------------------------------


def _swap_floats(data: bytes, count: int, name: str, at: int = 0) -> bytes:
    if len(data) < at + 8 * count:
        raise DecodeError(f"{name} send value of {len(data)} bytes is too short")
    return b"".join(data[at + 8 * i : at + 8 * i + 8][::-1] for i in range(count))


def fixed_send_to_stored(src: str, data: bytes) -> bytes:
    """point/line/lseg/box/circle send value → stored image (each float8 byte-swapped)."""
    count = FIXED_FLOATS[src]
    if len(data) != 8 * count:
        raise DecodeError(f"{src} send value has {len(data)} bytes, not {8 * count}")
    return _swap_floats(data, count, src)


def path_send_to_stored(data: bytes) -> bytes:
    """path_send {int8 closed, int32 npts, points} → PATH without its varlena header."""
    if len(data) < 5:
        raise DecodeError("path send value is too short")
    closed = data[0]
    npts = _BE_I32.unpack_from(data, 1)[0]
    if npts < 0 or len(data) != 5 + 16 * npts:
        raise DecodeError(f"path send value of {len(data)} bytes says {npts} points")
    return (
        _I32.pack(npts)
        + _I32.pack(1 if closed else 0)
        + _I32.pack(0)
        + _swap_floats(data, 2 * npts, "path", 5)
    )


def poly_send_to_stored(data: bytes) -> bytes:
    """poly_send {int32 npts, points} → POLYGON, with make_bound_box's bounding box."""
    if len(data) < 4:
        raise DecodeError("polygon send value is too short")
    npts = _BE_I32.unpack_from(data, 0)[0]
    if npts <= 0 or len(data) != 4 + 16 * npts:
        raise DecodeError(f"polygon send value of {len(data)} bytes says {npts} points")
    xs = [_BE_F8.unpack_from(data, 4 + 16 * i)[0] for i in range(npts)]
    ys = [_BE_F8.unpack_from(data, 12 + 16 * i)[0] for i in range(npts)]
    box = b"".join(_F8.pack(v) for v in (max(xs), max(ys), min(xs), min(ys)))
    return _I32.pack(npts) + box + _swap_floats(data, 2 * npts, "polygon", 4)
