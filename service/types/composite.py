"""Composite values (record_out): a heap tuple nested inside a datum.

Receives: a composite varlena payload and a callback decoding one field. Hands on: a
dict of field name to value, or the exact text record_out prints.

Layout: the payload is a HeapTupleHeader without its first 4 bytes (which are the
varlena header): datum_typmod, datum_typeid (the composite type, used to find the
field list as record_out does), t_ctid, t_infomask2 (natts), t_infomask, t_hoff, the
null bitmap, then fields laid out as in any heap tuple (see deform), with alignment
relative to the header start. Dropped fields keep their slot and are not shown.

Text: `(` fields separated by `,` `)`; NULL prints as nothing; a field is
double-quoted when empty or containing `"` `\\` `(` `)` `,` or whitespace, with `"`
and `\\` doubled.

Pure; malformed input raises `DecodeError` or `SchemaMismatchError`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from service.errors import DecodeError
from service.types.deform import composite_header, deform_at
from service.types.registry import TypeInfo, TypeRegistry
from service.types.varlena import ToastPointer

T = TypeVar("T")


def read_composite(
    buf: bytes, registry: TypeRegistry, elem: Callable[[bytes, TypeInfo], T]
) -> list[tuple[str, T | None]]:
    """(field name, value or None) for every live field, in attnum order."""
    _typmod, typeid, natts, infomask, hoff = composite_header(buf)
    info = registry.get(typeid)
    if info.typtype != "c":
        raise DecodeError(f"composite datum names type {info.name}, which is not composite")
    datums = deform_at(
        buf, -4, natts=natts, infomask=infomask, hoff=hoff, columns=info.fields, relation=info.name
    )
    out: list[tuple[str, T | None]] = []
    for col, datum in zip(info.fields, datums, strict=True):
        if col.dropped:
            continue
        if isinstance(datum, ToastPointer):
            raise DecodeError(f"TOAST pointer inside composite {info.name}.{col.name}")
        out.append((col.name, None if datum is None else elem(datum, registry.get(col.typid))))
    return out


def composite_value(
    buf: bytes, registry: TypeRegistry, elem: Callable[[bytes, TypeInfo], Any]
) -> dict[str, Any]:
    return dict(read_composite(buf, registry, elem))


_SPECIAL = frozenset('"\\(),') | frozenset(" \t\n\r\v\f")


def _quote(text: str) -> str:
    if text == "" or any(ch in _SPECIAL for ch in text):
        return '"' + text.replace("\\", "\\\\").replace('"', '""') + '"'
    return text


def composite_text(
    buf: bytes, registry: TypeRegistry, elem: Callable[[bytes, TypeInfo], str]
) -> str:
    """record_out."""
    fields = read_composite(buf, registry, elem)
    return "(" + ",".join("" if v is None else _quote(v) for _, v in fields) + ")"
