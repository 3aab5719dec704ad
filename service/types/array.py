"""Arrays (array.h, arrayfuncs.c): N-D arrays with NULLs and lower bounds.

Receives: an array varlena payload and a callback that decodes one element datum (the
registry supplies the element type from the array's own header, as array_out does).
Hands on: `PgArray`, a list (nested for N-D) carrying the lower bounds, or the exact
text array_out prints; `int2vector`/`oidvector` print space-separated (int2vectorout).

Layout, offsets counted from the 4-byte varlena header as in memory: int32 ndim,
int32 dataoffset (0 when there is no null bitmap), Oid elemtype, int32 dims[ndim],
int32 lbound[ndim], the null bitmap (1 = present, first element in the low bit) when
dataoffset != 0, then the element data from dataoffset (or from
MAXALIGN(16 + 8*ndim)). Elements follow in row-major order, each aligned to the element
type's typalign; NULLs take no space.

Text (array_out): `{}` for no dimensions; a `[lb:ub]...=` prefix when any lower bound
is not 1; braces per dimension; the element type's delimiter; an element is quoted when
empty, equal to NULL (any case), or containing `"` `\\` `{` `}` the delimiter or
whitespace, with `"` and `\\` backslash-escaped inside quotes.

Pure; malformed input raises `DecodeError`.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, TypeVar

from service._binary import I32
from service.errors import DecodeError
from service.types.deform import align
from service.types.registry import TypeInfo, TypeRegistry
from service.types.varlena import ToastPointer, read_varlena

T = TypeVar("T")

_HEAD = struct.Struct("<iiI")
_VARHDRSZ = 4


class PgArray(list[Any]):
    """A decoded array: a list (nested per dimension) plus its lower bounds."""

    __slots__ = ("lower_bounds",)

    def __init__(self, values: list[Any], lower_bounds: tuple[int, ...]) -> None:
        super().__init__(values)
        self.lower_bounds = lower_bounds


def _maxalign(n: int) -> int:
    return (n + 7) & ~7


def read_array(
    buf: bytes, registry: TypeRegistry, elem: Callable[[bytes, TypeInfo], T]
) -> tuple[TypeInfo, list[int], list[int], list[T | None]]:
    """(element type, dims, lower bounds, flat elements with None for NULL)."""
    if len(buf) < _HEAD.size:
        raise DecodeError(f"array datum of {len(buf)} bytes is too short")
    ndim, dataoffset, elemtype = _HEAD.unpack_from(buf, 0)
    if not 0 <= ndim <= 6:  # MAXDIM
        raise DecodeError(f"array has {ndim} dimensions")
    dims = [I32.unpack_from(buf, 12 + 4 * i)[0] for i in range(ndim)]
    lbounds = [I32.unpack_from(buf, 12 + 4 * (ndim + i))[0] for i in range(ndim)]
    info = registry.get(elemtype)
    nitems = 1
    for d in dims:
        nitems *= d
    if ndim == 0:
        nitems = 0
    bitmap_at = 12 + 8 * ndim  # payload offset (logical 16 + 8*ndim)
    off = (dataoffset or _maxalign(_VARHDRSZ + 12 + 8 * ndim)) - _VARHDRSZ
    if dataoffset and bitmap_at + (nitems + 7) // 8 > len(buf):
        raise DecodeError("array null bitmap overruns its datum")
    out: list[T | None] = []
    for i in range(nitems):
        if dataoffset and not (buf[bitmap_at + (i >> 3)] >> (i & 7)) & 1:
            out.append(None)
            continue
        off = align(off + _VARHDRSZ, info.typalign) - _VARHDRSZ
        if info.typlen == -1:
            value, size = read_varlena(buf, off)
            if isinstance(value, ToastPointer):
                raise DecodeError("TOAST pointer inside an array")
        elif info.typlen == -2:
            end = buf.find(b"\x00", off)
            if end < 0:
                raise DecodeError("unterminated cstring in array")
            value, size = buf[off:end], end - off + 1
        else:
            value, size = buf[off : off + info.typlen], info.typlen
        if off + size > len(buf):
            raise DecodeError(f"array element {i} overruns its datum")
        off += size
        out.append(elem(value, info))
    return info, dims, lbounds, out


def _nest(flat: list[Any], dims: list[int]) -> list[Any]:
    if len(dims) <= 1:
        return list(flat)
    step = len(flat) // dims[0] if dims[0] else 0
    return [_nest(flat[i * step : (i + 1) * step], dims[1:]) for i in range(dims[0])]


def array_value(
    buf: bytes, registry: TypeRegistry, elem: Callable[[bytes, TypeInfo], Any]
) -> PgArray:
    _, dims, lbounds, flat = read_array(buf, registry, elem)
    return PgArray(_nest(flat, dims), tuple(lbounds))


_SPACE = frozenset(" \t\n\r\v\f")


def _quote(text: str, delim: str) -> str:
    if (
        text == ""
        or text.upper() == "NULL"
        or any(ch in '"\\{}' or ch == delim or ch in _SPACE for ch in text)
    ):
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return text


def array_text(buf: bytes, registry: TypeRegistry, elem: Callable[[bytes, TypeInfo], str]) -> str:
    """array_out."""
    info, dims, lbounds, flat = read_array(buf, registry, elem)
    if not dims or 0 in dims:
        return "{}"
    delim = info.typdelim
    items = ["NULL" if v is None else _quote(v, delim) for v in flat]
    prefix = ""
    if any(lb != 1 for lb in lbounds):
        prefix = "".join(f"[{lb}:{lb + d - 1}]" for lb, d in zip(lbounds, dims, strict=True)) + "="

    def render(part: list[str], level: int) -> str:
        if level == len(dims) - 1:
            return "{" + delim.join(part) + "}"
        step = len(part) // dims[level]
        return (
            "{"
            + delim.join(
                render(part[i * step : (i + 1) * step], level + 1) for i in range(dims[level])
            )
            + "}"
        )

    return prefix + render(items, 0)


def vector_text(buf: bytes, registry: TypeRegistry, elem: Callable[[bytes, TypeInfo], str]) -> str:
    """int2vectorout / oidvectorout: elements separated by single spaces."""
    _, _, _, flat = read_array(buf, registry, elem)
    return " ".join("" if v is None else v for v in flat)
