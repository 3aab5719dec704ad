"""Range types (rangetypes.c): bounds, inclusivity, infinity and empty.

Receives: a range varlena payload and a callback decoding a bound with the range's
subtype. Hands on: `Range` or the exact text range_out prints.

Layout, offsets from the 4-byte varlena header: Oid rangetypid, then the lower bound
(if present) and the upper bound (if present), each aligned to the subtype's typalign
except that a short-header varlena is not aligned (datum_write / att_align_pointer),
and as the very last byte the flags: 0x01 empty, 0x02 lower inclusive, 0x04 upper
inclusive, 0x08 lower infinite, 0x10 upper infinite. A bound is stored only if the
range is not empty and that bound is not infinite.

Text: `empty`, or `[`/`(`, lower, `,`, upper, `]`/`)` with an infinite bound printed
as nothing; a bound is double-quoted when empty or containing `"` `\\` `(` `)` `[` `]`
`,` or whitespace, with `"` and `\\` doubled (range_bound_escape).

Pure; malformed input raises `DecodeError`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from service._binary import U32
from service.errors import DecodeError
from service.types.deform import align
from service.types.registry import TypeInfo, TypeRegistry
from service.types.varlena import ToastPointer, read_varlena

T = TypeVar("T")

RANGE_EMPTY = 0x01
RANGE_LB_INC = 0x02
RANGE_UB_INC = 0x04
RANGE_LB_INF = 0x08
RANGE_UB_INF = 0x10

_VARHDRSZ = 4


@dataclass(slots=True, frozen=True)
class Range:
    """A range value. An infinite bound is None; `empty` ranges have no bounds."""

    lower: Any
    upper: Any
    lower_inc: bool
    upper_inc: bool
    empty: bool = False


def read_range(
    buf: bytes, registry: TypeRegistry, elem: Callable[[bytes, TypeInfo], T]
) -> tuple[int, T | None, T | None]:
    """(flags, lower, upper) of a range payload."""
    if len(buf) < 5:
        raise DecodeError(f"range datum of {len(buf)} bytes is too short")
    rangetypid = U32.unpack_from(buf, 0)[0]
    sub = registry.get(registry.get(rangetypid).range_subtype)
    flags = buf[-1]
    off = 4
    bounds: list[T | None] = []
    for present in (
        not flags & (RANGE_EMPTY | RANGE_LB_INF),
        not flags & (RANGE_EMPTY | RANGE_UB_INF),
    ):
        if not present:
            bounds.append(None)
            continue
        if sub.typlen == -1:
            if buf[off] == 0:
                off = align(off + _VARHDRSZ, sub.typalign) - _VARHDRSZ
            value, size = read_varlena(buf, off)
            if isinstance(value, ToastPointer):
                raise DecodeError("TOAST pointer inside a range")
        elif sub.typlen > 0:
            off = align(off + _VARHDRSZ, sub.typalign) - _VARHDRSZ
            value, size = buf[off : off + sub.typlen], sub.typlen
        else:
            raise DecodeError(f"range subtype {sub.name} has typlen {sub.typlen}")
        if off + size > len(buf) - 1:
            raise DecodeError("range bound overruns its datum")
        off += size
        bounds.append(elem(value, sub))
    return flags, bounds[0], bounds[1]


def range_value(
    buf: bytes, registry: TypeRegistry, elem: Callable[[bytes, TypeInfo], Any]
) -> Range:
    flags, lower, upper = read_range(buf, registry, elem)
    if flags & RANGE_EMPTY:
        return Range(None, None, False, False, True)
    return Range(lower, upper, bool(flags & RANGE_LB_INC), bool(flags & RANGE_UB_INC))


_SPECIAL = frozenset('"\\()[],') | frozenset(" \t\n\r\v\f")


def bound_escape(text: str) -> str:
    """range_bound_escape."""
    if text == "" or any(ch in _SPECIAL for ch in text):
        return '"' + text.replace("\\", "\\\\").replace('"', '""') + '"'
    return text


def range_text(buf: bytes, registry: TypeRegistry, elem: Callable[[bytes, TypeInfo], str]) -> str:
    """range_out."""
    flags, lower, upper = read_range(buf, registry, elem)
    if flags & RANGE_EMPTY:
        return "empty"
    lo = "" if lower is None else bound_escape(lower)
    hi = "" if upper is None else bound_escape(upper)
    return (
        ("[" if flags & RANGE_LB_INC else "(")
        + lo
        + ","
        + hi
        + ("]" if flags & RANGE_UB_INC else ")")
    )
