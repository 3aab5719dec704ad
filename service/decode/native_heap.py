"""Heap and Heap2 record parsers in Rust: the twins of `service.decode.heap` (glue).

Receives: what `service.decode.heap`'s functions receive, one `XLogRecord` of rmgr Heap
or Heap2 whose op the caller has already looked up.
Hands on: the same list of events (`HeapChange` per tuple, `TruncateEvent`,
`NewCidEvent`), equal field for field: `RawTuple` and `HeapChange` instances built in
Rust slot by slot (service/native/src/glue/slots.rs: no Python frame per row), the others
by the reference's own constructors; or the same `DecodeError` (message and lsn). Held to that by
tests/service/wal/test_native_decode_heap.py.

`decode_inplace` is the Python reference's own function: its PG18 invalidation messages
need the decode_xact parser, which has no twin in Rust yet.

One call per record, as the Python parsers are called; the parse runs in Rust
(service/native/src/decode/heap.rs). Pure: no I/O, no state.

Called per record with Python `XLogRecord`s (the functions below), it is not a speed-up:
it must read their attributes back, which costs what the Python parse costs (423k vs
672k inserts/s measured), so `service.impl` does not offer it that way. `predecode`
instead arms the native XLog reader to run the same parsers inside its walk, on the
record bytes: a table-change heap record then never becomes an `XLogRecord` (nor its
block references and byte strings), and reaches the decoding driver as a
`PredecodedRecord` carrying these very events (`service.impl.predecode_heap`, the
session's reader under the native core). Held to the Python decoder by
tests/service/decode/test_native_heap.py (real and damaged WAL).

`load_rows` turns an InsertRows' spilled dump back into an InsertRows (the spill store
calls it, importing this module only when a file holds such a record).
"""

from __future__ import annotations

from collections.abc import Collection

from service import _native
from service.decode.events import (
    ChangeKind,
    Event,
    HeapChange,
    InsertRows,
    InsertRun,
    NewCidEvent,
    PredecodedRecord,
    RawTuple,
    TruncateEvent,
)
from service.decode.heap import decode_inplace
from service.errors import DecodeError
from service.wal.native import NativeXLogReader
from service.wal.record import RelFileLocator, XLogRecord

__all__ = [
    "decode_confirm",
    "decode_delete",
    "decode_inplace",
    "decode_insert",
    "decode_multi_insert",
    "decode_new_cid",
    "decode_truncate",
    "decode_update",
    "heap_decoder",
    "load_rows",
    "predecode",
]


def heap_decoder(raw_tuple: type = RawTuple, heap_change: type = HeapChange) -> _native.HeapDecoder:
    """The Rust parsers' boundary, building `raw_tuple` and `heap_change` instances slot
    by slot (service/native/src/glue/slots.rs: a TypeError here for a class it cannot
    fill) and the other events by their constructors."""
    return _native.HeapDecoder(
        raw_tuple,
        heap_change,
        TruncateEvent,
        NewCidEvent,
        RelFileLocator,
        sorted(ChangeKind, key=int),
        DecodeError,
    )


_DECODER = heap_decoder()
_decode = _DECODER.decode


def decode_insert(record: XLogRecord) -> list[Event]:
    """XLOG_HEAP_INSERT, as DecodeInsert."""
    return _decode("insert", record)


def decode_update(record: XLogRecord) -> list[Event]:
    """XLOG_HEAP_UPDATE and XLOG_HEAP_HOT_UPDATE, as DecodeUpdate."""
    return _decode("update", record)


def decode_delete(record: XLogRecord) -> list[Event]:
    """XLOG_HEAP_DELETE, as DecodeDelete."""
    return _decode("delete", record)


def decode_confirm(record: XLogRecord) -> list[Event]:
    """XLOG_HEAP_CONFIRM, as DecodeSpecConfirm."""
    return _decode("confirm", record)


def decode_truncate(record: XLogRecord) -> list[Event]:
    """XLOG_HEAP_TRUNCATE, as DecodeTruncate."""
    return _decode("truncate", record)


def decode_multi_insert(record: XLogRecord) -> list[Event]:
    """XLOG_HEAP2_MULTI_INSERT, as DecodeMultiInsert."""
    return _decode("multi_insert", record)


def decode_new_cid(record: XLogRecord) -> list[Event]:
    """XLOG_HEAP2_NEW_CID (`xl_heap_new_cid`)."""
    return _decode("new_cid", record)


def load_rows(
    data: bytes, xid: int, locator: RelFileLocator, toast: RelFileLocator | None = None
) -> InsertRows:
    """The InsertRows whose rows' `HeapRows.dump()` is `data`, of `xid` into `locator`,
    its TOAST chunk rows into `toast` (what the spill store reads back,
    `service.reorder.spill`): its rows' HeapChanges equal the dumped ones'.
    `DecodeError` (with xid, and an LSN once the rows are read) for bytes that are not
    such a dump, or that hold chunk rows and `toast` is None."""
    return InsertRows(_native.HeapRows.load(_DECODER, data, xid, locator, toast))


def predecode(
    reader: object,
    bare_rmids: Collection[int] = (),
    *,
    runs: bool = False,
    runs_from: int = 0,
    inert_ops: Collection[tuple[int, int]] = (),
) -> bool:
    """Arm `reader`, when it is the native XLog reader, to hand on every table-change
    heap record as a `PredecodedRecord` whose events these parsers give (a record they
    refuse still comes as an `XLogRecord`), and every record of an rmgr in `bare_rmids`
    as one with no events (`Decoder.without_decode`: the rmgrs without rm_decode);
    with `runs`, consecutive plain inserts of one transaction into one relation (with
    the TOAST chunk inserts between them), or its updates or deletes that log one
    tuple, as one `InsertRun`, none holding a record logged before `runs_from`, and
    the XLOG, Heap and Heap2 records of `inert_ops` (`Decoder.inert_ops`) inside a run
    counted in it, and outside one handed on as a bare rmgr's are (pgbench's row locks
    between its updates). False, having done nothing, for any other reader."""
    if not isinstance(reader, NativeXLogReader):
        return False
    if runs:
        reader.predecode_heap(
            _DECODER, PredecodedRecord, bare_rmids, InsertRun, InsertRows, runs_from, inert_ops
        )
    else:
        reader.predecode_heap(_DECODER, PredecodedRecord, bare_rmids)
    return True
