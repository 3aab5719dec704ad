"""The changes the reorder buffer holds and hands on, and what they cost in memory.

Part of the reorder buffer stage (`service.reorder.buffer`, reorderbuffer.c); no state.

Receives: the decoder's changes (`HeapChange`, `TruncateEvent`, transactional
`MessageEvent`, and an `InsertRun`'s rows as one `InsertRows`) and the snapshot/schema
stage's `InternalChange`.
Hands on:
- `Change`, the union of what a transaction can queue;
- `change_size`, the accounted size of one change (shaped like ReorderBufferChangeSize;
  the figures are pinned against a real test_decoding slot's spill_bytes), and of an
  `InsertRows` the sum over its rows;
- `held`, the size and the number of changes a queue of them holds, and `one_by_one`,
  the changes of such a queue with each InsertRows spelled out as its rows;
- `ReplayChange`, a change as the sink receives it with the TOAST data it may point to;
- `toast_chunk`, which deforms a toast-table tuple into (chunk_id, chunk_seq, data).

Guarantees: `change_size` is stable (the same change always costs the same, so what is
added at queueing is exactly what is released at replay) and raises `DecodeError` with
the LSN for anything that is not a `Change`; `toast_chunk` raises `DecodeError` with LSN
and xid for a tuple that is not a plain inline chunk. Pure: no I/O.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import NamedTuple

from service.decode.events import HeapChange, InsertRows, MessageEvent, TruncateEvent
from service.errors import DecodeError

# --- changes and their size ---------------------------------------------------------


@dataclass(slots=True, frozen=True)
class InternalChange:
    """An opaque change queued by the snapshot/schema stage (e.g. "DDL applied here").

    `payload` must be picklable (it may be spilled). `size` is what it costs in memory
    accounting, on top of the per-change overhead.
    """

    lsn: int
    xid: int
    payload: object
    size: int


# An InsertRows entry stands for `count` HeapChanges queued one after the other.
Change = HeapChange | TruncateEvent | MessageEvent | InternalChange | InsertRows

# sizeof(ReorderBufferChange) on a 64-bit build, PG15 to PG18: lsn 8, action 4 + pad,
# txn 8, origin_id 2 + pad, a 32-byte union, a 16-byte dlist_node. Measured, not just
# counted: a test_decoding slot spills 132 bytes per 28-byte-tuple insert (80 + 24 + 28),
# and tests/integration/test_reorderbuffer_vs_pg.py compares spill_bytes exactly.
CHANGE_OVERHEAD = 80
TUPLE_OVERHEAD = 24 + 23  # sizeof(HeapTupleData) + the header bytes before RawTuple.data
MESSAGE_OVERHEAD = 16  # the two Size fields a spilled message carries


def change_size(change: Change) -> int:
    """The accounted size of one change, as ReorderBufferChangeSize."""
    kind = type(change)
    if kind is HeapChange:
        assert isinstance(change, HeapChange)
        size = CHANGE_OVERHEAD
        if change.new_tuple is not None:
            size += TUPLE_OVERHEAD + len(change.new_tuple.data)
        if change.old_tuple is not None:
            size += TUPLE_OVERHEAD + len(change.old_tuple.data)
        return size
    if kind is InsertRows:
        assert isinstance(change, InsertRows)
        # each row: a HeapChange with one tuple, or two (`olds` of them: an UPDATE that
        # logged its old tuple), or none (`bares`: deletes that logged no old tuple);
        # data_bytes counts every tuple's data
        return (
            change.nrows * (CHANGE_OVERHEAD + TUPLE_OVERHEAD)
            + (change.olds - change.bares) * TUPLE_OVERHEAD
            + change.data_bytes
        )
    if kind is MessageEvent:
        assert isinstance(change, MessageEvent)
        return (
            CHANGE_OVERHEAD
            + len(change.prefix.encode())
            + 1
            + len(change.payload)
            + MESSAGE_OVERHEAD
        )
    if kind is TruncateEvent:
        assert isinstance(change, TruncateEvent)
        return CHANGE_OVERHEAD + 4 * len(change.relids)
    if kind is InternalChange:
        assert isinstance(change, InternalChange)
        return CHANGE_OVERHEAD + change.size
    raise DecodeError(
        f"reorder buffer cannot hold a {kind.__name__}", lsn=getattr(change, "lsn", None)
    )


def held(changes: Iterable[Change]) -> tuple[int, int]:
    """(accounted size, number of changes) of a transaction's queued `changes`: an
    InsertRows counts as its rows."""
    size = count = 0
    for change in changes:
        size += change_size(change)
        count += change.nrows if type(change) is InsertRows else 1
    return size, count


def one_by_one(changes: Iterable[Change]) -> Iterator[Change]:
    """`changes` with each InsertRows replaced by its rows (HeapChanges), in order."""
    for change in changes:
        if type(change) is InsertRows:
            yield from change
        else:
            yield change


EMPTY_TOAST: Mapping[int, bytes] = MappingProxyType({})


class ReplayChange(NamedTuple):
    """A change as handed to the sink: the event plus the TOAST data it may point to.

    `toast` maps chunk_id (va_valueid) to the concatenated chunk_data of that value, as
    logged (possibly compressed). Empty for anything but a main-table heap change.
    Immutable; a NamedTuple (one per replayed change) because a frozen dataclass's
    __init__ costs several times as much.
    """

    event: Change
    toast: Mapping[int, bytes]


# --- TOAST chunks -------------------------------------------------------------------

_TOAST_HEAD = struct.Struct("<Ii")  # chunk_id oid, chunk_seq int4
_HEAP_TUPLE_BITS_OFFSET = 23  # offsetof(HeapTupleHeaderData, t_bits)


def toast_chunk(change: HeapChange) -> tuple[int, int, bytes]:
    """Deform a toast-table tuple into (chunk_id, chunk_seq, chunk_data payload).

    The layout is fixed (oid, int4, bytea, no nulls). chunk_data is a plain varlena
    with a 4-byte or, when it fits, a 1-byte header; never compressed or external.
    Little-endian headers (x86, arm64) are assumed, as the WAL itself is.
    """
    tup = change.new_tuple
    if tup is None or tup.natts != 3 or tup.has_nulls:
        raise DecodeError("malformed toast chunk tuple", lsn=change.lsn, xid=change.xid)
    data = tup.data
    off = tup.hoff - _HEAP_TUPLE_BITS_OFFSET
    if off < 0 or len(data) < off + 9:
        raise DecodeError("toast chunk tuple too short", lsn=change.lsn, xid=change.xid)
    chunk_id, chunk_seq = _TOAST_HEAD.unpack_from(data, off)
    pos = off + 8
    first = data[pos]
    if first & 0x01:
        if first == 0x01:
            raise DecodeError("external toast chunk", lsn=change.lsn, xid=change.xid)
        end = pos + (first >> 1)
        start = pos + 1
    elif first & 0x03 == 0:
        end = pos + ((int.from_bytes(data[pos : pos + 4], "little") >> 2) & 0x3FFFFFFF)
        start = pos + 4
    else:
        raise DecodeError("compressed toast chunk", lsn=change.lsn, xid=change.xid)
    if end > len(data) or end < start:
        raise DecodeError("toast chunk length out of range", lsn=change.lsn, xid=change.xid)
    return chunk_id, chunk_seq, bytes(data[start:end])
