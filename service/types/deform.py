"""Tuple deforming: a heap tuple's bytes cut into one raw datum per column.

Receives: a `RawTuple` (or a tuple nested in a composite datum) and the column
definitions valid for it, in attnum order, dropped columns included (they still occupy
their slot in tuples written before the DROP). Hands on: one `Datum` per column:

- `None` for SQL NULL, for a dropped column, and for a column added after the tuple
  was written that has no `missing` value;
- `bytes` for every stored value: exactly `typlen` bytes for fixed-length types (the
  little-endian in-memory image, pass-by-value or not), the payload (header removed,
  inline compression undone) for varlena, the bytes before the NUL for cstring;
- a `ToastPointer` for a value stored out of line, to be resolved with
  `varlena.resolve_toast` once the reorder buffer has the chunks.

Attributes beyond the tuple's `natts` (a column added later with ADD COLUMN) take the
column's `missing` datum, which mirrors `pg_attribute.attmissingval` (the default that
was in force when the column was added, in the same raw form as above) or None
(getmissingattr).

Layout (heap_deform_tuple): data starts at `t_hoff` from the tuple start; each
attribute is aligned to its `typalign` *relative to the tuple start*, except that a
varlena whose first byte is non-zero has a 1-byte header or is external and is not
aligned (att_align_pointer); padding bytes are always zero. A `RawTuple`'s `data`
starts at offset 23 of the tuple (where `t_bits` lives).

Pure; no I/O. A tuple that overruns its columns or its bytes raises `SchemaMismatchError`.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from service.decode.events import RawTuple
from service.errors import DecodeError, SchemaMismatchError
from service.types.varlena import ToastPointer, read_varlena, toast_pointer_at, varsize_any

Datum = bytes | ToastPointer | None
"""A raw column value; see the module docstring."""

HEAP_HASNULL = 0x0001
HEAP_NATTS_MASK = 0x07FF
_T_BITS_OFFSET = 23  # offsetof(HeapTupleHeaderData, t_bits)

TYPALIGN_BYTES = {"c": 1, "s": 2, "i": 4, "d": 8}
"""pg_type.typalign (and attalign) as the alignment in bytes."""
_COMPOSITE_HEADER = struct.Struct("<iI6xHHB")  # typmod, typeid, ctid, infomask2, infomask, hoff


@dataclass(slots=True, frozen=True)
class Column:
    """One attribute of a relation or composite type, as pg_attribute describes it.

    `typlen`/`typbyval`/`typalign` are the attribute's own (attlen, attbyval, attalign),
    kept for dropped columns too, whose `typid` is 0. `missing` is the raw datum of
    `attmissingval` when `atthasmissing`, else None.
    """

    attnum: int
    name: str
    typid: int
    typmod: int
    typlen: int
    typbyval: bool
    typalign: str
    notnull: bool = False
    dropped: bool = False
    missing: bytes | None = None


def align(off: int, typalign: str) -> int:
    """Round `off` up to the alignment `typalign` names (att_align_nominal)."""
    try:
        a = TYPALIGN_BYTES[typalign]
    except KeyError:
        raise DecodeError(f"unknown typalign {typalign!r}") from None
    return (off + a - 1) & ~(a - 1)


def deform_at(
    buf: bytes,
    base: int,
    *,
    natts: int,
    infomask: int,
    hoff: int,
    columns: Sequence[Column],
    relation: str | None = None,
) -> list[Datum]:
    """Deform a tuple whose header starts at offset `base` of `buf` (may be negative).

    `buf[base + 23]` is the first null-bitmap byte; alignment is computed relative to
    `base`. Used for heap tuples (base = -23 over RawTuple.data) and for tuples nested
    in composite datums.
    """
    if natts > len(columns):
        raise SchemaMismatchError(
            f"tuple has {natts} attributes, definition has {len(columns)}", relation=relation
        )
    has_nulls = bool(infomask & HEAP_HASNULL)
    bits_at = base + _T_BITS_OFFSET
    if has_nulls and bits_at + (natts + 7) // 8 > len(buf):
        raise SchemaMismatchError("null bitmap overruns the tuple", relation=relation)
    out: list[Datum] = []
    off = hoff  # relative to base
    end = len(buf) - base
    for i, col in enumerate(columns):
        if i >= natts:
            out.append(None if col.dropped else col.missing)
            continue
        if has_nulls and not (buf[bits_at + (i >> 3)] >> (i & 7)) & 1:
            out.append(None)
            continue
        typlen = col.typlen
        try:
            if typlen == -1:
                if buf[base + off] == 0:
                    off = align(off, col.typalign)
                value, size = read_varlena(buf, base + off)
            elif typlen == -2:
                off = align(off, col.typalign)
                nul = buf.index(b"\x00", base + off)
                value = buf[base + off : nul]
                size = nul - (base + off) + 1
            elif typlen > 0:
                off = align(off, col.typalign)
                size = typlen
                value = buf[base + off : base + off + size]
            else:
                raise SchemaMismatchError(
                    f"column {col.name} has invalid typlen {typlen}", relation=relation
                )
        except (IndexError, ValueError) as exc:
            raise SchemaMismatchError(
                f"column {col.name} overruns the tuple at offset {off}",
                relation=relation,
                field=col.name,
            ) from exc
        if off + size > end:
            raise SchemaMismatchError(
                f"column {col.name} ({size} bytes at {off}) overruns the tuple of {end} bytes",
                relation=relation,
                field=col.name,
            )
        off += size
        out.append(None if col.dropped else value)
    return out


def deform(raw: RawTuple, columns: Sequence[Column], *, relation: str | None = None) -> list[Datum]:
    """One raw datum per column of a WAL heap tuple (heap_deform_tuple + getmissingattr)."""
    return deform_at(
        raw.data,
        -_T_BITS_OFFSET,
        natts=raw.natts,
        infomask=raw.infomask,
        hoff=raw.hoff,
        columns=columns,
        relation=relation,
    )


def toast_pointers(raw: RawTuple, columns: Sequence[Column]) -> list[ToastPointer]:
    """The on-disk TOAST pointers among a WAL heap tuple's live columns, in attnum order.

    Walks the tuple as `deform` does (heap_deform_tuple) but reads only the varlena
    headers: nothing is copied or decompressed, so the unchanged-TOAST fill can ask this
    of every UPDATE. Errors as `deform`'s are left to `deform`: a tuple this walk cannot
    follow yields the pointers found before the damage (the row decode raises it).
    """
    buf = raw.data
    base = -_T_BITS_OFFSET
    natts = min(raw.natts, len(columns))
    has_nulls = raw.has_nulls
    bits_at = base + _T_BITS_OFFSET
    out: list[ToastPointer] = []
    off = raw.hoff
    try:
        for i in range(natts):
            if has_nulls and not (buf[bits_at + (i >> 3)] >> (i & 7)) & 1:
                continue
            col = columns[i]
            typlen = col.typlen
            if typlen == -1:
                if buf[base + off] == 0:
                    off = align(off, col.typalign)
                at = base + off
                if buf[at] == 0x01 and not col.dropped:
                    ptr = toast_pointer_at(buf, at)
                    if ptr is not None:
                        out.append(ptr)
                off += varsize_any(buf, at)
            elif typlen == -2:
                off = align(off, col.typalign)
                off = buf.index(b"\x00", base + off) - base + 1
            elif typlen > 0:
                off = align(off, col.typalign) + typlen
            else:
                break
    except (IndexError, ValueError, DecodeError):
        return out
    return out


def composite_header(body: bytes) -> tuple[int, int, int, int, int]:
    """(typmod, typeid, natts, infomask, hoff) of a composite datum's payload.

    The payload starts 4 bytes into the HeapTupleHeader (after `datum_len_`):
    datum_typmod, datum_typeid, t_ctid, t_infomask2, t_infomask, t_hoff.
    """
    if len(body) < _COMPOSITE_HEADER.size:
        raise DecodeError(f"composite datum of {len(body)} bytes is too short")
    typmod, typeid, infomask2, infomask, hoff = _COMPOSITE_HEADER.unpack_from(body, 0)
    return typmod, typeid, infomask2 & HEAP_NATTS_MASK, infomask, hoff
