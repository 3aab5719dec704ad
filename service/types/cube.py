"""contrib/cube (cubedata.h, cube.c) and contrib/seg (segdata.h, seg.c).

cube — receives the varlena payload: uint32 header (POINT_BIT 0x80000000, the
dimension count in the low 31 bits), then float8 coordinates: `dim` of them for a point,
else the lower-left corner's `dim` then the upper-right's. cube_out prints
`(x1, x2, ...)` for a point (the point bit, or equal corners as cube_is_point_internal
finds in pre-9.4 data), else `(ll...),(ur...)`, each coordinate by float8out_internal.
earthdistance's `earth` is a domain over cube and prints the same.

seg — receives the 12-byte datum: float4 lower, upper, char l_sigd, u_sigd, l_ext,
u_ext. seg_out prints the bounds with their stored significant digits (`restore`,
replayed here on the same char buffer as the C code), a `<`, `>` or `~` extension
character, and `..` between distinct bounds (a missing bound's ext is `-`).

Hands on: the exact text, which is also the Python value (Debezium has no mapping for
either: it is published as PostgreSQL's text). The initial snapshot reads both as text.

Pure; malformed input raises `DecodeError`.
"""

from __future__ import annotations

import struct

from service._binary import U32
from service.errors import DecodeError
from service.types.numeric import float_text

_F8 = struct.Struct("<d")
_SEG = struct.Struct("<ffbbcc")
POINT_BIT = 0x80000000
DIM_MASK = 0x7FFFFFFF
FLT_DIG = 6


def cube_text(buf: bytes) -> str:
    """cube_out."""
    if len(buf) < 4:
        raise DecodeError(f"cube datum of {len(buf)} bytes is too short")
    header = U32.unpack_from(buf, 0)[0]
    dim = header & DIM_MASK
    n = dim if header & POINT_BIT else 2 * dim
    if len(buf) < 4 + 8 * n:
        raise DecodeError(f"cube of {dim} dimensions in {len(buf)} bytes")
    xs = [float(_F8.unpack_from(buf, 4 + 8 * i)[0]) for i in range(n)]
    ll = xs[:dim]
    ur = ll if header & POINT_BIT else xs[dim:]

    def coords(values: list[float]) -> str:
        return "(" + ", ".join(float_text(v, single=False) for v in values) + ")"

    if ll == ur:
        return coords(ll)
    return f"{coords(ll)},{coords(ur)}"


def _restore(val: float, n: int) -> str:
    """seg.c's restore(): `val` with `n` significant digits, on its 25-char buffer."""
    n = FLT_DIG if n <= 0 else min(n, FLT_DIG)
    sign = 1 if val < 0 else 0
    result = "%.*e" % (n - 1, val)  # noqa: UP031  (C's %.*e, exactly)
    p = result.find("e")
    if p < 0:
        return result  # inf, nan
    exp = int(result[p + 1 :])
    if exp == 0:
        return result[:p]
    if abs(exp) > 4:
        return result
    buf = bytearray(b"0" * 24 + b"\0" + b"\0" * 8)
    i, dp = 10, 0
    for ch in result[sign:p].encode():
        buf[i] = ch
        if ch == ord("."):
            dp = i
            i -= 1
        i += 1
    if dp == 0:
        dp = i
        i -= 1

    def shift_right_from(dp: int) -> None:
        for k in range(23, dp, -1):
            buf[k] = buf[k - 1]

    def cstr(at: int) -> str:
        return buf[at : buf.index(0, at)].decode("ascii")

    if exp > 0:
        if dp - 10 + exp >= n:
            exp = dp - 10 + exp - n
            buf[10 + n] = 0
            if n > 1:
                dp = 11
                shift_right_from(dp)
                buf[dp] = ord(".")
                tail = f"e{exp + n - 1}".encode() + b"\0"
                buf[11 + n : 11 + n + len(tail)] = tail
            else:
                tail = f"e{exp + n - 1}".encode() + b"\0"
                buf[11 : 11 + len(tail)] = tail
        else:
            dp += exp
            shift_right_from(dp)
            buf[11 + n] = 0
            buf[dp] = ord(".")
        if sign:
            buf[9] = ord("-")
            return cstr(9)
        return cstr(10)
    dp += exp - 1
    buf[10 + n] = 0
    buf[dp] = ord(".")
    if sign:
        buf[dp - 2] = ord("-")
        return cstr(dp - 2)
    return cstr(dp - 1)


def seg_text(buf: bytes) -> str:
    """seg_out."""
    if len(buf) != _SEG.size:
        raise DecodeError(f"seg datum has {len(buf)} bytes, not {_SEG.size}")
    lower, upper, l_sigd, u_sigd, l_ext, u_ext = _SEG.unpack(buf)
    out = ""
    if l_ext in (b">", b"<", b"~"):
        out += l_ext.decode("latin-1")
    if lower == upper and l_ext == u_ext:
        out += _restore(lower, l_sigd)
    else:
        if l_ext != b"-":
            out += _restore(lower, l_sigd) + " "
        out += ".."
        if u_ext != b"-":
            out += " "
            if u_ext in (b">", b"<") or l_ext == b"~":
                out += u_ext.decode("latin-1")  # a NUL here ends the C string
            out += _restore(upper, u_sigd)
    return out.split("\0", 1)[0]
